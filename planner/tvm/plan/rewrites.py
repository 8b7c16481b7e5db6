"""In-place and concat-elision rewrites: tensors that may share memory by construction.

Both rewrites merge tensors into groups whose members sit at fixed offsets relative to the
group; the planner then places groups instead of tensors.

- **In-place**: a kernel may write an output (or one of its lifted temporaries) into an
  input that dies at that call, at the input's offset; the output may be smaller (a pooling
  into the start of the conv output it reads). Proven on the loads and stores the kernel's
  statements make, never on its blocks' declared regions (:mod:`planner.tvm.plan.kernel_accesses`):
  every access of the input in an earlier loop nest, or elementwise, or, for static shapes,
  every byte read before it is overwritten, evaluated in loop order.
- **Concat elision**: a concatenation whose output splits into contiguous slices (every
  dimension before the axis has extent 1, e.g. NCHW with batch 1 along channels) gets its
  inputs placed in their slices, so producers write straight into the output, also when
  the concatenation is fused with the operators that consume it (DenseNet's concat + batch
  norm + ReLU). When every input is placed, an unfused copy kernel is dropped and a fused
  kernel loses its copy nest, reading the slices where they are. In DenseNet every layer's
  features then sit once in one buffer per block.

Every merge is checked pairwise (:meth:`Rewrites.merge`): two tensors may share bytes while
both are live only where a proof covers that pair, so merges that are fine one at a time
cannot combine into an overlap nobody proved.

On a GPU (kernels TVM's CUDA pipeline scheduled with dlight before memory is planned) the
proofs are made thread by thread on the scheduled kernel, and a merged kernel reads and
writes through one pointer (:func:`share_pointer`): TVM marks every CUDA kernel pointer
``__restrict__`` whatever ``tirx.noalias`` says. Pooling padding and kernel temporaries
need nothing there (the schedule computes padding inline and keeps temporaries in shared
and local memory). What is not made is listed with its reason (``Rewrites.skipped``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import relax, s_tir

from planner import strategies as library
from planner.problem import Buffer, Problem
from planner.tvm.compat import Analyzer, SBlock, SBlockRealize, region_buffer
from planner.tvm.plan.extract import ARENA_ALIGNMENT, Extraction, bindings_of
from planner.tvm.plan.kernel_accesses import (
    GpuKernel,
    Nest,
    block_accesses,
    gpu_kernel,
    gpu_store_over_source,
    is_gpu_kernel,
    kernel_nests,
    load_buffer,
    store_over_source_safe,
)
from planner.tvm.plan.kernel_temps import kernel_blocks

# 0.27 loads and block regions are ``tvm.ir.TensorLoad``/``TensorRegion``; earlier,
# ``tirx.BufferLoad``/``BufferRegion`` (the constructors of both keep those names).
_LOAD = getattr(tvm.ir, "TensorLoad", None) or tvm.tirx.BufferLoad
_REGION = getattr(tvm.ir, "TensorRegion", None) or tvm.tirx.BufferRegion


@dataclass
class Rewrites:
    #: member -> (root, offset of the member inside the root's group)
    parent: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: binding indices of calls that no longer need to run (elided concat copies)
    dropped: set[int] = field(default_factory=set)
    inplace: list[tuple[str, str, str]] = field(default_factory=list)
    concats: list[tuple[str, str, list[str]]] = field(default_factory=list)
    #: binding index -> the concatenation nest to take out of its kernel (fused concats
    #: whose inputs all sit in their slices already)
    stripped: dict[int, str] = field(default_factory=dict)
    #: binding indices whose kernel reads and writes aliased buffers inside one loop nest,
    #: so its parameters may no longer be declared ``noalias``
    aliased_calls: set[int] = field(default_factory=set)
    concat_copies_removed: int = 0
    concat_bytes_saved: int = 0
    concat_copies_left: int = 0
    #: In-place writes made of a result smaller than the input it takes over (pooling, a
    #: cast to a narrower type): the merged group keeps the input's size for as long as the
    #: result lives, which :func:`find_rewrites` weighs before keeping them.
    shrinking: int = 0
    #: binding index -> (kept, dropped) parameter pairs: the kernel writes and reads the
    #: dropped parameter through the kept one's pointer (both sit at one address)
    shared: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    #: rewrites found but not made, each with the reason
    skipped: list[dict] = field(default_factory=list)
    #: (tensor, lower, upper, size) of every tensor, for checking merges; empty: unchecked
    spans: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: Whether two tensors may overlap in bytes while both are live, the second ``delta``
    #: bytes after the first; consulted for every such pair a merge creates.
    allowed: object = None
    members: dict[str, list[str]] = field(default_factory=dict)

    def find(self, name: str) -> tuple[str, int]:
        offset = 0
        while name in self.parent:
            name, rel = self.parent[name]
            offset += rel
        return name, offset

    def problem(self, extraction: Extraction, name: str = "") -> Problem:
        """One buffer per group: the union of its members' lifetimes and extents."""
        spans: dict[str, list[int]] = {}
        for tensor in extraction.tensors:
            root, rel = self.find(tensor.name)
            lower, upper, size = spans.get(root, [tensor.lower, tensor.upper, 0])
            spans[root] = [
                min(lower, tensor.lower),
                max(upper, tensor.upper),
                max(size, rel + tensor.size),
            ]
        return Problem(
            tuple(
                Buffer(root, lower, upper, size, alignment=ARENA_ALIGNMENT)
                for root, (lower, upper, size) in spans.items()
            ),
            name=name,
        )

    def expand(self, extraction: Extraction, offsets: dict[str, int]) -> dict[str, int]:
        placed = {}
        for tensor in extraction.tensors:
            root, rel = self.find(tensor.name)
            placed[tensor.name] = offsets[root] + rel
        return placed

    def group(self, root: str) -> list[str]:
        return self.members.get(root, [root])

    def merge(self, member: str, into: str, at: int) -> bool:
        """Put ``member``'s group at offset ``at`` of ``into``'s group, if that is sound.

        Sound means: every two tensors of the joined group that would share bytes while
        both are live are a pair ``allowed`` vouches for (a kernel proven to finish with
        one before writing the other, or a concatenation and one of its slices).
        """
        member_root, member_rel = self.find(member)
        into_root, into_rel = self.find(into)
        rel = into_rel + at - member_rel  # where member's root sits in into's root
        if member_root == into_root:
            return rel == 0  # already placed, and consistently
        if rel % ARENA_ALIGNMENT:
            return False
        if self.spans and not self._compatible(member_root, into_root, rel):
            return False
        if rel >= 0:
            self.parent[member_root] = (into_root, rel)
            root, joined = into_root, member_root
        else:
            self.parent[into_root] = (member_root, -rel)
            root, joined = member_root, into_root
        self.members[root] = [*self.group(root), *self.group(joined)]
        self.members.pop(joined, None)
        return True

    def _compatible(self, left_root: str, right_root: str, rel: int) -> bool:
        """``left_root``'s group at ``rel`` bytes into ``right_root``'s: no unvouched overlap."""
        left = [(n, self.find(n)[1] + rel) for n in self.group(left_root)]
        right = [(n, self.find(n)[1]) for n in self.group(right_root)]
        for a, a_at in left:
            a_lower, a_upper, a_size = self.spans[a]
            for b, b_at in right:
                b_lower, b_upper, b_size = self.spans[b]
                if a_upper <= b_lower or b_upper <= a_lower:
                    continue
                if a_at + a_size <= b_at or b_at + b_size <= a_at:
                    continue
                if self.allowed is None or not self.allowed(a, b, b_at - a_at):
                    return False
        return True


