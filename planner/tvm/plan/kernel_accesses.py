"""What a kernel really reads and writes, and in which order: the ground for in-place proofs.

A block's declared ``T.reads``/``T.writes`` are annotations, and after FuseTIR they can be
wrong: a fused transpose's read ``compute[vj, vi]`` was missing from its block's read list,
and a rule trusting the list merged the output over its input. Everything here is taken
from the statements themselves: the ``BufferLoad`` s in a block's body and init, the
``BufferStore`` s, their index expressions and the loops around them.

Legalised kernels are a sequence of serial loop nests, each around one block; anything else
(shared loops, parallel or vectorised loops, ``if`` statements around blocks) is reported as
unknown, and callers refuse to share memory inside such a kernel. Kernels scheduled for a
GPU (thread-bound loops) are read by :func:`gpu_kernel` and proven by
:func:`gpu_store_over_source`, thread by thread (see the section on them below).

Three proofs that ``target`` may be written into the bytes of ``source`` (at ``delta``
bytes from the start of ``source``), weakest assumption first:

- **order**: every access of ``source`` is in a loop nest that runs before the first nest
  that stores to ``target``; true for any shapes, symbolic ones included;
- **elementwise**: the one nest that both reads ``source`` and first writes ``target``
  reads ``source`` only at the element it writes, each loop point once, with no init;
- **trace**: for static shapes, every access of every loop point is evaluated in execution
  order, and each byte of ``target`` is first written only after the last access of the
  ``source`` bytes under it. This is what lets a pooling write into the start of its input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import tvm
import tvm_ffi

from planner.tvm.compat import SBlock, SBlockRealize

#: Loop points evaluated per nest at most; beyond it (large convolutions) the trace proof
#: is not attempted, which only ever refuses a rewrite.
TRACE_LIMIT = 1 << 20

_SERIAL = 0
_REDUCE = 2


@dataclass
class Nest:
    """One top-level loop nest around one block, with the accesses its body makes."""

    loops: list[tvm.tirx.For]
    realize: SBlockRealize
    loads: list
    stores: list[tvm.tirx.BufferStore]
    init_stores: list[tvm.tirx.BufferStore]

    @property
    def block(self) -> SBlock:
        return self.realize.block

    def loaded(self, buffer) -> list:
        return [ld for ld in self.loads if load_buffer(ld).same_as(buffer)]

    def stored(self, buffer) -> list[tvm.tirx.BufferStore]:
        return [st for st in [*self.init_stores, *self.stores] if st.buffer.same_as(buffer)]

    def touches(self, buffer) -> bool:
        return bool(self.loaded(buffer) or self.stored(buffer))


def _collect(stmt) -> tuple[list, list]:
    """Every load and store under ``stmt``; an unknown node raises, as a missed load would
    make a proof wrong."""
    loads, stores = [], []
    if stmt is not None:
        _visit(stmt, loads, stores)
    return loads, stores


def _node(name: str):
    # Releases moved some expression classes between tvm.tirx and tvm.ir.
    return getattr(tvm.tirx, name, None) or getattr(tvm.ir, name)


# 0.27 loads are ``tvm.ir.TensorLoad`` (buffer in ``.source``); earlier, ``BufferLoad``.
_LOAD = getattr(tvm.ir, "TensorLoad", None) or tvm.tirx.BufferLoad


def load_buffer(load):
    """The buffer a load reads, whichever release made it."""
    source = getattr(load, "source", None)
    return source if source is not None else load.buffer


_LEAVES = (tvm.tirx.IntImm, tvm.tirx.FloatImm, _node("StringImm"), tvm.tirx.Var)
_CHILDREN = {
    tvm.tirx.Cast: ("value",),
    tvm.tirx.Not: ("a",),
    **({tvm.tirx.BitwiseNot: ("a",)} if hasattr(tvm.tirx, "BitwiseNot") else {}),
    tvm.tirx.Select: ("condition", "true_value", "false_value"),
    _node("Call"): ("args",),
    tvm.tirx.Let: ("value", "body"),
    tvm.tirx.Broadcast: ("value",),
    tvm.tirx.Ramp: ("base", "stride"),
    tvm.tirx.SeqStmt: ("seq",),
    tvm.tirx.Evaluate: ("value",),
    tvm.tirx.IfThenElse: ("condition", "then_case", "else_case"),
    tvm.tirx.For: ("min", "extent", "body"),
    # In 0.27 a LetStmt is ``Bind``: no body, the binding holds for the statements after it
    # in its sequence, which are visited as the sequence's own.
    tvm.tirx.LetStmt: ("value", "body") if "body" in dir(tvm.tirx.LetStmt) else ("value",),
    tvm.tirx.AttrStmt: ("value", "body"),
}
# Shifts and bitwise operators are nodes of their own in 0.27 (``a >> 15`` of an int8
# requantisation is ``RShift``), calls in earlier releases: a node left out of this list
# makes every block using it "touch everything", which silently stretches the lifetimes of
# a kernel's temporaries to its end.
_BINARY_NODES = tuple(
    node
    for node in (getattr(tvm.tirx, name, None) for name in (
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "FloorDiv",
        "FloorMod",
        "Min",
        "Max",
        "EQ",
        "NE",
        "LT",
        "LE",
        "GT",
        "GE",
        "And",
        "Or",
        "LShift",
        "RShift",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
    ))
    if node is not None
)


def _visit(node, loads: list, stores: list) -> None:
    if node is None or isinstance(node, _LEAVES):
        return
    if isinstance(node, list | tuple | tvm.ir.Array):
        for child in node:
            _visit(child, loads, stores)
        return
    if isinstance(node, _LOAD):
        loads.append(node)
        _visit(list(node.indices), loads, stores)
        return
    if isinstance(node, tvm.tirx.BufferStore):
        _visit(node.value, loads, stores)
        _visit(list(node.indices), loads, stores)
        stores.append(node)
        return
    if isinstance(node, _BINARY_NODES):
        _visit(node.a, loads, stores)
        _visit(node.b, loads, stores)
        return
    for kind, fields in _CHILDREN.items():
        if isinstance(node, kind):
            for name in fields:
                _visit(getattr(node, name), loads, stores)
            return
    if isinstance(node, tvm.ir.Op):
        return
    raise _Unknown(type(node).__name__)


def kernel_nests(kernel: tvm.tirx.PrimFunc) -> list[Nest] | None:
    """The kernel's loop nests in execution order, or None if it is not plain enough."""
    body = kernel.body
    if not isinstance(body, SBlockRealize):
        return None
    top = body.block.body
    stmts = list(top.seq) if isinstance(top, tvm.tirx.SeqStmt) else [top]
    nests = []
    for stmt in stmts:
        loops = []
        while isinstance(stmt, tvm.tirx.For):
            if int(stmt.kind) != _SERIAL:
                return None
            loops.append(stmt)
            stmt = stmt.body
        if not isinstance(stmt, SBlockRealize):
            return None
        block = stmt.block
        try:
            loads, stores = _collect(block.body)
            init_loads, init_stores = _collect(block.init)
        except _Unknown:
            return None
        # Blocks inside blocks, or a body that is more than stores of values, are beyond
        # what the proofs model.
        if _has_inner_block(block.body) or not stores:
            return None
        nests.append(Nest(loops, stmt, [*init_loads, *loads], stores, init_stores))
    return nests


