"""An integer tensor clamped on one side: torch leaves the other bound open, TVM's importer
writes it as an infinity that TVM then cannot cast to the integer type (SAM's vision
encoder failed so at folding: ``Cannot convert infinity to BigInt``)."""

from pathlib import Path

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_tvm_itself_fails_on_an_infinite_bound_of_an_integer_clip():
    # The premise, as docs/tvm.md's reproducer: were TVM to take it, the conversion is moot.
    from tvm import relax

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "int64"))
    with builder.function("main", [x]):
        builder.emit_func_output(builder.emit(relax.op.clip(x, float("-inf"), 26)))
    with pytest.raises(Exception, match="Cannot convert infinity to BigInt"):  # noqa: PT011
        relax.build(builder.get(), "llvm")


def test_an_integer_clamp_open_on_one_side_plans_and_matches_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:clamped_index", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, report.error
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff == 0.0
