"""Kernels with let-bindings: in TVM 0.27 a ``LetStmt`` is a ``Bind`` with no body (it holds
for the statements after it in its sequence). The rewrite analysis walked a body that is not
there, and every model with a GroupNorm (BiT, PoolFormer, diffusion U-Nets) failed to build
under +rewrites with "'Bind' object has no attribute 'body'"."""

from pathlib import Path

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_a_group_norm_plans_under_rewrites_and_matches_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:group_normed", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
    stock, rewritten = reports
    assert rewritten.planned_bytes <= stock.planned_bytes
