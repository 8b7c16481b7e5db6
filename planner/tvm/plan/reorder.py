"""Run a lowered Relax function's operators in the order that needs the least memory.

Relax runs bindings in program order, and every memory plan (TVM's and ours) is made for
that order. Here the function after ``CallTIRRewrite`` (see :mod:`planner.tvm.plan.lowering`)
becomes a graph of operators for :mod:`planner.order`, and its bindings are rewritten in
the order found there.

- **Operators** are the calls that run code: kernels and packed functions. Allocations,
  re-bindings, tuples and views run nothing; each is emitted right before the first binding
  that needs it, so an allocation moves with the kernel that fills it.
- **Dependencies** are the variables a binding uses, plus the effects that destination
  passing hides: a kernel writes into an argument it returns nothing for. Which arguments a
  kernel writes is read from its body (every buffer store, not the blocks' annotations);
  packed functions and anything unknown count as writing every argument. Per allocation,
  a write follows the previous write and every read since it, and a read follows the last
  write, so only operators that could run in either order move.
- **Sizes** are those of :func:`planner.tvm.plan.extract.extract`; tensors that escape to the
  caller are not in the arena and count zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from planner.order import MAX_STATES, Op, OpGraph, OrderResult, choose_order
from planner.tvm.compat import SBlock, SBlockRealize, region_buffer
from planner.tvm.plan.extract import bindings_of, extract

_ALLOC = tvm.ir.Op.get("relax.builtin.alloc_tensor")
# Calls that compute nothing: they name (part of) the storage of their first argument.
_VIEW_OPS = {
    tvm.ir.Op.get("relax.reshape"),
    tvm.ir.Op.get("relax.memory.view"),
    tvm.ir.Op.get("relax.memory.ensure_zero_offset"),
}
# Values that may run code of their own; other non-call values (names, tuples, constants,
# shapes) run nothing.
_COMPOUND = (relax.If, relax.SeqExpr, relax.Function)


class ReorderError(ValueError):
    """The function is not in a shape whose bindings can safely be reordered."""


@dataclass
class OperatorGraph:
    """A function's operators for :func:`planner.order.choose_order`, and how to emit them."""

    graph: OpGraph
    #: Binding index of each operator, in program order (operator names are these indices).
    operators: list[int]
    #: For every binding: the bindings that must come before it.
    deps: list[set[int]]


def operator_graph(
    mod: tvm.IRModule, function: str = "forward", bounds: dict[str, int] | None = None
) -> OperatorGraph:
    func = mod[function]
    if not isinstance(func.body, relax.SeqExpr):
        raise ReorderError("expected the function body to be a sequence of bindings")
    if any(isinstance(block, relax.DataflowBlock) for block in func.body.blocks):
        # Dataflow variables may not leave their block; the rewritten function has one.
        raise ReorderError("the function still has dataflow blocks: lower it first")
    bindings = bindings_of(func)
    extraction = extract(mod, function, bounds)
    size_of = {t.binding_index: t.size for t in extraction.tensors}

    defined: dict[relax.Var, int] = {}
    roots: dict[relax.Var, set[int]] = {}
    creator: dict[int, int] = {}
    last_writer: dict[int, int] = {}
    readers_since: dict[int, list[int]] = {}
    operators: list[int] = []
    deps: list[set[int]] = []
    touched: dict[int, dict[int, bool]] = {}
    for index, binding in enumerate(bindings):
        if not isinstance(binding, relax.VarBinding):
            raise ReorderError(f"binding {index}: match_cast is not supported")
        value = binding.value
        used = relax.analysis.free_vars(value)
        before = {defined[var] for var in used if var in defined}
        defined[binding.var] = index
        if isinstance(value, relax.Call) and value.op == _ALLOC:
            roots[binding.var] = {index}
        elif (
            not isinstance(value, (relax.Call, *_COMPOUND))
            or isinstance(value, relax.Call)
            and value.op in _VIEW_OPS
        ):
            aliased = set().union(*(roots.get(var, set()) for var in used))
            if aliased:
                roots[binding.var] = aliased
        else:
            operators.append(index)
            touches = _touches(mod, value, roots)
            for root, writes in touches.items():
                if root not in creator:
                    # The first operator to touch an allocation fills it.
                    creator[root] = index
                    writes = touches[root] = True
                if root in last_writer:
                    before.add(last_writer[root])
                if writes:
                    before.update(readers_since.get(root, ()))
                    last_writer[root] = index
                    readers_since[root] = []
                else:
                    readers_since.setdefault(root, []).append(index)
            touched[index] = touches
            before.discard(index)
            if touches and not _returns_nothing(value):
                # A call may hand back one of its arguments (an in-place kernel).
                roots[binding.var] = set(touches)
        deps.append(before)

    is_operator = set(operators)
    resolved: dict[int, set[int]] = {}

    def operators_before(index: int) -> set[int]:
        """Operators reached from ``index``'s dependencies through bindings that run nothing."""
        if index not in resolved:
            found: set[int] = set()
            for dep in deps[index]:
                found |= {dep} if dep in is_operator else operators_before(dep)
            resolved[index] = found
        return resolved[index]

    ops, sizes = [], {}
    for index in operators:
        touches = touched[index]
        creates = [root for root in touches if creator[root] == index]
        for root in creates:
            sizes[str(root)] = size_of.get(root, 0)
        ops.append(
            Op(
                str(index),
                creates=tuple(str(root) for root in creates),
                reads=tuple(str(root) for root in touches if creator[root] != index),
                after=tuple(str(dep) for dep in sorted(operators_before(index))),
            )
        )
    return OperatorGraph(OpGraph(tuple(ops), sizes), operators, deps)


