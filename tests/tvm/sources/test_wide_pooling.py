"""An average pool whose window is wider than its input: torch clips the window to the map,
TVM pads the input to the whole window and allocates it (transformers' EfficientNet, a
1 x 2560 x 1 x 1 map under a 2560-wide window, asked for a 64 GB pad buffer and its stock
build failed with std::bad_alloc)."""

from pathlib import Path

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_a_window_wider_than_the_map_is_its_mean_and_holds_no_padded_copy():
    reports = compile_model(
        ModelSource(f"{MODELS}:wide_pool", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        # A 512 x 512 pad of 8 planes would be 8 MiB of kernel workspace.
        assert report.planned_bytes < 64 * 1024, report.planned_bytes
