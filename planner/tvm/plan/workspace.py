"""The bytes TVM's CPU workspace pool holds for a build, counted from its built kernels.

A kernel temporary that TVM does not keep on the stack becomes, in the kernel's final TIR
(after ``LowerTVMBuiltin``, the last pass before code generation), a call to
``TVMBackendAllocWorkspace`` with its size in bytes and a ``TVMBackendFreeWorkspace`` where
its scope ends. Those sizes are the kernel's own after TVM compacted its buffers (often
smaller than the buffers declared before lowering) and the calls are in the order the kernel
makes them. :func:`capture` reads them while ``tvm.tirx.build`` runs (a pass instrument:
no second lowering), and :func:`pool_bytes` replays a build's calls through the rules of
the pool they reach (``src/runtime/workspace_pool.cc``): requests in whole 4 KiB pages, a
freed page kept in a list sorted by size, a request served by the smallest free page that
fits, else by the largest free page grown, else by a new page. The pool never gives memory
back, so what it holds after the calls is also the most it held.

A request whose size follows the kernel's own shape symbols is sized at each call's bounds
(the values the call's arguments take at the function's upper bounds). A kernel whose
requests cannot be counted (a request inside a parallel loop, which each worker thread
makes in its own pool; a size in a symbol the call does not bound) makes the count None,
and the plan keeps the estimate from the kernels before lowering.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from contextlib import contextmanager

import tvm

#: TVM's workspace pool hands out whole pages of this size (``kWorkspacePageSize``).
PAGE_BYTES = 4096

_ALLOC = "tirx.TVMBackendAllocWorkspace"
_FREE = "tirx.TVMBackendFreeWorkspace"


class Uncounted(Exception):
    """A kernel's workspace requests are not all constants in sequence."""


def _is_call(expr, name: str) -> bool:
    op = getattr(expr, "op", None)
    return isinstance(expr, tvm.ir.Call) and isinstance(op, tvm.ir.Op) and op.name == name


def _buffer_of(data):
    """The buffer whose data ``data`` is: TVM 0.27 writes a buffer's data pointer as the
    call ``tirx.buffer_data(buffer)``, a fresh node at every use, so the buffer itself is
    what identifies it."""
    if _is_call(data, "tirx.buffer_data") and len(data.args) == 1:
        return data.args[0]
    return data


def _freed(condition):
    """What a lowered free releases: ``if TVMBackendFreeWorkspace(..., data) != 0``."""
    for side in (getattr(condition, "a", None), getattr(condition, "b", None)):
        if side is not None and _is_call(side, _FREE):
            return _buffer_of(side.args[2])
    return None


def _walk(stmt, requests: list, names: list, parallel: bool, lets: dict | None = None) -> None:
    lets = {} if lets is None else lets
    if stmt is None:
        return
    if isinstance(stmt, tvm.tirx.SeqStmt):
        for child in stmt.seq:
            _walk(child, requests, names, parallel, lets)
        return
    var, value = getattr(stmt, "var", None), getattr(stmt, "value", None)
    if isinstance(var, tvm.tirx.Var) and value is not None:
        # A value TVM bound to a name (its common subexpressions): a size may use it.
        lets[var.name] = value
    data = getattr(stmt, "data", None) if isinstance(stmt, tvm.tirx.DeclBuffer) else None
    if data is not None and _is_call(data, _ALLOC):
        size = data.args[2]
        if parallel:
            raise Uncounted("a workspace request inside a parallel loop")
        names.append((stmt.buffer, len(requests)))
        # A size in the kernel's symbols stays an expression, sized at each call.
        requests.append(
            int(size.value) if isinstance(size, tvm.tirx.IntImm) else (size, dict(lets))
        )
    if isinstance(stmt, tvm.tirx.IfThenElse):
        freed = _freed(stmt.condition)
        if freed is not None:
            at = next((i for buffer, i in names if buffer.same_as(freed)), None)
            if at is None:
                raise Uncounted("a workspace free of a buffer it did not allocate")
            requests.append(-(at + 1))
            return
        _walk(stmt.then_case, requests, names, parallel, lets)
        _walk(stmt.else_case, requests, names, parallel, lets)
        return
    if isinstance(stmt, tvm.tirx.For):
        inner = parallel or stmt.kind == tvm.tirx.ForKind.PARALLEL
        _walk(stmt.body, requests, names, inner, lets)
        return
    body = getattr(stmt, "body", None)
    if isinstance(body, tvm.tirx.Stmt):
        _walk(body, requests, names, parallel, lets)


