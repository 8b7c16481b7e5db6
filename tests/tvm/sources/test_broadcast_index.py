"""An index by integer tensors that broadcast against each other (``F.unfold``'s
decomposition, ``x[:, :, [[0], [2]], [1, -1, 3]]``): TVM 0.27's index refuses to broadcast
them (timm's TNT stopped at import with "index_tensor: cannot broadcast index shapes")."""

from pathlib import Path

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_broadcast_indices_take_what_torch_takes():
    reports = compile_model(
        ModelSource(f"{MODELS}:unfolded", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-6
