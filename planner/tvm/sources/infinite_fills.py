"""Tensors filled with an infinity or NaN, in a form TVM 0.27 can legalize.

``R.full(shape, R.const(-inf))`` and ``R.full_like(x, R.const(-inf))`` (a mask's fill, a
router's "not chosen" score: Llama4 fills with ``-inf`` so) stop at folding with
``TypeError: argument of type 'PrimType' is not iterable``: TVM's legalization hands
``topi.full`` the call's dtype as a ``PrimType`` where it expects a string, and ``topi.full``
reads that string only to check an infinite or NaN fill. A plain ``relax.build`` fails the
same way (docs/tvm.md has the reproducer). Each such call is rewritten as the same fill of
1 times the non-finite constant: the same values (IEEE: ``1 * -inf == -inf``, ``1 * nan`` is
NaN), through operators that legalize.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
from tvm import relax

_FILLS = ("relax.full", "relax.full_like")


def _non_finite(value) -> float | None:
    """The fill's value where it is a scalar constant holding an infinity or NaN."""
    if not isinstance(value, tvm.ir.expr.Constant):
        return None
    data = value.value.numpy()
    if data.size != 1 or not np.issubdtype(data.dtype, np.floating):
        return None
    number = float(data.reshape(()))
    return number if math.isinf(number) or math.isnan(number) else None


@relax.expr_functor.mutator
class _FiniteFills(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        op = getattr(call.op, "name", "")
        if op not in _FILLS or _non_finite(call.args[1]) is None:
            return call
        fill = call.args[1]
        dtype = str(fill.value.numpy().dtype)
        one = relax.const(1.0, dtype)
        if op == "relax.full":
            ones = relax.op.full(call.args[0], one, dtype=call.attrs.dtype or dtype)
        else:
            ones = relax.op.full_like(call.args[0], one, dtype=call.attrs.dtype)
        return relax.op.multiply(self.builder_.normalize(ones), fill)


@relax.transform.function_pass(opt_level=0, name="PeakwatchFiniteFills")
class _FiniteFillsPass:
    def transform_function(self, func, mod, _ctx):
        if not _has_non_finite_fill(func):
            return func
        return _FiniteFills(mod).visit_expr(func)


def finite_fills(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every infinite or NaN fill rewritten as described above."""
    return _FiniteFillsPass()(mod)


def _has_non_finite_fill(func) -> bool:
    found = []

    @relax.expr_functor.visitor
    class _Find(relax.PyExprVisitor):
        def visit_call_(self, call):
            if getattr(call.op, "name", "") in _FILLS and _non_finite(call.args[1]) is not None:
                found.append(call)
            super().visit_call_(call)

    _Find().visit_expr(func)
    return bool(found)
