"""In-place and concat-elision rewrites: tensors that may share memory by construction.

Both rewrites merge tensors into groups whose members sit at fixed offsets relative to the
group; the planner then places groups instead of tensors.

- **In-place**: a kernel may write an output (or one of its lifted temporaries) over an
  input that dies at that call. Safe when, inside the kernel, every read of the input comes
  before the first write of the output, or happens in that same block at exactly the
  element it writes (elementwise). This is checked on the kernel's TIR for every kernel,
  not a list of operators; reductions, pooling windows, transposes and anything else that
  reads other elements are left alone.
- **Concat elision**: an unfused ``concatenate`` kernel whose output splits into contiguous
  slices (every dimension before the axis has extent 1, e.g. NCHW with batch 1 along
  channels) gets its inputs placed in their slices, so producers write straight into the
  output. When every input is placed, the copy kernel is dropped. Concats fused with other
  operators, slices that would not be 64-byte aligned, and inputs still used after the
  concat are not elided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import relax, s_tir
from tvm.s_tir.stmt import SBlock

from planner.problem import Buffer, Problem
from planner.tvm.extract import ARENA_ALIGNMENT, Extraction, bindings_of
from planner.tvm.kernel_temps import kernel_blocks


@dataclass
class Rewrites:
    #: member -> (root, offset of the member inside the root's group)
    parent: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: binding indices of calls that no longer need to run (elided concat copies)
    dropped: set[int] = field(default_factory=set)
    inplace: list[tuple[str, str, str]] = field(default_factory=list)
    concats: list[tuple[str, str, list[str]]] = field(default_factory=list)

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
                min(lower, tensor.lower), max(upper, tensor.upper), max(size, rel + tensor.size)
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

    def merge(self, member: str, into: str, at: int) -> bool:
        """Put ``member``'s group at offset ``at`` of ``into``'s group, if consistent."""
        member_root, member_rel = self.find(member)
        into_root, into_rel = self.find(into)
        rel = into_rel + at - member_rel
        if member_root == into_root or rel < 0 or rel % ARENA_ALIGNMENT:
            return False
        self.parent[member_root] = (into_root, rel)
        return True


def _blocks(kernel: tvm.tirx.PrimFunc) -> list[SBlock] | None:
    return kernel_blocks(kernel)


def _regions(regions, buffer) -> list:
    return [r for r in regions if r.source.same_as(buffer)]


def _same_element(read, write, block: SBlock) -> bool:
    """Both regions name one element, the same one, indexed by the block's own iterators."""
    if len(read.region) != len(write.region):
        return False
    iter_vars = [iv.var for iv in block.iter_vars]
    for r, w in zip(read.region, write.region, strict=True):
        if not (isinstance(r.extent, tvm.tirx.IntImm) and int(r.extent) == 1):
            return False
        if not (isinstance(w.extent, tvm.tirx.IntImm) and int(w.extent) == 1):
            return False
        if not tvm_ffi.structural_equal(r.min, w.min):
            return False
        if not any(w.min.same_as(v) for v in iter_vars):
            return False
    return True


def inplace_safe(kernel: tvm.tirx.PrimFunc, source, target) -> bool:
    """May ``target`` be written over ``source`` inside ``kernel``?"""
    blocks = _blocks(kernel)
    if not blocks:
        return False
    reads = [i for i, b in enumerate(blocks) if _regions(b.reads, source)]
    writes = [i for i, b in enumerate(blocks) if _regions(b.writes, target)]
    source_writes = [i for i, b in enumerate(blocks) if _regions(b.writes, source)]
    # The source may be produced inside the kernel (a temporary), but only before the
    # target's first write.
    if not writes or (source_writes and max(source_writes) >= min(writes)):
        return False
    if not reads or max(reads) < min(writes):
        return True
    k = min(writes)
    if max(reads) != k:
        return False
    block = blocks[k]
    if block.init is not None:
        return False
    (write,) = _regions(block.writes, target) or [None]
    if write is None:
        return False
    return all(_same_element(read, write, block) for read in _regions(block.reads, source))


def _concat_layout(kernel: tvm.tirx.PrimFunc) -> list[int] | None:
    """Byte offsets of each input inside the output of a plain concatenate kernel."""
    blocks = _blocks(kernel)
    if not blocks or len(blocks) != 1 or not blocks[0].name_hint.startswith("T_concat"):
        return None
    *inputs, output = kernel.params
    out_shape = [int(d) for d in output.shape]
    shapes = [[int(d) for d in p.shape] for p in inputs]
    if any(len(s) != len(out_shape) for s in shapes):
        return None
    axes = [a for a in range(len(out_shape)) if any(s[a] != out_shape[a] for s in shapes)]
    axis = axes[0] if axes else 0
    if len(axes) > 1 or sum(s[axis] for s in shapes) != out_shape[axis]:
        return None
    if any(d != 1 for d in out_shape[:axis]):
        return None  # the slices would interleave, not sit one after another
    itemsize = (tvm.DataType(str(output.dtype)).bits + 7) // 8
    offsets, at = [], 0
    for shape in shapes:
        offsets.append(at)
        count = 1
        for d in shape:
            count *= d
        at += count * itemsize
    return offsets