def block_accesses(block: SBlock) -> tuple[list, list] | None:
    """The loads and stores of ``block``'s body and init, or None if it holds statements
    the visitor does not know."""
    try:
        loads, stores = _collect(block.body)
        init_loads, init_stores = _collect(block.init)
    except _Unknown:
        return None
    if _has_inner_block(block.body):
        return None
    return [*init_loads, *loads], [*init_stores, *stores]


def block_touches(block: SBlock, buffer) -> bool:
    """Whether ``block`` loads or stores ``buffer``; True when that cannot be told."""
    try:
        loads, stores = _collect(block.body)
        init_loads, init_stores = _collect(block.init)
    except _Unknown:
        return True
    return any(load_buffer(x).same_as(buffer) for x in [*loads, *init_loads]) or any(
        x.buffer.same_as(buffer) for x in [*stores, *init_stores]
    )


def _has_inner_block(stmt) -> bool:
    if isinstance(stmt, SBlockRealize):
        return True
    if isinstance(stmt, tvm.tirx.SeqStmt):
        return any(_has_inner_block(child) for child in stmt.seq)
    if isinstance(stmt, tvm.tirx.For | tvm.tirx.LetStmt | tvm.tirx.AttrStmt):
        return _has_inner_block(getattr(stmt, "body", None))  # a 0.27 Bind has none
    if isinstance(stmt, tvm.tirx.IfThenElse):
        return _has_inner_block(stmt.then_case) or _has_inner_block(stmt.else_case)
    return False


def order_proof(nests: list[Nest], source, target) -> bool:
    """Every access of ``source`` happens in a nest before the first nest writing ``target``."""
    writes = [i for i, n in enumerate(nests) if n.stored(target)]
    touches = [i for i, n in enumerate(nests) if n.touches(source)]
    return bool(writes) and (not touches or max(touches) < min(writes))


