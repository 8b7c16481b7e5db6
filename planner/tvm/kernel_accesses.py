"""What a kernel really reads and writes, and in which order: the ground for in-place proofs.

A block's declared ``T.reads``/``T.writes`` are annotations, and after FuseTIR they can be
wrong: a fused transpose's read ``compute[vj, vi]`` was missing from its block's read list,
and a rule trusting the list merged the output over its input. Everything here is taken
from the statements themselves: the ``BufferLoad`` s in a block's body and init, the
``BufferStore`` s, their index expressions and the loops around them.

Legalised kernels are a sequence of serial loop nests, each around one block; anything else
(shared loops, parallel or vectorised loops, ``if`` statements around blocks) is reported as
unknown, and callers refuse to share memory inside such a kernel.

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
from dataclasses import dataclass

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
    tvm.tirx.Select: ("condition", "true_value", "false_value"),
    _node("Call"): ("args",),
    tvm.tirx.Let: ("value", "body"),
    tvm.tirx.Broadcast: ("value",),
    tvm.tirx.Ramp: ("base", "stride"),
    tvm.tirx.SeqStmt: ("seq",),
    tvm.tirx.Evaluate: ("value",),
    tvm.tirx.IfThenElse: ("condition", "then_case", "else_case"),
    tvm.tirx.For: ("min", "extent", "body"),
    tvm.tirx.LetStmt: ("value", "body"),
    tvm.tirx.AttrStmt: ("value", "body"),
}
_BINARY_NODES = tuple(
    getattr(tvm.tirx, name)
    for name in (
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
    )
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
        return _has_inner_block(stmt.body)
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