def inline_pool_padding(mod: tvm.IRModule) -> tuple[tvm.IRModule, list[str]]:
    """Compute the padding of pooling kernels inside the pooling loop instead of a buffer.

    A legalised max/avg pool first copies its whole input into a padded temporary, which
    for a ResNet stem is larger than the pooled tensor itself and sits at the model's peak.
    Reading the input with a bounds check instead costs a compare per window element in a
    kernel that is cheap to begin with; convolutions keep their padded buffer (their inner
    loop is where the time goes).
    """
    functions = dict(mod.functions)
    builder = relax.BlockBuilder()
    renamed: dict[relax.GlobalVar, relax.GlobalVar] = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tvm.tirx.PrimFunc) or "pool" not in gvar.name_hint:
            continue
        blocks = kernel_blocks(func) or []
        if not any(b.name_hint == "pad_temp" for b in blocks):
            continue
        schedule = s_tir.Schedule(func)
        try:
            schedule.compute_inline(schedule.get_sblock("pad_temp"))
        except s_tir.ScheduleError:
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
        func.params, relax.SeqExpr(blocks, body.body), func.ret_ty, func.is_pure, func.attrs,
        func.span,
    )


def _first(blocks: list[SBlock], buffer, *, writes: bool) -> int:
    for index, block in enumerate(blocks):
        if _regions(block.writes if writes else [*block.reads, *block.writes], buffer):
            return index
    return len(blocks)


def _last(blocks: list[SBlock], buffer) -> int:
    for index in range(len(blocks) - 1, -1, -1):
        if _regions([*blocks[index].reads, *blocks[index].writes], buffer):
            return index
    return -1


def find_rewrites(mod: tvm.IRModule, extraction: Extraction) -> Rewrites:
    func = mod[extraction.function]
    bindings = bindings_of(func)
    by_var = {}
    tensors = extraction.by_name()
    for tensor in extraction.tensors:
        by_var[bindings[tensor.binding_index].var] = tensor
    # Which variables refer to which planned tensor (plain re-bindings only).
    alias: dict[relax.Var, str] = {
        bindings[t.binding_index].var: t.name for t in extraction.tensors
    }
    first_use: dict[str, int] = {}
    rewrites = Rewrites()
    for index, binding in enumerate(bindings):
        value = binding.value
        if isinstance(value, relax.Var) and value in alias:
            alias[binding.var] = alias[value]
            continue
        if not isinstance(value, relax.Call):
            continue
        args = [alias.get(a) if isinstance(a, relax.Var) else None for a in value.args]
        for name in args:
            if name is not None:
                first_use.setdefault(name, index)
        if not isinstance(value.op, relax.GlobalVar):
            continue
        kernel = mod[value.op]
        if not isinstance(kernel, tvm.tirx.PrimFunc) or len(kernel.params) != len(args):
            continue
        name = value.op.name_hint

        layout = _concat_layout(kernel)
        if layout is not None and args[-1] is not None:
            output = args[-1]
            placed = []
            for input_name, at in zip(args[:-1], layout, strict=True):
                tensor = tensors.get(input_name) if input_name else None
                if (tensor is None or tensor.upper - 1 != index or input_name in placed
                        or not rewrites.merge(input_name, output, at)):
                    continue
                placed.append(input_name)
            if placed:
                rewrites.concats.append((name, output, placed))
            if len(placed) == len(args) - 1:
                rewrites.dropped.add(index)
            continue

        # In-place: a tensor born for this call over an input that dies here; each input's
        # memory can be taken over once.
        overwritten: set[str] = set()
        # Follow the kernel's own order: each buffer it writes, in the order it writes
        # them, takes over the buffer that died most recently. That turns a chain such as
        # conv -> multiply -> add -> relu into one buffer instead of two.
        blocks = kernel_blocks(kernel) or []
        first_write = {j: _first(blocks, kernel.params[j], writes=True)
                       for j in range(len(args))}
        last_access = {i: _last(blocks, kernel.params[i]) for i in range(len(args))}
        for j in sorted(range(len(args)), key=lambda j: first_write[j]):
            target = args[j]
            target_tensor = tensors.get(target) if target else None
            if target_tensor is None or first_use.get(target) != index:
                continue
            for i in sorted(range(len(args)), key=lambda i: -last_access[i]):
                source = args[i]
                source_tensor = tensors.get(source) if source else None
                if (source_tensor is None or i == j or source in overwritten
                        or source_tensor.upper - 1 != index
                        or source_tensor.size != target_tensor.size
                        or source_tensor.dtype != target_tensor.dtype
                        or rewrites.find(source)[0] == rewrites.find(target)[0]):
                    continue
                if inplace_safe(kernel, kernel.params[i], kernel.params[j]) and \
                        rewrites.merge(target, source, 0):
                    rewrites.inplace.append((name, source, target))
                    overwritten.add(source)
                    break
    return rewrites