def elementwise_proof(nests: list[Nest], source, target) -> bool:
    """Target written over source at offset 0, element by element, in one nest."""
    if not _same_layout(source, target):
        return False
    writes = [i for i, n in enumerate(nests) if n.stored(target)]
    touches = [i for i, n in enumerate(nests) if n.touches(source)]
    if not writes or not touches:
        return False
    k = min(writes)
    if max(touches) != k or nests[k].stored(source):
        return False
    nest = nests[k]
    block = nest.block
    if block.init is not None or len(nest.stores) != 1 or nest.init_stores:
        return False
    # Each loop point must visit a distinct element: the block's iterators are the loop
    # variables themselves, one each.
    loop_vars = [loop.loop_var for loop in nest.loops]
    values = list(nest.realize.iter_values)
    if (
        len(values) != len(loop_vars)
        or not all(
            isinstance(v, tvm.tirx.Var) and any(v.same_as(lv) for lv in loop_vars) for v in values
        )
        or len({id(v) for v in loop_vars}) != len(loop_vars)
    ):
        return False
    if len({v.name for v in values}) != len(values):
        return False
    (store,) = nest.stores
    iter_vars = [iv.var for iv in block.iter_vars]
    indices = list(store.indices)
    if len({str(i) for i in indices}) != len(indices) or not all(
        any(i.same_as(v) for v in iter_vars) for i in indices
    ):
        return False
    return all(
        len(ld.indices) == len(indices)
        and all(tvm_ffi.structural_equal(a, b) for a, b in zip(ld.indices, indices, strict=True))
        for ld in nest.loaded(source)
    )


def _same_layout(a, b) -> bool:
    return (
        str(a.dtype) == str(b.dtype)
        and len(a.shape) == len(b.shape)
        and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a.shape, b.shape, strict=True))
    )


def trace_proof(nests: list[Nest], source, target, delta: int = 0) -> bool:
    """Exhaustively: each target byte's first write follows the last access of it as source."""
    try:
        source_shape, target_shape = _static(source.shape), _static(target.shape)
    except _Unknown:
        return False
    if not (_plain(source) and _plain(target)) or delta < 0:
        return False
    s_item, t_item = _itemsize(source), _itemsize(target)
    s_bytes = math.prod(source_shape) * s_item
    t_bytes = math.prod(target_shape) * t_item
    unit = math.gcd(s_item, t_item, delta) if delta else math.gcd(s_item, t_item)
    lo, hi = delta, min(s_bytes, delta + t_bytes)
    if hi <= lo:
        return True  # target lies past the source's bytes: nothing is shared
    count = (hi - lo) // unit
    last_source = np.full(count, -1, dtype=np.int64)
    first_write = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    clock = 0
    try:
        for nest in nests:
            relevant = nest.touches(source) or nest.stored(target)
            points = math.prod(_static([loop.extent for loop in nest.loops]))
            if relevant:
                if points > TRACE_LIMIT:
                    return False
                env = _environment(nest)
                base = clock + 3 * np.arange(points, dtype=np.int64)
                first = _first_reduction_point(nest, env, points)
                for st in nest.init_stores:
                    if st.buffer.same_as(source):
                        _mark(
                            last_source,
                            np.maximum,
                            base[first],
                            _bytes(st.indices, source_shape, s_item, env, points)[first],
                            s_item,
                            lo,
                            hi,
                            unit,
                        )
                    if st.buffer.same_as(target):
                        _mark(
                            first_write,
                            np.minimum,
                            base[first],
                            delta + _bytes(st.indices, target_shape, t_item, env, points)[first],
                            t_item,
                            lo,
                            hi,
                            unit,
                        )
                for ld in nest.loaded(source):
                    _mark(
                        last_source,
                        np.maximum,
                        base + 1,
                        _bytes(ld.indices, source_shape, s_item, env, points),
                        s_item,
                        lo,
                        hi,
                        unit,
                    )
                for st in nest.stores:
                    if st.buffer.same_as(source):
                        _mark(
                            last_source,
                            np.maximum,
                            base + 2,
                            _bytes(st.indices, source_shape, s_item, env, points),
                            s_item,
                            lo,
                            hi,
                            unit,
                        )
                    if st.buffer.same_as(target):
                        _mark(
                            first_write,
                            np.minimum,
                            base + 2,
                            delta + _bytes(st.indices, target_shape, t_item, env, points),
                            t_item,
                            lo,
                            hi,
                            unit,
                        )
            clock += 3 * points
    except _Unknown:
        return False
    shared = (last_source >= 0) & (first_write < np.iinfo(np.int64).max)
    return bool(np.all(last_source[shared] < first_write[shared]))


class _Unknown(Exception):
    pass


def _static(dims) -> list[int]:
    out = []
    for d in dims:
        if not isinstance(d, tvm.tirx.IntImm):
            raise _Unknown(str(d))
        out.append(int(d))
    return out


def _plain(buffer) -> bool:
    offset = buffer.elem_offset
    return not list(buffer.strides) and isinstance(offset, tvm.tirx.IntImm) and int(offset) == 0


def _itemsize(buffer) -> int:
    dt = tvm.DataType(str(buffer.dtype))
    return (dt.bits * dt.lanes + 7) // 8