def requests_of(func) -> list:
    """``func``'s workspace requests in order: a size for each allocation (a number, or an
    expression in the kernel's shape symbols), ``-(i + 1)`` for the free of the i-th;
    :class:`Uncounted` where they cannot be read."""
    requests: list = []
    _walk(func.body, requests, [], False)
    return requests


def kernel_requests(mod: tvm.IRModule) -> dict[str, list | None]:
    """Every kernel's requests in a lowered ``mod``, by the name the VM calls it by (the
    lowered function of ``name`` is ``__tvm_ffi_name``); None for one that cannot be read."""
    found: dict[str, list | None] = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        name = gvar.name_hint.removeprefix("__tvm_ffi_")
        try:
            found[name] = requests_of(func)
        except Uncounted:
            found[name] = None
    return found


@contextmanager
def capture() -> Iterator[dict[str, list[int] | None]]:
    """Within it, every ``tvm.tirx.build`` records its kernels' requests in the dict it
    yields (see :func:`kernel_requests`), read after ``LowerTVMBuiltin`` runs."""
    found: dict[str, list[int] | None] = {}

    @tvm.instrument.pass_instrument
    class _Read:
        def run_after_pass(self, mod, info):
            if info.name.endswith("LowerTVMBuiltin"):
                found.update(kernel_requests(mod))

    current = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(
        opt_level=current.opt_level,
        required_pass=list(current.required_pass),
        disabled_pass=list(current.disabled_pass),
        instruments=[*current.instruments, _Read()],
        config=dict(current.config),
    ):
        yield found


def page_rounded(size: int) -> int:
    return max(1, -(-size // PAGE_BYTES)) * PAGE_BYTES


def _sized(request, symbols: dict[str, int]) -> int | None:
    """A request's size at a call whose shape symbols take ``symbols``; None if unknown."""
    if isinstance(request, int):
        return request
    from planner.tvm.plan.extract import ExtractionError, upper_bound

    size, lets = request
    values = dict(symbols)
    for name, value in lets.items():  # in the order the kernel bound them
        try:
            values[name] = upper_bound(value, values)
        except ExtractionError:
            continue
    try:
        return upper_bound(size, values)
    except ExtractionError:
        return None


def pool_bytes(requests: dict[str, list | None], calls: list) -> int | None:
    """What TVM's CPU workspace pool holds after ``calls`` make their ``requests``: in the
    order the function calls them, each a kernel's name, or ``(name, symbols)`` with the
    values its shape symbols take at that call. None where a called kernel's requests are
    not known or not sized. A kernel the requests do not name makes none."""
    free: list[int] = []  # free pages by size, smallest first
    held = 0
    for call in calls:
        kernel, symbols = (call, {}) if isinstance(call, str) else call
        made = requests.get(kernel, [])
        if made is None:
            return None
        pages: dict[int, int] = {}
        for index, request in enumerate(made):
            if isinstance(request, int) and request < 0:
                bisect.insort_right(free, pages.pop(-request - 1))
                continue
            sized = _sized(request, symbols)
            if sized is None:
                return None
            size = page_rounded(sized)
            if not free:
                page, held = size, held + size
            elif free[-1] >= size:
                page = free.pop(bisect.bisect_left(free, size))
            else:
                page = free.pop()
                held += size - page
                page = size
            pages[index] = page
        # Every page is back in the pool once the kernel returns: a free this reading did
        # not pair with its request is taken to be at the kernel's end.
        for page in pages.values():
            bisect.insort_right(free, page)
    return held