def _blocks(kernel: tvm.tirx.PrimFunc) -> list[SBlock] | None:
    return kernel_blocks(kernel)


def _regions(regions, buffer) -> list:
    return [r for r in regions if region_buffer(r).same_as(buffer)]


def inplace_safe(kernel: tvm.tirx.PrimFunc, source, target, delta: int = 0) -> bool:
    """May ``target`` be written ``delta`` bytes into ``source`` inside ``kernel``?

    Decided from the loads and stores the kernel's statements make, never from the blocks'
    declared read and write regions (see :mod:`planner.tvm.plan.kernel_accesses`).
    """
    return store_over_source_safe(kernel, source, target, delta) is not None


@dataclass(frozen=True)
class ConcatSlots:
    """A concatenation nest in a kernel: its output parameter and each input's byte slot."""

    nest: int
    name: str
    output: int
    #: (parameter index, byte offset of that input inside the output)
    inputs: tuple[tuple[int, int], ...]
    #: the nest is the whole kernel (an unfused ``concatenate``)
    whole: bool


def concat_slots(kernel: tvm.tirx.PrimFunc, nests: list[Nest] | None = None) -> ConcatSlots | None:
    """The concatenation a kernel starts with, read from the loads its nest makes.

    Each input must be loaded at the output's own indices, shifted along one axis by a
    constant, and the shifted ranges must tile that axis: then the output is the inputs
    laid one after another, provided every dimension before the axis has extent 1. The
    output must be written by that nest only, so it keeps the inputs' values throughout.
    """
    nests = kernel_nests(kernel) if nests is None else nests
    if not nests:
        return None
    index = next((i for i, n in enumerate(nests) if n.block.name_hint.startswith("T_concat")), None)
    if index is None:
        return None
    nest = nests[index]
    params = list(kernel.params)
    if len(nest.stores) != 1 or nest.init_stores or nest.block.init is not None:
        return None
    (store,) = nest.stores
    out = store.buffer
    out_index = next((i for i, p in enumerate(params) if p.same_as(out)), None)
    if (
        out_index is None
        or any(n.touches(out) for j, n in enumerate(nests) if j < index)
        or any(n.stored(out) for j, n in enumerate(nests) if j > index)
    ):
        return None
    out_shape = _ints(out.shape)
    extents = _ints([loop.extent for loop in nest.loops])
    mins = _ints([loop.min for loop in nest.loops])
    if out_shape is None or extents is None or mins is None:
        return None
    iter_vars = [iv.var for iv in nest.block.iter_vars]
    values = list(nest.realize.iter_values)
    loop_vars = [loop.loop_var for loop in nest.loops]
    # The nest visits every output element once: block iterators are the loops, in order.
    if (
        extents != out_shape
        or any(mins)
        or len(values) != len(loop_vars)
        or not all(v.same_as(lv) for v, lv in zip(values, loop_vars, strict=True))
        or len(store.indices) != len(iter_vars)
        or not all(i.same_as(v) for i, v in zip(store.indices, iter_vars, strict=True))
    ):
        return None
    return _concat_layout(
        params, store, nest.loads, out_index, index, nest.block.name_hint, len(nests) == 1
    )


