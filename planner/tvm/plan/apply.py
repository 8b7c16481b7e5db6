"""Write a plan back into a lowered Relax function as one arena with offsets.

Each planned ``v = R.builtin.alloc_tensor(shape, dtype, ...)`` becomes
``v_at = R.memory.alloc_tensor(arena, offset, shape, dtype)`` followed by
``v = R.memory.ensure_zero_offset(v_at)``: TVM's kernels reject a tensor whose
``byte_offset`` is not zero, and on CPU that op only moves the data pointer, so nothing is
copied. A call the plan hands overlapping tensors runs its kernel without ``noalias``
(:mod:`planner.tvm.plan.noalias`). Everything else is left to TVM's finalisation passes, run
without its own planner.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm
from tvm import relax

from planner.tvm.plan.extract import Extraction, bindings_of
from planner.tvm.plan.noalias import SharedPointerError, unalias_overlapping_calls


class PlanApplicationError(ValueError):
    """The plan does not fit the function it is meant for."""


def apply_plan(
    mod: tvm.IRModule,
    extraction: Extraction,
    offsets: Mapping[str, int],
    arena_bytes: int,
    *,
    drop: frozenset[int] | set[int] = frozenset(),
) -> tvm.IRModule:
    """Return ``mod`` with the planned tensors of ``extraction.function`` placed in one arena.

    Bindings whose index is in ``drop`` are left out. A kernel call handed tensors that
    share bytes calls a copy of its kernel without ``noalias``, whichever rule or planner
    put them there.
    """
    func = mod[extraction.function]
    bindings = bindings_of(func)
    if len(bindings) != extraction.num_bindings:
        raise PlanApplicationError("the function changed since the problem was extracted")
    by_index = {t.binding_index: t for t in extraction.tensors}
    missing = [t.name for t in extraction.tensors if t.name not in offsets]
    if missing:
        raise PlanApplicationError(f"plan has no offset for {', '.join(missing[:5])}")
    try:
        mod, _ = unalias_overlapping_calls(mod, extraction, offsets, drop=drop)
    except SharedPointerError as exc:
        raise PlanApplicationError(str(exc)) from None
    func = mod[extraction.function]
    bindings = bindings_of(func)

    arena = relax.Var("peakwatch_arena", relax.ObjectType())
    new_bindings: list[relax.Binding] = []
    if by_index:
        new_bindings.append(
            relax.VarBinding(
                arena,
                relax.op.memory.alloc_storage(relax.ShapeExpr([arena_bytes]), 0, "global", "uint8"),
            )
        )
    for index, binding in enumerate(bindings):
        if index in drop:
            continue  # a call the plan made redundant (an elided concat copy)
        tensor = by_index.get(index)
        if tensor is None:
            new_bindings.append(binding)
            continue
        shape, dtype = binding.value.args[0], binding.value.args[1]
        placed = relax.Var(f"{binding.var.name}_at", binding.var.ty)
        new_bindings.append(
            relax.VarBinding(
                placed,
                relax.op.memory.alloc_tensor(arena, offsets[tensor.name], shape, dtype),
            )
        )
        new_bindings.append(
            relax.VarBinding(binding.var, relax.op.memory.ensure_zero_offset(placed))
        )

    body = relax.SeqExpr([relax.BindingBlock(new_bindings)], func.body.body)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    result = tvm.IRModule(mod.functions, attrs=mod.attrs)
    result[extraction.function] = new_func
    return result
