"""State-space models: Mamba2 splits its projection with pieces of width 0, which Relax's
split refused (``split_indices must be sorted``) when the module was folded."""

from pathlib import Path

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.zoo import ModelSource

MODELS = Path(__file__).with_name("torch_models.py")


def test_a_split_with_empty_pieces_builds_and_matches_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:empty_pieces", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, (report.strategy, report.error)
        assert report.reference_check == "PyTorch"


@pytest.mark.slow
def test_mamba2_builds_plans_and_matches_pytorch():
    reports = {r.strategy: r for r in compile_model(
        ModelSource(f"{MODELS}:mamba2", {}), [STOCK, "best-fit", "best-fit+rewrites"],
        repeat=0, memory_configs=(),
    )}

    for report in reports.values():
        assert report.outputs_match is True, (report.strategy, report.error)
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-4
    assert reports["best-fit"].planned_bytes < reports[STOCK].planned_bytes