def gpu_concat_slots(kernel: tvm.tirx.PrimFunc) -> ConcatSlots | None:
    """The concatenation a GPU-scheduled kernel is, when that is all it is.

    Only a kernel of one ``T_concat`` block is taken (its call is then dropped, so how its
    loops were scheduled does not matter): a schedule runs every instance of a block's
    iteration domain once, so a block whose spatial domain is the output's shape and that
    stores at its iterators writes every output element once. A concatenation fused with
    other work is inlined into it by the GPU schedule and never materialised.
    """
    blocks = kernel_blocks(kernel)
    if not blocks or len(blocks) != 1 or not blocks[0].name_hint.startswith("T_concat"):
        return None
    block = blocks[0]
    accesses = block_accesses(block)
    if accesses is None or block.init is not None:
        return None
    loads, stores = accesses
    if len(stores) != 1:
        return None
    (store,) = stores
    params = list(kernel.params)
    out_index = next((i for i, p in enumerate(params) if p.same_as(store.buffer)), None)
    out_shape = _ints(store.buffer.shape)
    if out_index is None or out_shape is None:
        return None
    # The schedule may drop iterators of extent 1 (the store indexes those dimensions at
    # 0); every iterator left is spatial and stores along one dimension, over all of it.
    indices = list(store.indices)
    iterators = [iv.var for iv in block.iter_vars]
    if len(indices) != len(out_shape) or not all(
        any(index.same_as(v) for v in iterators)
        for index in indices
        if not isinstance(index, tvm.tirx.IntImm)
    ):
        return None
    for iv in block.iter_vars:
        dims = [d for d, index in enumerate(indices) if index.same_as(iv.var)]
        if (
            int(iv.iter_type) != 0
            or len(dims) != 1
            or _ints([iv.dom.min, iv.dom.extent]) != [0, out_shape[dims[0]]]
        ):
            return None
    return _concat_layout(params, store, loads, out_index, 0, block.name_hint, True)


def _concat_layout(
    params, store, loads, out_index: int, nest: int, name: str, whole: bool
) -> ConcatSlots | None:
    """The slots of a concatenation ``store`` makes from ``loads``: it stores at distinct
    variables, or at 0 along a dimension of extent 1, and each load reads at the same
    indices but for one dimension shifted by a constant."""
    out = store.buffer
    out_shape = _ints(out.shape)
    indices = list(store.indices)
    if out_shape is None or len(indices) != len(out_shape):
        return None
    for dim, index in enumerate(indices):
        fixed = isinstance(index, tvm.tirx.IntImm) and int(index) == 0 and out_shape[dim] == 1
        if not fixed and not (
            isinstance(index, tvm.tirx.Var)
            and sum(1 for other in indices if other.same_as(index)) == 1
        ):
            return None
    slots: dict[int, int] = {}  # parameter index -> start along the axis
    axis = None
    for load in loads:
        param = next((i for i, p in enumerate(params) if p.same_as(load_buffer(load))), None)
        if param is None or param == out_index or len(load.indices) != len(indices):
            return None
        shift = None
        for dim, (idx, var) in enumerate(zip(load.indices, indices, strict=True)):
            if idx.same_as(var) or (
                isinstance(var, tvm.tirx.IntImm)
                and isinstance(idx, tvm.tirx.IntImm)
                and int(idx) == int(var)
            ):
                continue
            if (
                isinstance(var, tvm.tirx.Var)
                and isinstance(idx, tvm.tirx.Sub)
                and idx.a.same_as(var)
                and isinstance(idx.b, tvm.tirx.IntImm)
                and shift is None
                and (axis is None or axis == dim)
            ):
                axis, shift = dim, int(idx.b)
                continue
            return None
        start = shift or 0
        if slots.setdefault(param, start) != start:
            return None
    if not slots:
        return None
    axis = axis or 0
    itemsize = (tvm.DataType(str(out.dtype)).bits + 7) // 8
    inner = itemsize
    for d in out_shape[axis + 1 :]:
        inner *= d
    if any(d != 1 for d in out_shape[:axis]):
        return None  # the slices would interleave, not sit one after another
    at = 0
    placed = []
    for param, start in sorted(slots.items(), key=lambda kv: kv[1]):
        buffer = params[param]
        shape = _ints(buffer.shape)
        if (
            shape is None
            or start != at
            or len(shape) != len(out_shape)
            or str(buffer.dtype) != str(out.dtype)
            or any(
                a != b for d, (a, b) in enumerate(zip(shape, out_shape, strict=True)) if d != axis
            )
        ):
            return None
        placed.append((param, start * inner))
        at += shape[axis]
    if at != out_shape[axis]:
        return None
    return ConcatSlots(nest, name, out_index, tuple(placed), whole)