def _returns_nothing(call: relax.Expr) -> bool:
    ty = call.ty
    return isinstance(ty, relax.TupleType) and len(ty.fields) == 0


def _touches(mod: tvm.IRModule, call: relax.Expr, roots) -> dict[int, bool]:
    """The allocations ``call`` touches, each with whether it may write them."""
    args = call.args if isinstance(call, relax.Call) else [call]
    written = None
    if isinstance(call, relax.Call) and isinstance(call.op, relax.GlobalVar):
        callee = mod[call.op]
        if isinstance(callee, tvm.tirx.PrimFunc):
            written = written_params(callee)
    found: dict[int, bool] = {}
    for position, arg in enumerate(args):
        writes = written is None or position >= len(written) or written[position]
        for var in relax.analysis.free_vars(arg):
            for root in roots.get(var, ()):
                found[root] = found.get(root, False) or writes
    return found


class _Unknown(Exception):
    pass


def written_params(kernel: tvm.tirx.PrimFunc) -> list[bool] | None:
    """For each parameter of ``kernel``, whether its body may store into it (None: unknown).

    Read from the stores themselves, since a fused kernel's block annotations can miss an
    access.
    """
    # TIR buffers are compared by identity (``==`` on them builds an expression).
    known = list(enumerate(kernel.params))
    stored: set[int] = set()

    def param_of(buffer) -> int | None:
        return next((pos for pos, param in known if param.same_as(buffer)), None)

    def walk(node) -> None:
        if isinstance(node, tvm.tirx.BufferStore):
            position = param_of(node.buffer)
            if position is not None:
                stored.add(position)
        elif isinstance(node, SBlockRealize):
            walk(node.block)
        elif isinstance(node, SBlock):
            for match in node.match_buffers:
                source = param_of(region_buffer(match.source))
                if source is not None:
                    known.append((source, match.buffer))
            if node.init is not None:
                walk(node.init)
            walk(node.body)
        elif isinstance(node, tvm.tirx.SeqStmt):
            for child in node.seq:
                walk(child)
        elif isinstance(node, tvm.tirx.IfThenElse):
            walk(node.then_case)
            if node.else_case is not None:
                walk(node.else_case)
        elif isinstance(node, tvm.tirx.Evaluate):
            # A call in a statement of its own may write through any pointer it is given.
            if not isinstance(node.value, tvm.tirx.IntImm):
                raise _Unknown
        elif isinstance(node, tvm.tirx.stmt.Stmt) and hasattr(node, "body"):
            # Loops, lets, attributes, buffer declarations: one nested statement each.
            walk(node.body)
        else:
            raise _Unknown

    try:
        walk(kernel.body)
    except _Unknown:
        return None
    return [position in stored for position in range(len(kernel.params))]


def reorder_bindings(
    mod: tvm.IRModule, function: str, operators: OperatorGraph, order
) -> tvm.IRModule:
    """``mod`` with ``function``'s operators in ``order`` (operator names, as in the graph).

    Each operator is preceded by whatever it needs that has not been emitted yet, in program
    order; bindings nothing depends on go as early as their own dependencies allow.
    """
    func = mod[function]
    bindings = bindings_of(func)
    deps = operators.deps
    needed = set().union(*deps) if deps else set()
    is_operator = set(operators.operators)
    sinks = [i for i in range(len(bindings)) if i not in needed and i not in is_operator]
    emitted: set[int] = set()
    out: list[relax.Binding] = []

    defined = set(func.params)

    def emit(index: int) -> None:
        if index in emitted:
            return
        for dep in sorted(deps[index]):
            emit(dep)
        binding = bindings[index]
        if any(var not in defined for var in relax.analysis.free_vars(binding.value)):
            raise ReorderError(f"binding {index} would use a variable before its definition")
        emitted.add(index)
        defined.add(binding.var)
        out.append(binding)

    def flush() -> None:
        for sink in [s for s in sinks if s not in emitted and deps[s] <= emitted]:
            emit(sink)

    after = {int(op.name): [int(name) for name in op.after] for op in operators.graph.ops}
    flush()
    for name in order:
        index = int(name)
        if index not in after:
            raise ReorderError(f"binding {index} is not an operator")
        if any(dep not in emitted for dep in after[index]):
            raise ReorderError(f"operator {index} runs before one it depends on")
        emit(index)
        flush()
    for index in range(len(bindings)):
        emit(index)

    body = relax.SeqExpr([relax.BindingBlock(out)], func.body.body)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    result = tvm.IRModule(mod.functions, attrs=mod.attrs)
    result[function] = new_func
    return result


def choose_binding_order(
    mod: tvm.IRModule,
    function: str = "forward",
    bounds: dict[str, int] | None = None,
    *,
    max_states: int = MAX_STATES,
) -> tuple[tvm.IRModule, OrderResult]:
    """``mod`` with ``function``'s operators in the order of lowest peak, and that search.

    When no order beats program order, ``mod`` itself comes back unchanged.
    """
    operators = operator_graph(mod, function, bounds)
    result = choose_order(operators.graph, max_states=max_states)
    if result.kept_program_order:
        return mod, result
    return reorder_bindings(mod, function, operators, result.order), result
