"""Turn a lowered Relax function into a planning problem.

The input is a function after ``CallTIRRewrite`` (see :mod:`planner.tvm.plan.lowering`): every
operator output is a binding ``v = R.builtin.alloc_tensor(...)`` followed by the kernel call
that fills it. Time is the index of a binding; a tensor lives from its allocation to the last
binding that reads it or any alias of it (plain re-bindings, reshapes, tuples). A tuple keeps
each member's aliases apart, so reading one member of a split does not keep the others alive
(TVM's planner frees them, and a plan read from it would look overlapping otherwise). Tensors that
reach the return value escape to the caller and are left outside the arena, as TVM's own
planner does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import relax

from planner.problem import Buffer, Problem

#: Kernels reject tensors whose data pointer is not aligned; 64 bytes is what TVM's CPU
#: allocator guarantees, so plans honour it too.
ARENA_ALIGNMENT = 64


def align(value: int, alignment: int = ARENA_ALIGNMENT) -> int:
    return -(-value // alignment) * alignment

_ALLOC = tvm.ir.Op.get("relax.builtin.alloc_tensor")
# Ops whose result shares storage with their first argument instead of owning new bytes.
_VIEW_OPS = {
    tvm.ir.Op.get("relax.reshape"),
    tvm.ir.Op.get("relax.memory.view"),
    tvm.ir.Op.get("relax.memory.ensure_zero_offset"),
}


class ExtractionError(ValueError):
    """The function is not in the shape the extractor understands."""


@dataclass
class Tensor:
    """One planned intermediate tensor: where it is allocated and who produces it."""

    name: str
    binding_index: int
    shape: tuple[int, ...]
    dtype: str
    size: int
    lower: int
    upper: int
    producer: str = ""


@dataclass
class Extraction:
    function: str
    tensors: list[Tensor]
    escaping: list[Tensor] = field(default_factory=list)
    num_bindings: int = 0

    def problem(self, name: str = "") -> Problem:
        return Problem(
            tuple(
                Buffer(t.name, t.lower, t.upper, t.size, alignment=ARENA_ALIGNMENT)
                for t in self.tensors
            ),
            name=name,
        )

    def by_name(self) -> dict[str, Tensor]:
        return {t.name: t for t in self.tensors}


def temporary_kernel(name: str) -> str:
    """The kernel whose lifted temporary the tensor ``name`` is (they are named
    ``kernel.buffer``, see planner.tvm.plan.kernel_temps), or "" for any other tensor."""
    kernel, dot, _ = name.partition(".")
    return kernel if dot else ""


def is_temporary(name: str) -> bool:
    return bool(temporary_kernel(name))


def bindings_of(func: relax.Function) -> list[relax.Binding]:
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        raise ExtractionError("expected the function body to be a sequence of bindings")
    return [b for block in body.blocks for b in block.bindings]


def _static_shape(sinfo, where: str, bounds: dict[str, int]) -> tuple[tuple[int, ...], str]:
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        raise ExtractionError(f"{where}: allocation without a known tensor shape")
    dims = []
    for dim in sinfo.shape.values:
        try:
            dims.append(upper_bound(dim, bounds))
        except ExtractionError as exc:
            raise ExtractionError(f"{where}: {exc}") from None
    return tuple(dims), str(sinfo.dtype)


def upper_bound(expr, bounds: dict[str, int]) -> int:
    """The value of a shape expression with every symbol at its upper bound.

    Shape arithmetic of convolutions, pools and reshapes is monotonic in its symbols, so
    this is the largest size the tensor can take.
    """
    tirx = tvm.tirx
    if isinstance(expr, tirx.IntImm):
        return int(expr)
    if isinstance(expr, tirx.Var):
        if expr.name not in bounds:
            raise ExtractionError(
                f"symbolic dimension {expr.name} has no upper bound; give one "
                f"(known: {', '.join(sorted(bounds)) or 'none'})"
            )
        return bounds[expr.name]
    binary = {
        tirx.Add: lambda a, b: a + b,
        tirx.Sub: lambda a, b: a - b,
        tirx.Mul: lambda a, b: a * b,
        tirx.FloorDiv: lambda a, b: a // b,
        tirx.FloorMod: lambda a, b: a % b,
        tirx.Max: max,
        tirx.Min: min,
    }
    for kind, combine in binary.items():
        if isinstance(expr, kind):
            return combine(upper_bound(expr.a, bounds), upper_bound(expr.b, bounds))
    if isinstance(expr, tirx.Cast):
        return upper_bound(expr.value, bounds)
    raise ExtractionError(f"cannot bound the shape expression {expr}")


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    count = 1
    for dim in shape:
        count *= dim
    dt = tvm.DataType(dtype)
    return count * ((dt.bits * dt.lanes + 7) // 8)


def _callee_name(call: relax.Call) -> str:
    op = call.op
    if isinstance(op, relax.GlobalVar):
        return op.name_hint
    if isinstance(op, tvm.ir.Op):
        return op.name
    if isinstance(op, relax.ExternFunc):
        return op.global_symbol
    return type(op).__name__


def extract(
    mod: tvm.IRModule, function: str = "forward", bounds: dict[str, int] | None = None
) -> Extraction:
    """Every intermediate tensor of ``function`` with its size and live interval.

    Symbolic dimensions take their upper bounds from ``bounds`` (by symbol name).
    """
    bounds = bounds or {}
    func = mod[function]
    bindings = bindings_of(func)
    # var -> ids of the allocations whose storage it may refer to
    roots: dict[relax.Var, set[int]] = {}
    # tuple var -> the roots of each member, so projecting one member keeps only its own
    members: dict[relax.Var, list[_Member]] = {}
    tensors: dict[int, Tensor] = {}
    last_use: dict[int, int] = {}

    for index, binding in enumerate(bindings):
        if not isinstance(binding, relax.VarBinding):
            raise ExtractionError(f"binding {index}: match_cast is not supported yet")
        value = binding.value
        if isinstance(value, relax.Call) and value.op == _ALLOC:
            shape, dtype = _static_shape(binding.var.ty, binding.var.name, bounds)
            tensors[index] = Tensor(
                binding.var.name, index, shape, dtype, _nbytes(shape, dtype), index, index + 1
            )
            roots[binding.var] = {index}
            continue

        if isinstance(value, relax.Tuple | relax.TupleGetItem | relax.Var):
            # Naming a tensor, or grouping tensors, reads no bytes: only later uses of the
            # new name extend lifetimes, and only those of the members it really holds.
            member = _member_of(value, roots, members)
            if member.roots:
                roots[binding.var] = member.roots
            if member.fields is not None:
                members[binding.var] = member.fields
            continue
        used: set[int] = set()
        for var in relax.analysis.free_vars(value):
            used |= roots.get(var, set())
        for root in used:
            last_use[root] = index
        if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar):
            # Destination passing: the last tensor argument is the output being written.
            # Lifted kernel temporaries are passed after it (planner.tvm.plan.kernel_temps);
            # taking one for the output left the real output without a producer.
            for arg in reversed(value.args):
                if isinstance(arg, relax.Var) and arg in roots and not is_temporary(arg.name):
                    for root in roots[arg]:
                        if not tensors[root].producer:
                            tensors[root].producer = _callee_name(value)
                    break
        # Anything that can hand back one of its inputs (aliases, views, tuples, in-place
        # kernels) is treated as aliasing everything it used: safe, if pessimistic.
        if used and _may_alias(value):
            roots[binding.var] = used

    escaping_roots: set[int] = set()
    for var in relax.analysis.free_vars(func.body.body):
        escaping_roots |= roots.get(var, set())

    planned, escaping = [], []
    seen_names: set[str] = set()
    for index, tensor in sorted(tensors.items()):
        # Variable names are hints, not identities; buffer ids must be unique.
        if tensor.name in seen_names:
            tensor.name = f"{tensor.name}@{index}"
        seen_names.add(tensor.name)
        tensor.upper = max(tensor.upper, last_use.get(index, index) + 1)
        (escaping if index in escaping_roots else planned).append(tensor)
    return Extraction(function, planned, escaping, len(bindings))


@dataclass
class _Member:
    """What an expression may refer to: allocation ids, and per member if it is a tuple."""

    roots: set[int]
    fields: list[_Member] | None = None


def _member_of(
    expr: relax.Expr, roots: dict[relax.Var, set[int]], members: dict[relax.Var, list[_Member]]
) -> _Member:
    if isinstance(expr, relax.Var):
        return _Member(set(roots.get(expr, set())), members.get(expr))
    if isinstance(expr, relax.Tuple):
        fields = [_member_of(field, roots, members) for field in expr.fields]
        return _Member(set().union(*(f.roots for f in fields)), fields)
    if isinstance(expr, relax.TupleGetItem):
        whole = _member_of(expr.tuple_value, roots, members)
        if whole.fields is not None and 0 <= expr.index < len(whole.fields):
            return whole.fields[expr.index]
        return _Member(whole.roots)  # a tuple we cannot see into: any member may be it
    # Constants, shapes and the like hold no planned storage, but may hide vars: be safe.
    found: set[int] = set()
    for var in relax.analysis.free_vars(expr):
        found |= roots.get(var, set())
    return _Member(found)


def _may_alias(value: relax.Expr) -> bool:
    if isinstance(value, relax.Call):
        if isinstance(value.op, tvm.ir.Op):
            return value.op in _VIEW_OPS
        # Calls to kernels or packed functions may return one of their arguments
        # (call_tir_inplace after rewriting); only void results are known not to.
        sinfo = value.ty
        return not (isinstance(sinfo, relax.TupleType) and len(sinfo.fields) == 0)
    return False