def _ints(dims) -> list[int] | None:
    if not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return [int(d) for d in dims]


def inline_pool_padding(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[str]]:
    """Compute the padding of pooling kernels inside the pooling loop instead of a buffer.

    A legalised max/avg pool first copies its whole input into a padded temporary, which
    for a ResNet stem is larger than the pooled tensor itself and sits at the model's peak.
    Reading the input with a bounds check instead costs a compare per window element in a
    kernel that is cheap to begin with; convolutions keep their padded buffer (their inner
    loop is where the time goes).
    """

    def padding(name: str, func: tvm.tirx.PrimFunc) -> list[str]:
        if "pool" not in name:
            return []
        return [b.name_hint for b in kernel_blocks(func) or [] if b.name_hint == "pad_temp"]

    return _inline_blocks(mod, padding)


def inline_copy_blocks(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[str]]:
    """Read a fused kernel's copies where they are used instead of through a temporary.

    Legalising ``split`` inside a fused kernel copies each section into a temporary of its
    own before the rest of the kernel reads it: a Llama MLP's ``silu(gate) * up`` over a
    fused gate and up projection copies both halves, two temporaries each as large as its
    output, alive at the prefill's peak. A section that only copies a slice costs nothing
    to compute where it is read, so it is inlined; every other block stays as TVM
    scheduled it.
    """

    def copies(name: str, func: tvm.tirx.PrimFunc) -> list[str]:
        # Only a split's sections: inlining every slice copy (reshapes, pads, strided
        # slices as well) gave a Mamba2 block NaN under best-fit+rewrites in one run of
        # several, not understood yet; a concatenation's copies are the concatenation
        # rewrite's (find_rewrites), which finds them by their blocks.
        return [
            b.name_hint for b in kernel_blocks(func) or []
            if b.name_hint.startswith("T_split_sections") and _only_copies(b, func)
        ]

    return _inline_blocks(mod, copies)


def _inline_blocks(mod: tvm.IRModule, choose) -> tuple[tvm.IRModule, list[str]]:
    """``mod`` with the blocks ``choose(kernel name, kernel)`` names computed where they are
    read (a block TVM cannot inline stays), and the kernels that changed."""
    functions = dict(mod.functions)
    builder = relax.BlockBuilder()
    renamed: dict[relax.GlobalVar, relax.GlobalVar] = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        chosen = choose(gvar.name_hint, func)
        if not chosen:
            continue
        schedule = s_tir.Schedule(func)
        inlined = 0
        for name in chosen:
            try:
                schedule.compute_inline(schedule.get_sblock(name))
                inlined += 1
            except s_tir.ScheduleError:
                continue
        if not inlined:
            continue
        del functions[gvar]
        renamed[gvar] = builder.add_func(schedule.mod["main"], gvar.name_hint)
    if not renamed:
        return mod, []
    for gvar in renamed.values():
        functions[gvar] = builder.get()[gvar]
    for gvar, func in list(functions.items()):
        if isinstance(func, relax.Function):
            functions[gvar] = _retarget_calls(func, renamed)
    return tvm.IRModule(functions, attrs=mod.attrs), [g.name_hint for g in renamed]


def _only_copies(block: SBlock, kernel: tvm.tirx.PrimFunc) -> bool:
    """Whether ``block`` copies a slice (every index its own, shifted by a constant) into a
    temporary of ``kernel`` (not into an output, which the caller reads); ``kernel`` is one
    :func:`kernel_blocks` read. A transpose or a gather also only copies, but its consumer
    would then read across rows in its inner loop, which costs time; a slice reads as
    before."""
    body = block.body
    if block.init is not None or not isinstance(body, tvm.tirx.BufferStore):
        return False
    load = body.value
    if not isinstance(load, _LOAD) or not any(
        body.buffer.same_as(temporary) for temporary in kernel.body.block.alloc_buffers
    ):
        return False
    stored, loaded = list(body.indices), list(load.indices)
    if len(stored) != len(loaded) or Analyzer is None:
        return False
    analyzer = Analyzer()
    return all(
        isinstance(analyzer.simplify(a - b), tvm.tirx.IntImm)
        for a, b in zip(loaded, stored, strict=True)
    )


def _retarget_calls(func: relax.Function, renamed) -> relax.Function:
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return func
    blocks = []
    for block in body.blocks:
        bindings = []
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and value.op in renamed:
                value = relax.Call(renamed[value.op], value.args, value.attrs, value.ty_args)
                binding = relax.VarBinding(binding.var, value)
            bindings.append(binding)
        blocks.append(relax.BindingBlock(bindings))
    return relax.Function(
        func.params,
        relax.SeqExpr(blocks, body.body),
        func.ret_ty,
        func.is_pure,
        func.attrs,
        func.span,
    )


def _first_write(nests: list[Nest] | GpuKernel, buffer) -> int:
    """The first nest (CPU) or launch (GPU) that writes ``buffer``."""
    if isinstance(nests, GpuKernel):
        return nests.first_write(buffer)
    return next((i for i, n in enumerate(nests) if n.stored(buffer)), len(nests))


