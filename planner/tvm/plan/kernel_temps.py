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

import dataclasses
from dataclasses import dataclass

import tvm
from tvm import relax

from planner.tvm.compat import SBlock, SBlockRealize
from planner.tvm.plan.extract import bindings_of
from planner.tvm.plan.kernel_accesses import block_touches
from planner.tvm.plan.workspace import page_rounded

#: TVM keeps a kernel temporary on the stack only where its size is a constant below this
#: (``kMaxStackAlloca``; LowerTVMBuiltin tests ``size < kMaxStackAlloca``): one of exactly
#: 1 KiB, or of a symbolic size, goes through the workspace pool, which is what costs
#: memory, a 4 KiB page at least (see :mod:`planner.tvm.plan.workspace`).
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
    #: The buffer's shape in the kernel's own symbols, where it has any (``shape`` and
    #: ``size`` then hold its value at the bounds); each call site states it in its own.
    dims: tuple = ()


@dataclass
class KernelTemporaries:
    lifted: list[KernelTemporary]
    on_stack: list[KernelTemporary]

    @property
    def lifted_bytes(self) -> int:
        """The most any one kernel holds at once: an estimate of what TVM's workspace pool
        must hold, where :mod:`planner.tvm.plan.workspace` cannot count it from the build (a
        request in a parallel loop, a symbol no call bounds).

        TVM allocates each temporary around the blocks that use it, so within a kernel
        only the temporaries of overlapping block ranges add up; its pool hands out whole
        4 KiB pages, so each counts as its pages.
        """
        return _most_live([
            dataclasses.replace(t, size=page_rounded(t.size)) for t in self.lifted
        ])

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
    # From the loads and stores the block makes: its declared regions can miss a buffer
    # it reads (see planner.tvm.plan.kernel_accesses), which would end a lifetime too early.
    return block_touches(block, buffer)


