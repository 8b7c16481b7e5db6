"""Kernels a plan hands overlapping memory lose their ``noalias`` promise.

TVM's LLVM code generator reads a kernel's ``tirx.noalias`` once for the whole kernel
(``is_restricted_`` in ``src/target/llvm/codegen_llvm.cc``; the C generator likewise writes
``restrict`` on every pointer): with it, each pointer parameter of the kernel's compute
function is declared ``noalias`` and each buffer gets a TBAA type of its own, so LLVM may
move a load of one buffer past a store to another. The promise cannot be withdrawn for some
parameters only.

Whatever put two arguments of one call at overlapping bytes (an in-place merge proven by
any rule, a concatenation's input in its slot, lifted temporaries of different loop nests
at one place), the proofs say the kernel's statements, in their order, never read a byte
after another buffer overwrote it, which holds only while the compiler keeps that order; so
then no CPU kernel of the function keeps the promise (see
:func:`unalias_overlapping_calls` for why not only that call's). A GPU kernel's pointers are all
``__restrict__`` whatever the attribute says, so there two arguments may overlap only when
the kernel reads and writes them through one pointer
(:func:`planner.tvm.plan.rewrites.share_pointer`); anything else is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm
from tvm import relax

from planner.tvm.plan.extract import Extraction, bindings_of
from planner.tvm.plan.kernel_accesses import gpu_kernel, is_gpu_kernel

#: The attribute's name in 0.27, and in the releases before ``tir`` was split.
NOALIAS_KEYS = ("tirx.noalias", "tir.noalias")

_VIEW_OPS = {
    tvm.ir.Op.get("relax.reshape"),
    tvm.ir.Op.get("relax.memory.view"),
    tvm.ir.Op.get("relax.memory.ensure_zero_offset"),
}


class SharedPointerError(ValueError):
    """A kernel whose pointers may not alias would be handed overlapping memory."""


def promises_noalias(kernel: tvm.tirx.PrimFunc) -> bool:
    attrs = kernel.attrs or {}
    return any(key in attrs and bool(attrs[key]) for key in NOALIAS_KEYS)


def without_noalias(kernel: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    attrs = kernel.attrs or {}
    for key in NOALIAS_KEYS:
        if key in attrs:
            kernel = kernel.with_attr(key, False)
    return kernel


def overlapping_arguments(
    func: relax.Function, extraction: Extraction, offsets: Mapping[str, int]
) -> dict[int, list[tuple[int, int, str, str]]]:
    """By binding index, every call to a function of the module that ``offsets`` hands two
    different tensors sharing a byte: (parameter, parameter, tensor, tensor) per pair.

    A tensor passed twice is TVM's own doing (``x + x``) and reads the same bytes through
    both parameters; it is not counted.
    """
    bindings = bindings_of(func)
    by_index = {t.binding_index: t for t in extraction.tensors}
    spans = {t.name: (offsets[t.name], offsets[t.name] + t.size) for t in extraction.tensors}
    held: dict[relax.Var, set[str]] = {}
    found: dict[int, list[tuple[int, int, str, str]]] = {}
    for index, binding in enumerate(bindings):
        value = binding.value
        tensor = by_index.get(index)
        if tensor is not None:
            held[binding.var] = {tensor.name}
            continue
        refers = set()
        for var in relax.analysis.free_vars(value):
            refers |= held.get(var, set())
        if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar):
            args = [held.get(a, set()) if isinstance(a, relax.Var) else set() for a in value.args]
            pairs = [
                (i, j, a, b)
                for i in range(len(args))
                for j in range(i + 1, len(args))
                for a in sorted(args[i])
                for b in sorted(args[j])
                if a != b and spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
            ]
            if pairs:
                found[index] = pairs
            # An in-place kernel hands back one of its arguments.
            if refers and not _returns_nothing(value):
                held[binding.var] = refers
        elif refers and (
            isinstance(value, relax.Var | relax.Tuple | relax.TupleGetItem)
            or (isinstance(value, relax.Call) and value.op in _VIEW_OPS)
        ):
            held[binding.var] = refers
    return found


def _returns_nothing(call: relax.Call) -> bool:
    ty = call.ty
    return isinstance(ty, relax.TupleType) and len(ty.fields) == 0


def unalias_overlapping_calls(
    mod: tvm.IRModule,
    extraction: Extraction,
    offsets: Mapping[str, int],
    *,
    drop: frozenset[int] | set[int] = frozenset(),
) -> tuple[tvm.IRModule, list[str]]:
    """``mod`` with no CPU kernel promising ``noalias`` if ``offsets`` hands any call of
    the planned function tensors that share a byte, and the kernels that lost it.

    Every kernel, not only those of the calls handed overlapping tensors: on a Llama
    decoder at length 32 (``tests/tvm/plan/test_noalias_sweep.py``), dropping the promise
    at those calls alone still gave outputs 3.5e-4 off TVM's, and dropping it everywhere
    matched exactly; which other kernel's promise mattered, and how, was not found. Calls
    in ``drop`` (left out of the planned function) are not looked at.
    """
    function = extraction.function
    func = mod[function]
    calls = {
        index: pairs
        for index, pairs in overlapping_arguments(func, extraction, offsets).items()
        if index not in drop
    }
    if not calls:
        return mod, []
    bindings = bindings_of(func)
    for index, pairs in calls.items():
        call = bindings[index].value
        kernel = mod[call.op]
        if isinstance(kernel, tvm.tirx.PrimFunc) and is_gpu_kernel(kernel):
            _check_one_pointer(call.op.name_hint, kernel, pairs)
    functions = dict(mod.functions)
    unaliased = []
    # Every kernel of the module, not only those the planned function's bindings call: on
    # timm's MobileViT-XXS at 32x32, +rewrites was 0.0128 off TVM's outputs while 36
    # kernels no binding named kept the promise, and putting it back on one of them alone
    # (reshape9) brought the error back; how the build reaches it was not found. Taken from
    # every kernel, the outputs match at the same planned bytes, and a kernel no call
    # reaches loses nothing by it.
    for gvar in list(functions):
        kernel = functions[gvar]
        if (
            isinstance(kernel, tvm.tirx.PrimFunc)
            and promises_noalias(kernel)
            and not is_gpu_kernel(kernel)
        ):
            functions[gvar] = without_noalias(kernel)
            unaliased.append(gvar.name_hint)
    if not unaliased:
        return mod, []
    return tvm.IRModule(functions, attrs=mod.attrs), sorted(unaliased)


def _check_one_pointer(name: str, kernel: tvm.tirx.PrimFunc, pairs) -> None:
    accesses = gpu_kernel(kernel)
    params = list(kernel.params)
    for i, j, a, b in pairs:
        if accesses.launches_touching(params[i]) and accesses.launches_touching(params[j]):
            raise SharedPointerError(
                f"GPU kernel {name} would be handed {a} and {b} overlapping through two "
                "pointers, which it declares __restrict__"
            )