def _last_access(nests: list[Nest] | GpuKernel, buffer) -> int:
    """The last nest (CPU) or launch (GPU) that reads or writes ``buffer``."""
    if isinstance(nests, GpuKernel):
        return nests.last_access(buffer)
    return max((i for i, n in enumerate(nests) if n.touches(buffer)), default=-1)


#: Why a GPU kernel cannot take an output at another place than its input's own address:
#: its pointers are all ``__restrict__`` (see :func:`find_rewrites`).
_GPU_SHIFT = (
    "on a GPU an output shares only its input's own address (one pointer); a kernel's "
    "pointers may not alias"
)


def find_rewrites(
    mod: tvm.IRModule, extraction: Extraction, *, share_pointers: bool = False,
    planned: Extraction | None = None,
) -> Rewrites:
    """In-place writes and concatenation slices for ``extraction``'s tensors.

    Every merge is checked pair by pair (:meth:`Rewrites.merge`): two tensors share bytes
    while both are live only where a kernel that takes both is proven, from its loads and
    stores, to be done with one before it writes the other, or where one is a slice of a
    concatenation the other is.

    Kernels scheduled for a GPU are proven on their scheduled loads and stores, thread by
    thread (:func:`planner.tvm.plan.kernel_accesses.gpu_store_over_source`). TVM declares every
    pointer of a CUDA kernel ``__restrict__`` whatever the kernel's ``noalias`` attribute
    says, so an output merged into its input is written through the input's own pointer
    (:attr:`Rewrites.shared`), which only an output at offset 0 of an input of its dtype
    allows; a concatenation is elided on a GPU only when its copy is dropped whole and no
    other call is handed a slice together with the concatenation. Every GPU in-place
    candidate not taken is listed in :attr:`Rewrites.skipped` with the reason.

    ``share_pointers`` makes CPU kernels write their in-place outputs through the input's
    pointer too (outputs at offset 0 of an input of their dtype).

    A result smaller than the input it is written over (:attr:`Rewrites.shrinking`) saves
    its own bytes where both met, but holds the input's size for the rest of its life: a
    kernel's int32 accumulator merged into the int8 output the next kernel reads keeps 64
    KiB alive where 16 KiB would do. Such merges are kept only where best-fit's plan of
    ``planned`` (the times a plan uses; ``extraction`` by default) is no larger with them.
    """
    rewrites = _found(mod, extraction, share_pointers, shrinking=True)
    if not rewrites.shrinking:
        return rewrites
    without = _found(mod, extraction, share_pointers, shrinking=False)
    timed = planned or extraction
    with_bytes, without_bytes = (
        library.solve(found.problem(timed), "best-fit").height for found in (rewrites, without)
    )
    if with_bytes <= without_bytes:
        return rewrites
    without.skipped.append({
        "rewrite": f"{rewrites.shrinking} in-place writes of a result smaller than its input",
        "reason": f"the input's bytes would stay held while the result lives: best-fit "
        f"planned {with_bytes:,} B with them, {without_bytes:,} B without",
    })
    return without


def _found(
    mod: tvm.IRModule, extraction: Extraction, share_pointers: bool, *, shrinking: bool
) -> Rewrites:
    rewrites, conflict = _find_rewrites(mod, extraction, True, share_pointers, shrinking)
    if conflict:
        rewrites, conflict = _find_rewrites(mod, extraction, False, share_pointers, shrinking)
        rewrites.skipped.append(
            {"rewrite": "concat elision on the GPU", "reason": conflict}
        )
    if conflict:  # in-place merges never alias two pointers of one call but at offset 0
        rewrites = Rewrites(skipped=[{"rewrite": "all", "reason": conflict}])
    return rewrites