def _nbytes(buffer, bounds: dict[str, int] | None = None) -> int | None:
    """The buffer's bytes, at the bounds of its kernel's symbols; None where unbounded."""
    count = 1
    for dim in _bounded_shape(buffer, bounds) or [None]:
        if dim is None:
            return None
        count *= dim
    dt = tvm.DataType(str(buffer.dtype))
    return count * ((dt.bits * dt.lanes + 7) // 8)


def _bounded_shape(buffer, bounds: dict[str, int] | None) -> list[int] | None:
    from planner.tvm.plan.extract import ExtractionError, upper_bound

    try:
        return [upper_bound(dim, bounds or {}) for dim in buffer.shape]
    except ExtractionError:
        return None


def symbol_bounds(kernel: tvm.tirx.PrimFunc, args, bounds: dict[str, int]) -> dict[str, int]:
    """The upper bound of each of ``kernel``'s shape symbols, called with Relax ``args``.

    A kernel names its dimensions with symbols of its own; they take the values of the
    arguments' dimensions (or of scalar arguments) at the call, whose bounds are known.
    """
    return {
        name: _bound_or_none(expr, bounds)
        for name, expr in _call_symbols(kernel, args).items()
        if _bound_or_none(expr, bounds) is not None
    }


def _bound_or_none(expr, bounds) -> int | None:
    from planner.tvm.plan.extract import ExtractionError, upper_bound

    try:
        return upper_bound(expr, bounds)
    except ExtractionError:
        return None


def _call_symbols(kernel: tvm.tirx.PrimFunc, args) -> dict[str, object]:
    """``kernel``'s shape symbols by name, as expressions over the caller's symbols."""
    found: dict[str, object] = {}
    for param, arg in zip(kernel.params, args, strict=False):
        shape = getattr(param, "shape", None)
        if shape is None:
            # A scalar symbol is passed as the caller's expression itself.
            if not isinstance(getattr(arg, "ty", None), relax.TensorType):
                found.setdefault(param.name, arg)
            continue
        ty = arg.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            continue
        for dim, given in zip(shape, ty.shape.values, strict=False):
            if isinstance(dim, tvm.tirx.Var):
                found.setdefault(dim.name, given)
    return found


def _restate(expr, symbols: dict[str, object]):
    """``expr`` over a kernel's symbols, restated over the caller's (see _call_symbols)."""
    tirx = tvm.tirx
    if isinstance(expr, tirx.IntImm):
        return expr
    if isinstance(expr, tirx.Var):
        return symbols[expr.name]
    combine = {
        tirx.Add: lambda a, b: a + b,
        tirx.Sub: lambda a, b: a - b,
        tirx.Mul: lambda a, b: a * b,
        tirx.FloorDiv: tirx.floordiv,
        tirx.FloorMod: tirx.floormod,
        tirx.Max: tirx.max,
        tirx.Min: tirx.min,
    }
    for kind, rebuild in combine.items():
        if isinstance(expr, kind):
            return rebuild(_restate(expr.a, symbols), _restate(expr.b, symbols))
    raise KeyError(f"cannot restate {expr}")


def _root_block(func: tvm.tirx.PrimFunc) -> SBlock | None:
    body = func.body
    return body.block if isinstance(body, SBlockRealize) else None


def temporaries_of(
    mod: tvm.IRModule, kernel: str, bounds: dict[str, int] | None = None
) -> list[KernelTemporary]:
    """``kernel``'s temporaries; ``bounds`` bound its own shape symbols (symbol_bounds)."""
    func = mod[kernel]
    block = _root_block(func)
    if block is None:
        return []
    blocks = kernel_blocks(func) or []
    found = [_temporary(kernel, buffer, blocks, bounds) for buffer in block.alloc_buffers]
    return [temp for temp in found if temp is not None]


def _temporary(kernel: str, buffer, blocks: list[SBlock], bounds) -> KernelTemporary | None:
    size = _nbytes(buffer, bounds)
    if size is None or buffer.scope() != "global":
        return None
    shape = tuple(_bounded_shape(buffer, bounds))
    symbolic = any(not isinstance(d, tvm.tirx.IntImm) for d in buffer.shape)
    used = [i for i, b in enumerate(blocks) if _touches(b, buffer)]
    first, last = (used[0], used[-1]) if used else (0, max(0, len(blocks) - 1))
    return KernelTemporary(
        kernel,
        buffer.name,
        shape,
        str(buffer.dtype),
        size,
        first,
        last,
        max(1, len(blocks)),
        tuple(buffer.shape) if symbolic else (),
    )


def refine_lifetimes(extraction, temporaries: KernelTemporaries):
    """A copy of ``extraction`` whose time also counts the blocks inside each kernel.

    Binding ``i`` becomes steps ``i*K .. i*K+K-1``. Ordinary tensors keep whole bindings; a
    lifted temporary lives only from the first to the last block of its kernel that uses
    it, so a padded input can share bytes with a result computed after the padding died.
    """
    from dataclasses import replace

    from planner.tvm.plan.extract import Extraction

    scale = temporaries.max_blocks + 1
    by_name = {f"{t.kernel}.{t.name}": t for t in temporaries.lifted}
    tensors = []
    for tensor in extraction.tensors:
        temp = by_name.get(tensor.name.split("@", 1)[0])
        if temp is None:
            tensors.append(replace(tensor, lower=tensor.lower * scale, upper=tensor.upper * scale))
        else:
            call = tensor.upper - 1
            tensors.append(
                replace(
                    tensor,
                    lower=call * scale + temp.first_block,
                    upper=call * scale + temp.last_block + 1,
                )
            )
    return Extraction(extraction.function, tensors, extraction.escaping, extraction.num_bindings)


def lift_kernel_temporaries(
    mod: tvm.IRModule,
    function: str = "forward",
    *,
    min_bytes: int = STACK_LIMIT_BYTES,
    bounds: dict[str, int] | None = None,
) -> tuple[tvm.IRModule, KernelTemporaries]:
    """Return ``mod`` with every kernel temporary of at least ``min_bytes`` (or of a
    symbolic size, which TVM never puts on the stack) lifted.

    Temporaries whose shape follows symbolic dimensions are sized at the bounds of the
    caller's symbols (``bounds``, by name) and allocated by each call in its own terms.
    """
    func = mod[function]
    bounds = bounds or {}
    called = {}
    for b in bindings_of(func):
        if (
            isinstance(b.value, relax.Call)
            and isinstance(b.value.op, relax.GlobalVar)
            and isinstance(mod[b.value.op], tvm.tirx.PrimFunc)
        ):
            # Where one kernel serves several calls, size its temporaries for the largest.
            found = symbol_bounds(mod[b.value.op], b.value.args, bounds)
            known = called.setdefault(b.value.op, {})
            for name, value in found.items():
                known[name] = max(value, known.get(name, value))
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
        blocks = kernel_blocks(kernel) or []
        moved, kept = [], []
        for buffer in block.alloc_buffers:
            # Matched by the buffer itself: FuseTIR can leave two temporaries of one kernel
            # with the same name and different shapes, and a call site allocating one
            # shape for the other does not build.
            temp = _temporary(gvar.name_hint, buffer, blocks, called[gvar])
            if temp is not None and (temp.size >= min_bytes or temp.dims):
                # Lifted temporaries are known by kernel and name (the Relax variable, the
                # lifetimes refine_lifetimes gives them): a repeated name would give one
                # the other's lifetime, and the two would share bytes they both still need.
                taken = {t.name for _, t in moved}
                if temp.name in taken:
                    suffix = 1
                    while f"{temp.name}_{suffix}" in taken:
                        suffix += 1
                    temp = dataclasses.replace(temp, name=f"{temp.name}_{suffix}")
                moved.append((buffer, temp))
            else:
                kept.append(buffer)
                if temp is not None:
                    stack.append(temp)
        if not moved:
            continue
        new_block = SBlock(
            block.iter_vars,
            block.reads,
            block.writes,
            block.name_hint,
            block.body,
            block.init,
            kept,
            block.match_buffers,
            block.annotations,
        )
        realize = SBlockRealize(kernel.body.iter_values, kernel.body.predicate, new_block)
        # A fresh GlobalVar typed by the BlockBuilder: the old one carries the old
        # signature's type, which TVM would keep checking calls against.
        del functions[gvar]
        renamed[gvar] = builder.add_func(
            tvm.tirx.PrimFunc(
                [*kernel.params, *(buffer for buffer, _ in moved)],
                realize,
                kernel.ret_type,
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
        symbols = _call_symbols(mod[value.op], value.args) if any(t.dims for t in temps) else {}
        for temp in temps:
            if temp.dims:
                shape = relax.ShapeExpr([_restate(d, symbols) for d in temp.dims])
            else:
                shape = relax.ShapeExpr([tvm.tirx.IntImm("int64", d) for d in temp.shape])
            var = relax.Var(f"{temp.kernel}.{temp.name}", relax.TensorType(shape, temp.dtype))
            new_bindings.append(
                relax.VarBinding(var, relax.op.builtin.alloc_tensor(shape, temp.dtype, 0))
            )
            extra.append(var)
        call = relax.Call(renamed[value.op], [*value.args, *extra], value.attrs, value.ty_args)
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