def _environment(nest: Nest) -> dict:
    extents = _static([loop.extent for loop in nest.loops])
    mins = _static([loop.min for loop in nest.loops])
    grid = (
        np.indices(extents, dtype=np.int64).reshape(len(extents), -1)
        if extents
        else np.zeros((0, 1), dtype=np.int64)
    )
    env = {loop.loop_var: grid[i] + mins[i] for i, loop in enumerate(nest.loops)}
    block = nest.block
    for iv, value in zip(block.iter_vars, nest.realize.iter_values, strict=True):
        env[iv.var] = _evaluate(value, env)
    return env


def _first_reduction_point(nest: Nest, env: dict, points: int) -> np.ndarray:
    """Where the init runs: every reduction iterator at the start of its domain."""
    mask = np.ones(points, dtype=bool)
    for iv in nest.block.iter_vars:
        if int(iv.iter_type) == _REDUCE:
            mask &= np.broadcast_to(env[iv.var], (points,)) == int(iv.dom.min)
    return mask


def _bytes(indices, shape: list[int], item: int, env: dict, points: int) -> np.ndarray:
    if len(indices) != len(shape):
        raise _Unknown("index rank")
    linear = np.zeros(points, dtype=np.int64)
    stride = 1
    for index, extent in zip(reversed(list(indices)), reversed(shape), strict=True):
        linear = linear + np.broadcast_to(_evaluate(index, env), (points,)) * stride
        stride *= extent
    return linear * item