def _find_rewrites(
    mod: tvm.IRModule, extraction: Extraction, gpu_concats: bool, share_pointers: bool,
    shrinking: bool = True,
) -> tuple[Rewrites, str]:
    func = mod[extraction.function]
    bindings = bindings_of(func)
    tensors = extraction.by_name()
    # Which variables refer to which planned tensor (plain re-bindings only).
    alias: dict[relax.Var, str] = {
        bindings[t.binding_index].var: t.name for t in extraction.tensors
    }
    first_use: dict[str, int] = {}
    calls: dict[int, tuple[tvm.tirx.PrimFunc, list[str | None], list[Nest] | GpuKernel]] = {}
    call_args: dict[int, list[str | None]] = {}
    for index, binding in enumerate(bindings):
        value = binding.value
        if isinstance(value, relax.Var) and value in alias:
            alias[binding.var] = alias[value]
            continue
        if not isinstance(value, relax.Call):
            continue
        args = [alias.get(a) if isinstance(a, relax.Var) else None for a in value.args]
        call_args[index] = args
        for name in args:
            if name is not None:
                first_use.setdefault(name, index)
        if not isinstance(value.op, relax.GlobalVar):
            continue
        kernel = mod[value.op]
        if not isinstance(kernel, tvm.tirx.PrimFunc) or len(kernel.params) != len(args):
            continue
        if is_gpu_kernel(kernel):
            calls[index] = (kernel, args, gpu_kernel(kernel))
            continue
        nests = kernel_nests(kernel)
        if nests:
            calls[index] = (kernel, args, nests)

    rewrites = Rewrites(spans={t.name: (t.lower, t.upper, t.size) for t in extraction.tensors})
    views: set[tuple[str, str, int]] = set()
    #: (call, source parameter, target parameter, shift) -> (proof or None, why not)
    proved: dict[tuple[int, int, int, int], tuple[str | None, str]] = {}

    def proof(call: int, i: int, j: int, shift: int) -> tuple[str | None, str]:
        key = (call, i, j, shift)
        if key not in proved:
            kernel, _, nests = calls[call]
            source, target = kernel.params[i], kernel.params[j]
            if not isinstance(nests, GpuKernel):
                proved[key] = (store_over_source_safe(kernel, source, target, shift, nests), "")
            elif shift:
                proved[key] = (None, _GPU_SHIFT)
            elif str(source.dtype) != str(target.dtype):
                proved[key] = (None, "on a GPU an output shares its input's pointer, so "
                               "both must have one dtype")
            else:
                proved[key] = gpu_store_over_source(nests, source, target, shift)
        return proved[key]

    def allowed(a: str, b: str, delta: int) -> bool:
        if (a, b, delta) in views or (b, a, -delta) in views:
            return True
        for source, target, shift in ((a, b, delta), (b, a, -delta)):
            # A hand-over inside one call: the source is done there and the target is new.
            call = tensors[source].upper - 1
            if first_use.get(target) != call or call not in calls or shift < 0:
                continue
            _, args, nests = calls[call]
            # A tensor passed twice is two parameters: the proof must hold for each.
            proofs = [proof(call, i, j, shift)[0]
                      for i, x in enumerate(args) if x == source
                      for j, y in enumerate(args) if y == target]
            if proofs and None not in proofs:
                if "trace" in proofs or isinstance(nests, GpuKernel):
                    rewrites.aliased_calls.add(call)
                return True
        return False

    rewrites.allowed = allowed
    for index, (kernel, args, nests) in calls.items():
        name = bindings[index].value.op.name_hint
        gpu = isinstance(nests, GpuKernel)
        slots = gpu_concat_slots(kernel) if gpu else concat_slots(kernel, nests)
        if slots is not None and gpu and not gpu_concats:
            rewrites.concat_copies_left += 1
            continue
        if slots is not None:
            output = args[slots.output]
            if output in tensors and first_use.get(output) == index:
                placed = []
                # On a GPU a copy that still runs would read and write one address
                # through two restrict pointers: all of its inputs are placed, or none.
                saved = (dict(rewrites.parent), {k: list(v) for k, v in rewrites.members.items()})
                # Each input and the output hold the same values in the input's slot;
                # vouched for before any is placed, as a slice may overlap the next one's
                # earlier group.
                vouched = {(output, args[param], at) for param, at in slots.inputs
                           if args[param] in tensors} - views
                views.update(vouched)
                reasons = []
                for param, at in slots.inputs:
                    input_name = args[param]
                    if input_name not in tensors or input_name in placed:
                        reasons.append(
                            {
                                "rewrite": f"concat {name}: {input_name or 'a non-tensor'}",
                                "reason": "not a planned intermediate, or passed twice",
                            }
                        )
                        continue
                    if rewrites.merge(input_name, output, at):
                        placed.append(input_name)
                    else:
                        reasons.append(
                            {
                                "rewrite": f"concat {name}: {input_name}",
                                "reason": (
                                    f"its slot at byte {at} is not {ARENA_ALIGNMENT}-byte aligned"
                                    if at % ARENA_ALIGNMENT
                                    else "its slot would overlap a live tensor"
                                ),
                            }
                        )
                if gpu and placed and len(placed) < len(slots.inputs):
                    rewrites.parent, rewrites.members = saved
                    views.difference_update(vouched)
                    reasons.append(
                        {
                            "rewrite": f"concat {name}: {', '.join(placed)}",
                            "reason": "on a GPU the copy would run with inputs in its output's "
                            "slots, through pointers that may not alias: all or none are placed",
                        }
                    )
                    placed = []
                rewrites.skipped.extend(reasons)
                if placed:
                    rewrites.concats.append((name, output, placed))
                if len(placed) == len(slots.inputs):
                    if slots.whole:
                        rewrites.dropped.add(index)
                    else:
                        rewrites.stripped[index] = slots.name
                    rewrites.concat_copies_removed += 1
                    rewrites.concat_bytes_saved += tensors[output].size
                else:
                    rewrites.concat_copies_left += 1
            else:
                rewrites.concat_copies_left += 1
                rewrites.skipped.append(
                    {
                        "rewrite": f"concat {name}",
                        "reason": "its output is not a fresh intermediate",
                    }
                )
            if slots.whole:
                continue

        # In-place: a tensor born for this call over an input that dies here; each input's
        # memory can be taken over once.
        overwritten: set[str] = set()
        # Follow the kernel's own order: each buffer it writes, in the order it writes
        # them, takes over the buffer that died most recently. That turns a chain such as
        # conv -> multiply -> add -> relu into one buffer instead of two.
        params = list(kernel.params)
        first_write = {j: _first_write(nests, params[j]) for j in range(len(args))}
        last_access = {i: _last_access(nests, params[i]) for i in range(len(args))}
        for j in sorted(range(len(args)), key=lambda j: first_write[j]):
            target = args[j]
            target_tensor = tensors.get(target) if target else None
            if target_tensor is None or first_use.get(target) != index:
                continue
            refused = []
            for i in sorted(range(len(args)), key=lambda i: -last_access[i]):
                source = args[i]
                source_tensor = tensors.get(source) if source else None
                if (
                    source_tensor is None
                    or i == j
                    or source in overwritten
                    or source_tensor.upper - 1 != index
                    # a smaller result may start where its input starts
                    or source_tensor.size < target_tensor.size
                    or (not shrinking and source_tensor.size > target_tensor.size)
                    or rewrites.find(source)[0] == rewrites.find(target)[0]
                ):
                    continue
                # the kernel must be done with the source by the time it writes
                if last_access[i] > first_write[j]:
                    refused.append((source, f"the kernel reads {source} in a later "
                                    f"{'launch' if gpu else 'loop nest'} than it first "
                                    f"writes {target}"))
                    continue
                if rewrites.merge(target, source, 0):
                    rewrites.inplace.append((name, source, target))
                    rewrites.shrinking += source_tensor.size > target_tensor.size
                    overwritten.add(source)
                    break
                found, reason = proof(index, i, j, 0)
                refused.append((source, reason if found is None else
                                "sharing its bytes would overlap a tensor no proof covers"))
            else:
                if gpu:
                    rewrites.skipped.extend(
                        {"rewrite": f"in-place {name}: {target} over {source}", "reason": why}
                        for source, why in refused
                    )
    noted: set[str] = set()
    for index, (kernel, _, nests) in calls.items():
        name = bindings[index].value.op.name_hint
        if not isinstance(nests, GpuKernel) or name in noted:
            continue
        root = kernel.body.block if isinstance(kernel.body, SBlockRealize) else None
        held = [b.name for b in (root.alloc_buffers if root else []) if b.scope() == "global"]
        if held:
            noted.add(name)
            rewrites.skipped.append(
                {
                    "rewrite": f"lift the temporaries of {name}: {', '.join(held)}",
                    "reason": "a GPU kernel's temporaries stay in its workspace, outside the "
                    "plan: its blocks run concurrently, not one after another as lifting "
                    "times them",
                }
            )
    conflict = _share_pointers(rewrites, calls, call_args, tensors, share_pointers)
    return rewrites, conflict


