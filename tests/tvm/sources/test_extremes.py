"""``amax`` and ``amin``, which TVM 0.27's importer lacks (timm's Hiera stopped at import:
"Unsupported function types ['amax.default']"), convert as Relax's max and min."""

from pathlib import Path

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_amax_and_amin_over_any_dimensions_match_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:extremes", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff == 0.0
