"""Lift the temporary buffers of fused kernels into the Relax function, to be planned.

After fusion a kernel such as ``fused_conv2d_add_relu`` keeps its own temporaries (the
padded input, the convolution result before the add) as ``alloc_buffer`` s of its root
block. At run time those above 1 KB become ``TVMBackendAllocWorkspace`` calls into a
per-thread pool that is never returned; smaller ones sit on the stack. Neither is visible
to a Relax memory plan, though on ResNet-18 they are as large as all intermediates.

Lifting turns each such buffer into an extra parameter of its kernel, and every call site
allocates it with ``R.builtin.alloc_tensor`` right before the call: the temporary becomes
an ordinary intermediate that lives exactly over that call, and the planner places it
into the gaps of the arena with everything else (the Unified Static Memory Planner's idea,
which TVM no longer has).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.s_tir.stmt import SBlock, SBlockRealize

from planner.tvm.extract import bindings_of

#: TVM keeps kernel temporaries up to this size on the stack (see TVM-NOTES); above it
#: they go through the workspace pool, which is what costs memory.
STACK_LIMIT_BYTES = 1024


@dataclass(frozen=True)
class KernelTemporary:
    kernel: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    size: int
    #: The blocks of the kernel (in execution order) that first and last touch it.
    first_block: int = 0
    last_block: int = 0
    blocks: int = 1


@dataclass
class KernelTemporaries:
    lifted: list[KernelTemporary]
    on_stack: list[KernelTemporary]

    @property
    def lifted_bytes(self) -> int:
        """The most any one kernel holds at once: what TVM's workspace pool must hold.

        TVM allocates each temporary around the blocks that use it, so within a kernel
        only the temporaries of overlapping block ranges add up.
        """
        return _most_live(self.lifted)

    @property
    def stack_bytes(self) -> int:
        return _most_live(self.on_stack)

    @property
    def max_blocks(self) -> int:
        return max((t.blocks for t in [*self.lifted, *self.on_stack]), default=1)


def _most_live(temps: list[KernelTemporary]) -> int:
    live: dict[tuple[str, int], int] = {}
    for temp in temps:
        for block in range(temp.first_block, temp.last_block + 1):
            key = (temp.kernel, block)
            live[key] = live.get(key, 0) + temp.size
    return max(live.values(), default=0)


class _Unknown(Exception):
    pass


def kernel_blocks(kernel: tvm.tirx.PrimFunc) -> list[SBlock] | None:
    """The blocks of a legalised kernel in execution order, or None if it is not one."""
    body = kernel.body
    if not isinstance(body, SBlockRealize):
        return None
    found: list[SBlock] = []

    def walk(node) -> None:
        # Legalised kernels are loop nests around blocks; anything else is unexpected
        # enough that callers should treat the kernel as unknown.
        if isinstance(node, SBlockRealize):
            found.append(node.block)
            walk(node.block.body)
        elif isinstance(node, tvm.tirx.SeqStmt):
            for child in node.seq:
                walk(child)
        elif isinstance(node, tvm.tirx.For):
            walk(node.body)
        elif isinstance(node, tvm.tirx.BufferStore | tvm.tirx.Evaluate):
            return
        else:
            raise _Unknown(type(node).__name__)

    try:
        walk(body.block.body)
    except _Unknown:
        return None
    return found


def _touches(block: SBlock, buffer) -> bool:
    return any(r.source.same_as(buffer) for r in [*block.reads, *block.writes])


def _nbytes(buffer) -> int | None:
    count = 1
    for dim in buffer.shape:
        if not isinstance(dim, tvm.tirx.IntImm):
            return None
        count *= int(dim)
    dt = tvm.DataType(str(buffer.dtype))
    return count * ((dt.bits * dt.lanes + 7) // 8)


def _root_block(func: tvm.tirx.PrimFunc) -> SBlock | None:
    body = func.body
    return body.block if isinstance(body, SBlockRealize) else None


def temporaries_of(mod: tvm.IRModule, kernel: str) -> list[KernelTemporary]:
    func = mod[kernel]
    block = _root_block(func)
    if block is None:
        return []
    blocks = kernel_blocks(func) or []
    found = []
    for buffer in block.alloc_buffers:
        size = _nbytes(buffer)
        if size is None or buffer.scope() != "global":
            continue
        shape = tuple(int(d) for d in buffer.shape)
        used = [i for i, b in enumerate(blocks) if _touches(b, buffer)]
        first, last = (used[0], used[-1]) if used else (0, max(0, len(blocks) - 1))
        found.append(KernelTemporary(
            kernel, buffer.name, shape, str(buffer.dtype), size, first, last,
            max(1, len(blocks)),
        ))
    return found


def refine_lifetimes(extraction, temporaries: KernelTemporaries):
    """A copy of ``extraction`` whose time also counts the blocks inside each kernel.

    Binding ``i`` becomes steps ``i*K .. i*K+K-1``. Ordinary tensors keep whole bindings; a
    lifted temporary lives only from the first to the last block of its kernel that uses
    it, so a padded input can share bytes with a result computed after the padding died.
    """
    from dataclasses import replace

    from planner.tvm.extract import Extraction

    scale = temporaries.max_blocks + 1
    by_name = {f"{t.kernel}.{t.name}": t for t in temporaries.lifted}
    tensors = []
    for tensor in extraction.tensors:
        temp = by_name.get(tensor.name.split("@", 1)[0])
        if temp is None:
            tensors.append(replace(tensor, lower=tensor.lower * scale,
                                   upper=tensor.upper * scale))
        else:
            call = tensor.upper - 1
            tensors.append(replace(tensor, lower=call * scale + temp.first_block,
                                   upper=call * scale + temp.last_block + 1))
    return Extraction(extraction.function, tensors, extraction.escaping,
                      extraction.num_bindings)


def lift_kernel_temporaries(
    mod: tvm.IRModule, function: str = "forward", *, min_bytes: int = STACK_LIMIT_BYTES + 1
) -> tuple[tvm.IRModule, KernelTemporaries]:
    """Return ``mod`` with every kernel temporary of at least ``min_bytes`` lifted."""
    func = mod[function]
    called = {
        b.value.op
        for b in bindings_of(func)
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.GlobalVar)
        and isinstance(mod[b.value.op], tvm.tirx.PrimFunc)
    }
    functions = dict(mod.functions)
    builder = relax.BlockBuilder()
    renamed: dict[relax.GlobalVar, relax.GlobalVar] = {}
    lifted: dict[relax.GlobalVar, list[KernelTemporary]] = {}
    stack: list[KernelTemporary] = []
    for gvar in called:
        kernel = mod[gvar]
        block = _root_block(kernel)
        if block is None:
            continue
        temps = {t.name: t for t in temporaries_of(mod, gvar.name_hint)}
        moved, kept = [], []
        for buffer in block.alloc_buffers:
            temp = temps.get(buffer.name)
            if temp is not None and temp.size >= min_bytes:
                moved.append((buffer, temp))
            else:
                kept.append(buffer)
                if temp is not None:
                    stack.append(temp)
        if not moved:
            continue
        new_block = SBlock(
            block.iter_vars, block.reads, block.writes, block.name_hint, block.body,
            block.init, kept, block.match_buffers, block.annotations,
        )
        realize = SBlockRealize(kernel.body.iter_values, kernel.body.predicate, new_block)
        # A fresh GlobalVar typed by the BlockBuilder: the old one carries the old
        # signature's type, which TVM would keep checking calls against.
        del functions[gvar]
        renamed[gvar] = builder.add_func(
            tvm.tirx.PrimFunc(
                [*kernel.params, *(buffer for buffer, _ in moved)], realize, kernel.ret_type,
                kernel.attrs,
            ),
            gvar.name_hint,
        )
        lifted[gvar] = [temp for _, temp in moved]

    new_bindings: list[relax.Binding] = []
    for binding in bindings_of(func):
        value = binding.value
        temps = lifted.get(value.op) if isinstance(value, relax.Call) else None
        if not temps:
            new_bindings.append(binding)
            continue
        extra = []
        for temp in temps:
            shape = relax.ShapeExpr([tvm.tirx.IntImm("int64", d) for d in temp.shape])
            var = relax.Var(f"{temp.kernel}.{temp.name}", relax.TensorType(shape, temp.dtype))
            new_bindings.append(
                relax.VarBinding(var, relax.op.builtin.alloc_tensor(shape, temp.dtype, 0))
            )
            extra.append(var)
        call = relax.Call(
            renamed[value.op], [*value.args, *extra], value.attrs, value.ty_args
        )
        new_bindings.append(relax.VarBinding(binding.var, call))
    body = relax.SeqExpr([relax.BindingBlock(new_bindings)], func.body.body)
    entry = next(gv for gv in functions if gv.name_hint == function)
    functions[entry] = relax.Function(
        func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span
    )
    for gvar in renamed.values():
        functions[gvar] = builder.get()[gvar]
    result = tvm.IRModule(functions, attrs=mod.attrs)
    all_lifted = [temp for temps in lifted.values() for temp in temps]
    return result, KernelTemporaries(all_lifted, stack)