def _share_pointers(
    rewrites: Rewrites, calls: dict, call_args: dict[int, list], tensors: dict, cpu: bool
) -> str:
    """Fill :attr:`Rewrites.shared`: for every GPU call (every CPU call too with ``cpu``)
    handed tensors whose bytes overlap, the parameter whose pointer serves them all.

    Returns why the rewrites cannot stand ("" where they can): on a GPU, two arguments of
    one call overlapping anywhere but at one address, or handed to a call that is no
    kernel of the module.
    """
    gpu_module = any(isinstance(nests, GpuKernel) for _, _, nests in calls.values())
    for index, args in call_args.items():
        if index in rewrites.dropped:
            continue
        placed = []
        for position, name in enumerate(args):
            if name in tensors:
                root, at = rewrites.find(name)
                placed.append((position, name, root, at, tensors[name].size))
        pairs = [
            (a, b)
            for n, a in enumerate(placed)
            for b in placed[n + 1 :]
            if a[1] != b[1] and a[2] == b[2] and a[3] < b[3] + b[4] and b[3] < a[3] + a[4]
        ]
        if not pairs:
            continue
        call = calls.get(index)
        gpu = call is not None and isinstance(call[2], GpuKernel)
        if call is None:
            if gpu_module:
                names = ", ".join(f"{a[1]} and {b[1]}" for a, b in pairs)
                return f"a call that is no kernel of the module would be handed {names}"
            continue
        if not (gpu or (cpu and index not in rewrites.stripped)):
            continue
        params = list(call[0].params)
        # Parameters at one address share the pointer of the first of them.
        kept: dict[int, int] = {}
        for a, b in pairs:
            if a[3] != b[3] or str(params[a[0]].dtype) != str(params[b[0]].dtype):
                if gpu:
                    return (f"a GPU kernel would be handed {a[1]} and {b[1]} overlapping "
                            "at two addresses")
                continue
            low, high = sorted((_head(kept, a[0]), _head(kept, b[0])))
            if low != high:
                kept[high] = low
        shared = tuple(sorted((_head(kept, p), p) for p in kept if _head(kept, p) != p))
        if shared:
            rewrites.shared[index] = shared
            rewrites.aliased_calls.add(index)
    return ""


def _head(kept: dict[int, int], position: int) -> int:
    while kept.get(position, position) != position:
        position = kept[position]
    return position


