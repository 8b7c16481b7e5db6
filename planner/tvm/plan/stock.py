"""TVM's own plan (``StaticPlanBlockMemory``'s storages) in the same terms as ours."""

from __future__ import annotations

import tvm

from planner.tvm.plan.extract import Extraction, align, bindings_of


def stock_arena(planned: tvm.IRModule, extraction: Extraction) -> int:
    """The bytes of every storage TVM's planner allocates in the function, aligned."""
    alloc_storage = tvm.ir.Op.get("relax.memory.alloc_storage")
    return sum(
        align(int(b.value.args[0].values[0]))
        for b in bindings_of(planned[extraction.function])
        if isinstance(b.value, tvm.relax.Call) and b.value.op == alloc_storage
    )


def stock_offsets(planned: tvm.IRModule, extraction: Extraction) -> tuple[dict[str, int], int]:
    """Express TVM's storage sharing as offsets: its storages laid end to end.

    TVM's planner hands every tensor a whole storage at offset 0; putting those storages
    one after another gives a plan in the same terms as ours, so the two can be drawn,
    diffed and validated alike.
    """
    alloc_storage = tvm.ir.Op.get("relax.memory.alloc_storage")
    alloc_tensor = tvm.ir.Op.get("relax.memory.alloc_tensor")
    bases: dict[object, int] = {}
    total = 0
    placed: dict[str, int] = {}
    for binding in bindings_of(planned[extraction.function]):
        value = binding.value
        if not isinstance(value, tvm.relax.Call):
            continue
        if value.op == alloc_storage:
            size = int(value.args[0].values[0])
            bases[binding.var] = total
            total += align(size)
        elif value.op == alloc_tensor and value.args[0] in bases:
            offset = int(value.args[1].value)
            placed.setdefault(binding.var.name, bases[value.args[0]] + offset)
    offsets = {}
    for tensor in extraction.tensors:
        plain = tensor.name.split("@", 1)[0]
        if plain not in placed:
            raise ValueError(f"TVM's planner left {tensor.name} unplanned")
        offsets[tensor.name] = placed[plain]
    return offsets, total
