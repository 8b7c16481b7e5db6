"""A tensor filled with -inf (a router's "not chosen" score, a mask) stopped TVM 0.27 at
folding (``argument of type 'PrimType' is not iterable``, in TVM's legalization of full): it
is rewritten as a fill of 1 times the constant, the same values (issue 59)."""

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource
from planner.tvm.sources.infinite_fills import finite_fills

MODELS = '''import torch


class NotChosen(torch.nn.Module):
    """Scores of the two largest entries kept, the rest -inf, then a softmax: what a router
    that scatters its top-k into a -inf tensor computes."""

    def forward(self, x):
        low = torch.full_like(x, float("-inf"))
        top, where = torch.topk(x, 2, dim=-1)
        kept = low.scatter(-1, where, top)
        floor = torch.full((x.shape[-1],), float("-inf"))
        return torch.softmax(torch.maximum(kept, floor), dim=-1)


def not_chosen():
    torch.manual_seed(0)
    return NotChosen(), (torch.randn(3, 6),)
'''


@R.function
def _fill(x: R.Tensor((4,), "float32")):
    with R.dataflow():
        low = R.full_like(x, R.const(float("-inf"), "float32"))
        y = R.maximum(x, low)
        R.output(y)
    return y


def test_tvm_itself_cannot_build_an_infinite_fill_and_the_rewrite_can():
    module = tvm.IRModule({"main": _fill.with_attr("global_symbol", "main")})
    # The premise, TVM's own: were this to build, the rewrite would be moot.
    with pytest.raises(TypeError, match="PrimType"):
        relax.build(module, target="llvm")

    built = relax.build(finite_fills(module), target="llvm")
    vm = relax.VirtualMachine(built, tvm.cpu())
    x = np.array([1.0, -2.0, 3.0, 0.5], "float32")
    assert np.array_equal(vm["main"](tvm.runtime.tensor(x)).numpy(), x)


def test_a_model_that_fills_with_minus_infinity_builds_and_matches(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)

    reports = compile_model(
        ModelSource(str(tmp_path / "models.py") + ":not_chosen"), [STOCK, "best-fit"],
        repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