def _mark(array, combine, times, starts, item, lo, hi, unit) -> None:
    times = np.broadcast_to(times, starts.shape)
    for part in range(0, item, unit):
        at = starts + part
        inside = (at >= lo) & (at < hi)
        combine.at(array, (at[inside] - lo) // unit, times[inside])


_BINARY = {
    tvm.tirx.Add: np.add,
    tvm.tirx.Sub: np.subtract,
    tvm.tirx.Mul: np.multiply,
    tvm.tirx.FloorDiv: np.floor_divide,
    tvm.tirx.FloorMod: np.mod,
    tvm.tirx.Min: np.minimum,
    tvm.tirx.Max: np.maximum,
}


def _evaluate(expr, env: dict):
    """An integer index expression over numpy arrays of loop values."""
    if isinstance(expr, tvm.tirx.IntImm):
        return np.int64(int(expr))
    if isinstance(expr, tvm.tirx.Var):
        for var, value in env.items():
            if var.same_as(expr):
                return value
        raise _Unknown(f"free variable {expr}")
    for kind, combine in _BINARY.items():
        if isinstance(expr, kind):
            return combine(_evaluate(expr.a, env), _evaluate(expr.b, env))
    if (
        isinstance(expr, tvm.tirx.Cast)
        and "int" in _dtype(expr)
        and "int" in _dtype(expr.value)
    ):
        # An integer widened or narrowed; a float floored into an index stays unknown.
        return _evaluate(expr.value, env)
    raise _Unknown(f"index expression {type(expr).__name__}")


def _dtype(expr) -> str:
    """A TIR expression's dtype: ``expr.ty.dtype`` in TVM 0.27 (no ``expr.dtype`` any more)."""
    ty = getattr(expr, "ty", None)
    return str(getattr(ty, "dtype", None) or getattr(expr, "dtype", ""))


def store_over_source_safe(
    kernel: tvm.tirx.PrimFunc, source, target, delta: int = 0, nests: list[Nest] | None = None
) -> str | None:
    """Which proof shows ``target`` may be written ``delta`` bytes into ``source``, if any."""
    nests = kernel_nests(kernel) if nests is None else nests
    if not nests or source.same_as(target):
        return None
    if order_proof(nests, source, target):
        return "order"
    if delta == 0 and elementwise_proof(nests, source, target):
        return "elementwise"
    if trace_proof(nests, source, target, delta):
        return "trace"
    return None


# --- Kernels scheduled for a GPU ---------------------------------------------------------
#
# TVM's CUDA pipeline schedules every kernel (dlight) before memory is planned: loops are
# bound to blocks and threads, split, vectorised, and values staged through shared and
# local memory. The serial-nest model above does not apply, and order in the text is not
# order in time: a kernel's threads run concurrently. What is still known for certain:
#
# - each top-level thread-bound statement of the kernel becomes its own launch
#   (``SplitHostDevice``), and launches on one stream run one after another;
# - within one launch, one thread (a value of every thread index, and of the lane of a
#   vectorised loop) runs its statements in program order.
#
# So ``target`` may be written into ``source``'s bytes when, for every byte they share,
# either every access of it as ``source`` is in an earlier launch than every write of it
# as ``target``, or, in the one launch where both happen, a single thread makes all of
# them, writing only after its last access of ``source``. That is decided exhaustively,
# point by point, for static shapes, from the loads and stores the statements make. An
# access whose thread cannot be told (a statement outside a thread loop runs in every
# thread of it) counts for every thread, so it only ever refuses.

_THREAD_BINDING = 4
_VECTORIZED = 2
_UNROLLED = 3


@dataclass
class GpuAccess:
    """One load or store of a kernel parameter, with everything that says who makes it
    and when."""

    buffer: object
    indices: list
    store: bool
    launch: int
    #: Enclosing loops, outermost first.
    loops: list
    #: (block iterator, its binding) of every enclosing block, outermost first.
    bindings: list
    #: The enclosing blocks' predicates (``T.where``).
    predicates: list
    #: Where in its thread's program the access happens, loops at their first iteration.
    time: int
    #: Whether the enclosing block reduces across threads (a cross-thread reduction,
    #: whose result is written by whichever thread TVM picks).
    cross_thread: bool = False


@dataclass
class GpuKernel:
    """A GPU-scheduled kernel's launches and the accesses of its parameters, or why it
    could not be read (``unknown``; every proof then refuses)."""

    params: list
    #: Per launch: thread tag -> extent.
    launches: list[dict[str, int]]
    accesses: list[GpuAccess]
    unknown: str = ""

    def launches_touching(self, buffer) -> list[int]:
        return sorted({a.launch for a in self.accesses if a.buffer.same_as(buffer)})

    def launches_storing(self, buffer) -> list[int]:
        return sorted({a.launch for a in self.accesses if a.store and a.buffer.same_as(buffer)})

    def first_write(self, buffer) -> int:
        found = self.launches_storing(buffer)
        return found[0] if found else len(self.launches)

    def last_access(self, buffer) -> int:
        found = self.launches_touching(buffer)
        return found[-1] if found else -1


def is_gpu_kernel(kernel: tvm.tirx.PrimFunc) -> bool:
    """Whether any loop of ``kernel`` is bound to a GPU block or thread index."""
    found = []

    def visit(node) -> None:
        if found or node is None:
            return
        if isinstance(node, tvm.tirx.For):
            if int(node.kind) == _THREAD_BINDING:
                found.append(node)
                return
            visit(node.body)
        elif isinstance(node, tvm.tirx.SeqStmt):
            for child in node.seq:
                visit(child)
        elif isinstance(node, SBlockRealize):
            visit(node.block.body)
        elif isinstance(node, tvm.tirx.IfThenElse):
            visit(node.then_case)
            visit(node.else_case)
        elif isinstance(node, tvm.tirx.AttrStmt):
            visit(node.body)

    visit(kernel.body)
    return bool(found)


def gpu_kernel(kernel: tvm.tirx.PrimFunc) -> GpuKernel:
    """The launches and parameter accesses of a GPU-scheduled ``kernel``."""
    params = list(kernel.params)
    result = GpuKernel(params, [], [])
    try:
        _read_gpu_kernel(kernel, result)
    except _Unknown as exc:
        result.unknown = str(exc)
        result.accesses = []
    return result


def _read_gpu_kernel(kernel: tvm.tirx.PrimFunc, result: GpuKernel) -> None:
    body = kernel.body
    if not isinstance(body, SBlockRealize):
        raise _Unknown("a kernel body that is not one root block")
    root = body.block
    if list(root.match_buffers) or root.init is not None:
        raise _Unknown("buffer views in the root block")
    # Buffers the kernel allocates for itself (shared, local) cannot alias a parameter.
    allocated: list = list(root.alloc_buffers)
    top = root.body
    stmts = list(top.seq) if isinstance(top, tvm.tirx.SeqStmt) else [top]
    walk = _GpuWalk(result, allocated)
    for launch, stmt in enumerate(stmts):
        if not (isinstance(stmt, tvm.tirx.For) and int(stmt.kind) == _THREAD_BINDING):
            raise _Unknown("a statement outside every thread-bound loop")
        walk.threads = {}
        walk.visit(stmt, _Where(launch))
        result.launches.append(walk.threads)
    for access in result.accesses:
        buffer = access.buffer
        if not any(buffer.same_as(p) for p in result.params) and not any(
            buffer.same_as(a) for a in allocated
        ):
            raise _Unknown(f"an access of {buffer.name}, neither a parameter nor allocated")


def _duration(node, memo: dict[int, int]) -> int:
    """How many steps of one thread's program ``node`` takes (thread and lane loops do not
    repeat it within a thread; an ``if`` is counted with both branches)."""
    if node is None:
        return 0
    # By the node's address (its hash): each access makes a new Python wrapper.
    key = hash(node)
    if key in memo:
        return memo[key]
    if isinstance(node, tvm.tirx.For):
        body = _duration(node.body, memo)
        kind = int(node.kind)
        if kind in (_THREAD_BINDING, _VECTORIZED):
            value = body
        elif kind in (_SERIAL, _UNROLLED):
            value = _static([node.extent])[0] * body
        else:
            raise _Unknown(f"a {tvm.tirx.ForKind(kind).name.lower()} loop")
    elif isinstance(node, tvm.tirx.SeqStmt):
        value = sum(_duration(child, memo) for child in node.seq)
    elif isinstance(node, SBlockRealize):
        value = _duration(node.block.init, memo) + _duration(node.block.body, memo)
    elif isinstance(node, tvm.tirx.BufferStore):
        value = 2  # its loads, then the store
    elif isinstance(node, tvm.tirx.IfThenElse):
        value = 1 + _duration(node.then_case, memo) + _duration(node.else_case, memo)
    elif isinstance(node, tvm.tirx.AttrStmt):
        value = _duration(node.body, memo)
    elif isinstance(node, tvm.tirx.AllocBuffer):
        value = 0
    else:
        raise _Unknown(type(node).__name__)
    memo[key] = value
    return value


def _expr_loads(expr) -> list:
    loads: list = []
    stores: list = []
    _visit(expr, loads, stores)
    if stores:
        raise _Unknown("a store inside an expression")
    return loads


@dataclass(frozen=True)
class _Where:
    """Where a statement sits: its launch, loops, blocks and first step in time."""

    launch: int
    loops: tuple = ()
    bindings: tuple = ()
    predicates: tuple = ()
    time: int = 0
    cross_thread: bool = False

    def at(self, time: int) -> _Where:
        return replace(self, time=time)


class _GpuWalk:
    def __init__(self, result: GpuKernel, allocated: list):
        self.result = result
        self.allocated = allocated
        self.threads: dict[str, int] = {}
        self.memo: dict[int, int] = {}

    def visit(self, node, where: _Where) -> None:
        if node is None:
            return
        if isinstance(node, tvm.tirx.For):
            self._loop(node, where)
            return
        if any(int(loop.kind) == _VECTORIZED for loop in where.loops) and not isinstance(
            node, SBlockRealize | tvm.tirx.BufferStore
        ):
            raise _Unknown("control flow inside a vectorised loop")
        if isinstance(node, tvm.tirx.SeqStmt):
            time = where.time
            for child in node.seq:
                self.visit(child, where.at(time))
                time += _duration(child, self.memo)
        elif isinstance(node, tvm.tirx.AttrStmt):
            self.visit(node.body, where)
        elif isinstance(node, tvm.tirx.AllocBuffer):
            self.allocated.append(node.buffer)
        elif isinstance(node, tvm.tirx.IfThenElse):
            # Both branches count, as if both ran: more accesses only ever refuse more.
            self._loads(_expr_loads(node.condition), where)
            self.visit(node.then_case, where.at(where.time + 1))
            self.visit(
                node.else_case, where.at(where.time + 1 + _duration(node.then_case, self.memo))
            )
        elif isinstance(node, SBlockRealize):
            self._block(node, where)
        elif isinstance(node, tvm.tirx.BufferStore):
            self._loads([*_expr_loads(node.value), *_expr_loads(list(node.indices))], where)
            self.result.accesses.append(
                GpuAccess(node.buffer, list(node.indices), True, where.launch,
                          list(where.loops), list(where.bindings), list(where.predicates),
                          where.time + 1, where.cross_thread)
            )
        else:
            raise _Unknown(type(node).__name__)

    def _loop(self, loop: tvm.tirx.For, where: _Where) -> None:
        kind = int(loop.kind)
        step = getattr(loop, "step", None)
        if step is not None and not (isinstance(step, tvm.tirx.IntImm) and int(step) == 1):
            raise _Unknown("a loop with a step")
        _static([loop.min, loop.extent])
        if kind == _THREAD_BINDING:
            tag = str(loop.thread_binding.thread_tag)
            extent = int(loop.extent)
            if self.threads.setdefault(tag, extent) != extent:
                raise _Unknown(f"{tag} bound with two extents")
        elif kind not in (_SERIAL, _UNROLLED, _VECTORIZED):
            raise _Unknown(f"a {tvm.tirx.ForKind(kind).name.lower()} loop")
        if any(int(outer.kind) == _VECTORIZED for outer in where.loops):
            raise _Unknown("a loop inside a vectorised loop")
        self.visit(loop.body, replace(where, loops=(*where.loops, loop)))

    def _block(self, realize: SBlockRealize, where: _Where) -> None:
        block = realize.block
        if list(block.match_buffers):
            raise _Unknown("buffer views in a block")
        self.allocated.extend(block.alloc_buffers)
        pairs = list(zip(block.iter_vars, realize.iter_values, strict=True))
        if [ld for _, value in pairs for ld in _expr_loads(value)] or _expr_loads(
            realize.predicate
        ):
            raise _Unknown("a block binding read from memory")
        threaded = _thread_vars(where.loops)
        inner = replace(
            where,
            bindings=(*where.bindings, *((iv.var, value) for iv, value in pairs)),
            predicates=(*where.predicates, realize.predicate),
            # A reduction over a thread index is combined across threads, and its result
            # stored by whichever thread TVM's lowering picks.
            cross_thread=where.cross_thread or any(
                int(iv.iter_type) == _REDUCE and _uses(value, threaded) for iv, value in pairs
            ),
        )
        self.visit(block.init, inner)
        self.visit(block.body, inner.at(where.time + _duration(block.init, self.memo)))

    def _loads(self, loads, where: _Where) -> None:
        for load in loads:
            self.result.accesses.append(
                GpuAccess(load_buffer(load), list(load.indices), False, where.launch,
                          list(where.loops), list(where.bindings), list(where.predicates),
                          where.time, where.cross_thread)
            )


def _thread_vars(loops) -> list:
    return [loop.loop_var for loop in loops if int(loop.kind) == _THREAD_BINDING]


def _uses(expr, variables) -> bool:
    if isinstance(expr, tvm.tirx.Var):
        return any(expr.same_as(v) for v in variables)
    if isinstance(expr, _BINARY_NODES):
        return _uses(expr.a, variables) or _uses(expr.b, variables)
    if isinstance(expr, tvm.tirx.Cast):
        return _uses(expr.value, variables)
    if isinstance(expr, tvm.tirx.IntImm):
        return False
    return True  # anything else may use them


def gpu_store_over_source(
    kernel: GpuKernel, source, target, delta: int = 0
) -> tuple[str | None, str]:
    """Whether ``target`` may be written ``delta`` bytes into ``source`` in a GPU kernel:
    (the proof, "") or (None, why not)."""
    if kernel.unknown:
        return None, f"its GPU schedule has {kernel.unknown}, which the analysis does not model"
    if source.same_as(target):
        return None, "one parameter"
    writes = kernel.launches_storing(target)
    if not writes:
        return None, f"the kernel does not write {target.name}"
    touches = kernel.launches_touching(source)
    if not touches or touches[-1] < writes[0]:
        return "order", ""
    try:
        return _gpu_trace(kernel, source, target, delta)
    except _Unknown as exc:
        return None, f"its accesses cannot be evaluated: {exc}"


def _gpu_trace(kernel: GpuKernel, source, target, delta: int) -> tuple[str | None, str]:
    source_shape, target_shape = _static(source.shape), _static(target.shape)
    if not (_plain(source) and _plain(target)) or delta < 0:
        return None, "a strided or offset buffer"
    s_item, t_item = _itemsize(source), _itemsize(target)
    s_bytes = math.prod(source_shape) * s_item
    t_bytes = math.prod(target_shape) * t_item
    unit = math.gcd(s_item, t_item, delta) if delta else math.gcd(s_item, t_item)
    lo, hi = delta, min(s_bytes, delta + t_bytes)
    if hi <= lo:
        return "trace", ""
    count = (hi - lo) // unit
    big = np.iinfo(np.int64).max
    last_source_launch = np.full(count, -1, dtype=np.int64)
    first_write_launch = np.full(count, big, dtype=np.int64)
    bad: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for launch in range(len(kernel.launches)):
        relevant = [
            a for a in kernel.accesses
            if a.launch == launch
            and (a.buffer.same_as(source) or (a.store and a.buffer.same_as(target)))
        ]
        if not relevant:
            continue
        src_tid_min = np.full(count, big, dtype=np.int64)
        src_tid_max = np.full(count, -1, dtype=np.int64)
        src_time_max = np.full(count, -1, dtype=np.int64)
        dst_tid_min = np.full(count, big, dtype=np.int64)
        dst_tid_max = np.full(count, -1, dtype=np.int64)
        dst_time_min = np.full(count, big, dtype=np.int64)
        for access in relevant:
            is_source = access.buffer.same_as(source)
            if not is_source and access.cross_thread:
                raise _Unknown("a cross-thread reduction writing the output")
            if is_source and access.store and access.cross_thread:
                raise _Unknown("a cross-thread reduction writing the input")
            shape, item = (source_shape, s_item) if is_source else (target_shape, t_item)
            tid, when, env, points = _gpu_points(access, kernel.launches[launch])
            starts = _bytes(access.indices, shape, item, env, points)
            if not is_source:
                starts = starts + delta
            mask = _predicate_mask(access.predicates, env, points)
            starts, tid, when = starts[mask], tid[mask], when[mask]
            for part in range(0, item, unit):
                at = starts + part
                inside = (at >= lo) & (at < hi)
                slots = (at[inside] - lo) // unit
                if is_source:
                    np.minimum.at(src_tid_min, slots, tid[inside])
                    np.maximum.at(src_tid_max, slots, tid[inside])
                    np.maximum.at(src_time_max, slots, when[inside])
                    np.maximum.at(last_source_launch, slots, launch)
                else:
                    np.minimum.at(dst_tid_min, slots, tid[inside])
                    np.maximum.at(dst_tid_max, slots, tid[inside])
                    np.minimum.at(dst_time_min, slots, when[inside])
                    np.minimum.at(first_write_launch, slots, launch)
        both = (src_tid_max >= 0) & (dst_tid_max >= 0)
        one_thread = (
            (src_tid_min == src_tid_max) & (dst_tid_min == dst_tid_max)
            & (src_tid_min == dst_tid_min)
        )
        bad[launch] = (both & ~one_thread, both & one_thread & (src_time_max >= dst_time_min))
    shared = (last_source_launch >= 0) & (first_write_launch < big)
    if np.any(shared & (last_source_launch > first_write_launch)):
        return None, (f"a later launch of the kernel reads {source.name} after "
                      f"{target.name} is written over it")
    for launch, (other_threads, too_early) in bad.items():
        here = shared & (last_source_launch == launch) & (first_write_launch == launch)
        if np.any(other_threads & here):
            return None, (f"GPU threads write {target.name} over bytes of {source.name} "
                          "that other threads read, concurrently")
        if np.any(too_early & here):
            return None, f"a thread writes {target.name} before it last reads {source.name}"
    return "trace", ""


def _gpu_points(access: GpuAccess, threads: dict[str, int]):
    """(thread id, time, environment, count) of every point at which ``access`` runs."""
    dims: list[tuple[object, int, int]] = []  # (variable or tag, min, extent)
    aliases: list[tuple[object, object]] = []
    seen_tags: dict[str, object] = {}
    lanes: list[tuple[object, int]] = []
    serial: list[tuple[object, int]] = []  # (variable, time stride)
    memo: dict[int, int] = {}
    for loop in access.loops:
        kind = int(loop.kind)
        low, extent = _static([loop.min, loop.extent])
        if kind == _THREAD_BINDING:
            tag = str(loop.thread_binding.thread_tag)
            if tag in seen_tags:
                # The same hardware index bound again (a cooperative fetch): one value.
                aliases.append((loop.loop_var, seen_tags[tag]))
                continue
            seen_tags[tag] = loop.loop_var
            dims.append((loop.loop_var, low, extent))
        else:
            dims.append((loop.loop_var, low, extent))
            if kind == _VECTORIZED:
                lanes.append((loop.loop_var, extent))
            else:
                serial.append((loop.loop_var, _duration(loop.body, memo)))
    # A statement outside a thread loop runs in every thread of that index.
    free = [(tag, 0, extent) for tag, extent in sorted(threads.items()) if tag not in seen_tags]
    dims += free
    points = math.prod(extent for _, _, extent in dims) if dims else 1
    if points > TRACE_LIMIT:
        raise _Unknown(f"{points:,} points, beyond the limit of {TRACE_LIMIT:,}")
    env: dict = {}
    inner = points
    values: dict[int, np.ndarray] = {}
    for index, (key, low, extent) in enumerate(dims):
        inner //= extent
        values[index] = (np.arange(points, dtype=np.int64) // inner) % extent + low
        if not isinstance(key, str):
            env[key] = values[index]
    for var, same in aliases:
        env[var] = env[same]
    tags = dict(seen_tags)
    tid = np.zeros(points, dtype=np.int64)
    for tag in sorted(threads):
        extent = threads[tag]
        if tag in tags:
            value = env[tags[tag]]
        else:
            index = next(i for i, (key, _, _) in enumerate(dims) if key == tag)
            value = values[index]
        tid = tid * extent + value
    for var, extent in lanes:
        tid = tid * extent + env[var]
    when = np.full(points, access.time, dtype=np.int64)
    for var, stride in serial:
        when = when + env[var] * stride
    for var, value in access.bindings:
        env[var] = np.broadcast_to(_evaluate(value, env), (points,))
    return tid, when, env, points


def _predicate_mask(predicates, env: dict, points: int) -> np.ndarray:
    """Where every predicate holds; a predicate that cannot be evaluated holds everywhere
    (assuming more accesses only ever refuses)."""
    mask = np.ones(points, dtype=bool)
    for predicate in predicates:
        try:
            mask &= np.broadcast_to(_evaluate_bool(predicate, env), (points,))
        except _Unknown:
            continue
    return mask


_COMPARE = {
    tvm.tirx.LT: np.less,
    tvm.tirx.LE: np.less_equal,
    tvm.tirx.GT: np.greater,
    tvm.tirx.GE: np.greater_equal,
    tvm.tirx.EQ: np.equal,
    tvm.tirx.NE: np.not_equal,
}


def _evaluate_bool(expr, env: dict):
    if isinstance(expr, tvm.tirx.IntImm):
        return np.bool_(int(expr) != 0)
    if isinstance(expr, tvm.tirx.And):
        return np.logical_and(_evaluate_bool(expr.a, env), _evaluate_bool(expr.b, env))
    if isinstance(expr, tvm.tirx.Or):
        return np.logical_or(_evaluate_bool(expr.a, env), _evaluate_bool(expr.b, env))
    if isinstance(expr, tvm.tirx.Not):
        return np.logical_not(_evaluate_bool(expr.a, env))
    for kind, compare in _COMPARE.items():
        if isinstance(expr, kind):
            return compare(_evaluate(expr.a, env), _evaluate(expr.b, env))
    raise _Unknown(f"predicate {type(expr).__name__}")
