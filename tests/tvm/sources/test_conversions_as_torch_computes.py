"""Operators TVM 0.27 takes otherwise than torch computes them, each found by a sweep family
nobody here had run and converted as torch computes it (planner/tvm/sources/
torch_conversions.py; the let-bindings in planner/tvm/plan/kernel_accesses.py): a small
model per operator compiles under tvm-stock and best-fit+rewrites, plans and matches PyTorch.
Where TVM itself is at fault, docs/tvm.md holds a reproducer."""

from pathlib import Path

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"

#: (factory in tests/tvm/torch_models.py, what failed before, largest difference from
#: PyTorch, largest planned bytes or None)
CASES = [
    # TVM casts the importer's infinite bound to int64 and stops at folding (SAM's vision
    # encoder: "Cannot convert infinity to BigInt").
    ("clamped_index", "an integer clamp open on one side", 0.0, None),
    # TVM pads the input to the whole window: a 512 x 512 pad of 8 planes would be 8 MiB of
    # kernel workspace (EfficientNet's pooler asked for 64 GB and died with bad_alloc).
    ("wide_pool", "an average pool whose window covers its input", 1e-6, 64 * 1024),
    # The importer has neither (timm's Hiera: "Unsupported function types ['amax.default']").
    ("extremes", "amax and amin over one, several and all dimensions", 0.0, None),
    # TVM's index refuses to broadcast index tensors (F.unfold's decomposition; timm's TNT:
    # "index_tensor: cannot broadcast index shapes").
    ("unfolded", "an index by integer tensors that broadcast", 1e-6, None),
    # TVM 0.27's let-bindings (Bind, no body) stopped the rewrite analysis: every model with
    # a GroupNorm (BiT, PoolFormer) failed to build under +rewrites.
    ("group_normed", "a GroupNorm under +rewrites", 1e-5, None),
]


@pytest.mark.parametrize(("factory", "why", "largest_diff", "at_most"), CASES,
                         ids=[case[0] for case in CASES])
def test_the_operator_plans_and_computes_as_torch(factory, why, largest_diff, at_most):
    reports = compile_model(
        ModelSource(f"{MODELS}:{factory}", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, f"{why}: {report.error}"
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff <= largest_diff
        if at_most is not None:
            assert report.planned_bytes < at_most, report.planned_bytes
    stock, rewritten = reports
    assert rewritten.planned_bytes <= stock.planned_bytes


def test_tvm_itself_fails_on_an_infinite_bound_of_an_integer_clip():
    # docs/tvm.md's reproducer: were TVM to take it, the clamp's conversion would be moot.
    from tvm import relax

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "int64"))
    with builder.function("main", [x]):
        builder.emit_func_output(builder.emit(relax.op.clip(x, float("-inf"), 26)))
    with pytest.raises(Exception, match="Cannot convert infinity to BigInt"):  # noqa: PT011
        relax.build(builder.get(), "llvm")
