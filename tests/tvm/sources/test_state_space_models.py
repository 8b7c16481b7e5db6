"""State-space models: Mamba2 splits its projection with pieces of width 0, which Relax's
split refused (``split_indices must be sorted``) when the module was folded; Mamba's loop
over the sequence fixes its length, and the refusal names the loop."""

from pathlib import Path

import pytest

from planner.shapes import parse_cli, parse_cli_dims
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.shape_axis import compile_shapes
from planner.tvm.sources import ModelSource, ModelSourceError

MODELS = Path(__file__).parents[1] / "torch_models.py"


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


def test_mambas_loop_over_the_length_is_named_with_what_to_change():
    axis = parse_cli_dims(["seq=ids:1"], parse_cli(["seq=4,8"]))

    with pytest.raises(ModelSourceError) as refused:
        compile_shapes(ModelSource(f"{MODELS}:mamba", {}), ["best-fit"], axis, repeat=0,
                       memory_configs=())

    message = str(refused.value)
    assert "specialized it to be a constant" in message  # torch's own line, kept
    assert "the length was fixed at transformers/models/mamba/modeling_mamba.py:" in message
    assert "in slow_forward: for i in range(seq_len):" in message
    assert "compile each length as a model of its own" in message
