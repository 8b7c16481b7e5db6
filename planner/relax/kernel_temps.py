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

from planner.relax.extract import bindings_of

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


@dataclass
class KernelTemporaries:
    lifted: list[KernelTemporary]
    on_stack: list[KernelTemporary]

    @property
    def lifted_bytes(self) -> int:
        """The most any one kernel holds at once: what TVM's workspace pool keeps."""
        per_kernel: dict[str, int] = {}
        for temp in self.lifted:
            per_kernel[temp.kernel] = per_kernel.get(temp.kernel, 0) + temp.size
        return max(per_kernel.values(), default=0)

    @property
    def stack_bytes(self) -> int:
        per_kernel: dict[str, int] = {}
        for temp in self.on_stack:
            per_kernel[temp.kernel] = per_kernel.get(temp.kernel, 0) + temp.size
        return max(per_kernel.values(), default=0)


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
    found = []
    for buffer in block.alloc_buffers:
        size = _nbytes(buffer)
        if size is None or buffer.scope() != "global":
            continue
        shape = tuple(int(d) for d in buffer.shape)
        found.append(KernelTemporary(kernel, buffer.name, shape, str(buffer.dtype), size))
    return found


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