def rewrite_kernels(mod: tvm.IRModule, function: str, rewrites: Rewrites) -> tvm.IRModule:
    """``mod`` with the kernel edits ``rewrites`` calls for, each call site on its own copy.

    A fused concatenation whose inputs already sit in their slices loses its copy nest
    (the rest of the kernel reads the slices where the producers wrote them), a kernel
    whose aliased buffers interleave inside one loop nest loses its ``noalias`` promise,
    and a kernel handed two tensors at one address reads and writes both through one
    pointer (:func:`share_pointer`).
    """
    edits = {
        i: (rewrites.stripped.get(i), i in rewrites.aliased_calls, rewrites.shared.get(i, ()))
        for i in {*rewrites.stripped, *rewrites.aliased_calls, *rewrites.shared}
        - rewrites.dropped
    }
    if not edits:
        return mod
    func = mod[function]
    bindings = bindings_of(func)
    builder = relax.BlockBuilder()
    variants: dict[tuple, relax.GlobalVar] = {}
    replaced: dict[int, relax.Call] = {}
    for index, (strip, unalias, shared) in edits.items():
        call = bindings[index].value
        key = (call.op.name_hint, strip, unalias, shared)
        if key not in variants:
            kernel = mod[call.op]
            if strip is not None:
                kernel = _without_nest(kernel, strip)
            for kept, dropped in shared:
                kernel = share_pointer(kernel, kept, dropped)
            if unalias:
                kernel = kernel.with_attr("tirx.noalias", False)
            suffix = (
                ("_sliced" if strip else "")
                + ("_aliased" if unalias and not shared else "")
                + ("_inplace" if shared else "")
            )
            variants[key] = builder.add_func(kernel, call.op.name_hint + suffix)
        replaced[index] = relax.Call(variants[key], call.args, call.attrs, call.ty_args)
    new_bindings = [
        relax.VarBinding(b.var, replaced[i]) if i in replaced else b for i, b in enumerate(bindings)
    ]
    functions = dict(mod.functions)
    added = builder.get()
    for gvar in variants.values():
        functions[gvar] = added[gvar]
    entry = next(gv for gv in functions if gv.name_hint == function)
    functions[entry] = relax.Function(
        func.params,
        relax.SeqExpr([relax.BindingBlock(new_bindings)], func.body.body),
        func.ret_ty,
        func.is_pure,
        func.attrs,
        func.span,
    )
    return tvm.IRModule(functions, attrs=mod.attrs)


def _without_nest(kernel: tvm.tirx.PrimFunc, block_name: str) -> tvm.tirx.PrimFunc:
    root = kernel.body.block
    stmts = list(root.body.seq) if isinstance(root.body, tvm.tirx.SeqStmt) else [root.body]
    kept = [
        s
        for s, n in zip(stmts, kernel_nests(kernel), strict=True)
        if n.block.name_hint != block_name
    ]
    body = kept[0] if len(kept) == 1 else tvm.tirx.SeqStmt(kept)
    block = SBlock(
        root.iter_vars,
        root.reads,
        root.writes,
        root.name_hint,
        body,
        root.init,
        root.alloc_buffers,
        root.match_buffers,
        root.annotations,
    )
    realize = SBlockRealize(kernel.body.iter_values, kernel.body.predicate, block)
    return tvm.tirx.PrimFunc(kernel.params, realize, kernel.ret_type, kernel.attrs)


def share_pointer(kernel: tvm.tirx.PrimFunc, kept: int, dropped: int) -> tvm.tirx.PrimFunc:
    """``kernel`` reading and writing its parameter ``dropped`` through parameter
    ``kept``'s pointer, for a call that hands it both at one address.

    The two must have one dtype; where their shapes differ, an element's place is carried
    over by its row-major offset. The dropped parameter stays in the signature, unused, so
    call sites do not change; the kernel then holds one pointer where there were two
    aliasing ones (a GPU kernel's pointers are all ``__restrict__``, whatever ``noalias``
    says), and TVM's own passes see the in-place update as what it is.
    """
    params = list(kernel.params)
    keep, drop = params[kept], params[dropped]
    if str(keep.dtype) != str(drop.dtype):
        raise ValueError(f"{drop.name} and {keep.name} differ in dtype")
    same_shape = len(keep.shape) == len(drop.shape) and all(
        tvm_ffi.structural_equal(a, b) for a, b in zip(keep.shape, drop.shape, strict=True)
    )

    def indices(values):
        if same_shape:
            return list(values)
        flat = None
        for index, extent in zip(values, drop.shape, strict=True):
            flat = index if flat is None else flat * extent + index
        out = []
        for extent in reversed(list(keep.shape)[1:]):
            out.append(tvm.tirx.floormod(flat, extent))
            flat = tvm.tirx.floordiv(flat, extent)
        return [flat, *reversed(out)]

    def store(node):
        if node.buffer.same_as(drop):
            return tvm.tirx.BufferStore(keep, node.value, indices(node.indices))
        return node

    def load(node):
        if load_buffer(node).same_as(drop):
            return tvm.tirx.BufferLoad(keep, indices(node.indices))
        return node

    def region(node):
        if region_buffer(node).same_as(drop):
            ranges = list(node.region) if same_shape else [tvm.ir.Range(0, d) for d in keep.shape]
            return tvm.tirx.BufferRegion(keep, ranges)
        return node

    body = tvm_ffi.structural_map(
        kernel.body,
        [
            (tvm.tirx.BufferStore, store),
            (_LOAD, load),
            (_REGION, region),
        ],
    )
    return kernel.with_body(body)
