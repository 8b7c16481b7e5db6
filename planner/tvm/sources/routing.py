"""Mixtures of experts found by what they compute, however their experts are stored.

A block routes tokens when its forward takes a top-k over a last axis of ``E`` scores and then
reads routing data to pick tokens (``nonzero``, ``where(mask)``, ``.tolist()``, a tensor used
as an index; :func:`reads_data`). Its experts may be a
``ModuleList`` (:mod:`planner.tvm.sources.experts` handles those), stacked weight tensors
indexed by expert, a grouped matmul over sorted tokens: the rule here does not look at them.

Such a block is run in its own code with every token routed to every expert: its top-k
returns all ``E`` experts of each token (in expert order), the top-k scores where the router
chose the expert and a fill elsewhere (0, or -inf where a softmax follows), so each expert's
weight for a token is the router's or zero. The dispatch then reads only routing data that no
input reaches (every token of every expert), and :class:`_Constants` answers those reads
from the values they have, as Python values or constant tensors, during the export too: the
block exports with fixed shapes and computes what it computed. Code that reads the top-k
count itself (``sorted // top_k``) is run with that count raised to ``E``. Every variant is
checked against the block's own output on the example before it is used.
"""

from __future__ import annotations

import math
import types
from contextlib import contextmanager
from dataclasses import dataclass

#: Fills for the experts a token's router did not choose, tried in this order.
FILLS = (0.0, -math.inf)

#: A traced value whose real value is not known.
_UNKNOWN = object()


class ExpertsError(ValueError):
    """A block looks like a mixture of experts but its fixed-shape form is not the block."""


def reads_data(func, args) -> bool:
    """Whether calling ``func`` on ``args`` starts a dispatch: an operation whose result's
    size or Python value comes from a tensor's data (``where(mask)``, ``nonzero``,
    ``.tolist()``, a tensor used as a bool or an index), or the one-hot expert mask. A router
    computes in fixed shapes up to there."""
    import torch

    if func is torch.where and len(args) == 1:
        return True
    if not _DATA_READS:
        _DATA_READS.update(data_reads())
    return func in _DATA_READS


def data_reads() -> set:
    """The functions :func:`reads_data` takes for reads of a tensor's data."""
    import torch

    Tensor = torch.Tensor
    return {
        torch.nonzero, Tensor.nonzero, torch.argwhere, Tensor.argwhere, Tensor.tolist,
        Tensor.item, torch.unique, Tensor.unique, torch.bincount, Tensor.bincount,
        Tensor.__bool__, Tensor.__index__, Tensor.__int__, Tensor.__iter__,
        torch.masked_select, Tensor.masked_select,
        # The expert mask a dispatch loops over: fixed in shape, but torch.export checks its
        # classes with runtime asserts that would outlive the rest of the dispatch.
        torch.nn.functional.one_hot,
    }


_DATA_READS: set = set()


def _reads_routing(func, args) -> bool:
    """:func:`reads_data`, or a count of each expert's tokens (``histc``), which a dispatch
    over experts reads besides."""
    import torch

    return reads_data(func, args) or func in (torch.histc, torch.Tensor.histc)


@dataclass(frozen=True)
class Routed:
    """A block found routing: its top-k over ``experts`` scores keeps ``top_k``."""

    name: str
    module: object
    experts: int
    top_k: int


class _Calls:
    """The stack of module calls, each ``(name, call number)``, as the forward runs."""

    def __init__(self, model):
        self.names = {id(module): name for name, module in model.named_modules()}
        self.stack: list[tuple[str, int]] = []
        self.count = 0

    def enter(self, module, args):
        self.count += 1
        self.stack.append((self.names.get(id(module), "?"), self.count))

    def leave(self, module, args, output):
        if self.stack:
            self.stack.pop()


def _is_topk(func) -> bool:
    import torch

    return func is torch.topk or func is torch.Tensor.topk


def _topk_call(args, kwargs) -> tuple[int, int] | None:
    """``(E, k)`` of a top-k over the last axis of a tensor with ``E`` entries, else None."""
    x = args[0]
    k = args[1] if len(args) > 1 else kwargs.get("k")
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    if not isinstance(k, int) or dim not in (-1, x.dim() - 1) or x.dim() < 2:
        return None
    size = x.shape[-1]
    if not isinstance(size, int) or not 0 < k < size:
        return None
    return size, k


def find_routed(model, example_inputs, skip: tuple = ()) -> list[list[Routed]]:
    """The blocks of ``model`` that take a top-k and then read routing data inside the same
    call, in one eager run on ``example_inputs``: for each, the innermost call that holds
    both and the calls around it, innermost first (the router alone may hold both, and
    only the block around it computes what the experts give); none under or around ``skip``
    (blocks handled otherwise)."""
    import torch
    from torch.overrides import TorchFunctionMode

    calls = _Calls(model)
    events: list[tuple[str, tuple, tuple | None]] = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _is_topk(func):
                found = _topk_call(args, kwargs)
                if found:
                    events.append(("topk", tuple(calls.stack), found))
            elif _reads_routing(func, args) or _sliced_by_tensor(args):
                events.append(("read", tuple(calls.stack), None))
            return func(*args, **kwargs)

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(calls.enter),
        torch.nn.modules.module.register_module_forward_hook(calls.leave),
    ]
    try:
        with torch.no_grad(), Record():
            model(*example_inputs)
    except Exception:  # noqa: BLE001 - a model that does not run here: export says why
        return []
    finally:
        for handle in handles:
            handle.remove()
    modules = dict(model.named_modules())
    found: dict[str, list[Routed]] = {}
    for at, (kind, stack, sizes) in enumerate(events):
        if kind != "topk":
            continue
        read = next((e for e in events[at + 1:] if e[0] == "read"), None)
        if read is None:
            continue
        common = []
        for mine, theirs in zip(stack, read[1], strict=False):
            if mine != theirs:
                break
            common.append(mine[0])
        # A router, its block and the layer around: further out is no longer one block.
        chain = [name for name in reversed(common) if name in modules][:3]
        if not chain or chain[0] in found or any(_nested(chain[0], s) for s in skip):
            continue
        found[chain[0]] = [Routed(name, modules[name], *sizes) for name in chain]
    return list(found.values())


def _sliced_by_tensor(args) -> bool:
    """Whether ``args`` hold a slice with a tensor bound (``x[start:end]``: its size read
    from the data, where torch reads the bound without a call of its own)."""
    import torch

    keys = args[1] if len(args) > 1 else None
    keys = keys if isinstance(keys, tuple) else (keys,)
    return any(isinstance(key, slice) and any(isinstance(b, torch.Tensor)
                                              for b in (key.start, key.stop, key.step))
               for key in keys)


def _nested(name: str, other: str) -> bool:
    """Whether module ``name`` is ``other``, inside it or around it (``""``, the model
    itself, is around every module)."""

    def within(inner: str, outer: str) -> bool:
        return outer in ("", inner) or inner.startswith(outer + ".")

    return within(name, other) or within(other, name)


class _Constants:
    """Values no input reaches, known while the export traces: a tensor made from constants
    alone has its real value here, so a data read of it (``nonzero``, ``.tolist()``, an
    index) answers with that value instead of a size torch cannot know."""

    def __init__(self):
        from torch.utils.weak import WeakIdKeyDictionary

        self.values = WeakIdKeyDictionary()

    def value(self, x):
        """``x``'s real value, ``x`` itself where it is not traced, ``_UNKNOWN`` where
        neither."""
        import torch
        from torch._subclasses.fake_tensor import is_fake

        if not isinstance(x, torch.Tensor) or not is_fake(x):
            return x
        return self.values.get(x, _UNKNOWN)

    def record(self, outputs, values) -> None:
        import torch
        from torch._subclasses.fake_tensor import is_fake

        for traced, value in zip(outputs, values, strict=False):
            if isinstance(traced, torch.Tensor) and is_fake(traced) \
                    and isinstance(value, torch.Tensor):
                self.values[traced] = value


def _slice_of_values(arg, constants: _Constants):
    """``arg``, or a slice whose bounds are tensors (``x[start:end]``) with each bound
    held as its value where it is known."""
    if not isinstance(arg, slice):
        return arg
    bounds = (arg.start, arg.stop, arg.step)
    return slice(*(b if constants.value(b) is _UNKNOWN else constants.value(b) for b in bounds))


def _dense_mode(routed: Routed, fill: float):
    """The mode that routes every token to every expert of ``routed`` (see the module
    docstring) and answers data reads of constants."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_flatten, tree_unflatten

    constants = _Constants()

    class Dense(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _is_topk(func) and args[0].dim() >= 2 and args[0].shape[-1] == routed.experts:
                return self.every_expert(args[0])
            flat, spec = tree_flatten((args, kwargs))
            values = [constants.value(a) for a in flat]
            known = all(v is not _UNKNOWN and not isinstance(v, torch.SymInt) for v in values)
            if known:
                real_args, real_kwargs = tree_unflatten(values, spec)
                if _reads_routing(func, args):
                    with _disable_current_modes():
                        return func(*real_args, **real_kwargs)
                out = func(*args, **kwargs)
                outputs = tree_flatten(out)[0]
                if any(constants.value(o) is _UNKNOWN for o in outputs):
                    with _disable_current_modes():
                        real = func(*real_args, **real_kwargs)
                    constants.record(outputs, tree_flatten(real)[0])
                return out
            # A constant read as an argument of a traced operation (an expert's index into
            # stacked weights) is passed as its value: a fixed index, not a size from data.
            # Never the tensor an in-place operation writes: that one is traced from here on.
            name = getattr(func, "__name__", "")
            in_place = name == "__setitem__" or (name.endswith("_") and not name.endswith("__"))
            swapped = [
                value if value is not _UNKNOWN and isinstance(arg, torch.Tensor)
                and not (in_place and at == 0) else _slice_of_values(arg, constants)
                for at, (arg, value) in enumerate(zip(flat, values, strict=True))
            ]
            swapped_args, swapped_kwargs = tree_unflatten(swapped, spec)
            out = func(*swapped_args, **swapped_kwargs)
            if in_place and isinstance(args[0], torch.Tensor):
                constants.values.pop(args[0], None)
            return out

        def every_expert(self, scores):
            shape = tuple(scores.shape)
            if not all(isinstance(size, int) for size in shape):
                raise ExpertsError(
                    f"the mixture of experts {type(routed.module).__name__} at {routed.name} "
                    f"routes tokens by reading its routing, and its token count is symbolic "
                    f"({shape[0]}): compile it at fixed lengths, point by point"
                )
            values, chosen = torch.topk(scores, routed.top_k, dim=-1)
            dense = torch.full_like(scores, fill).scatter(-1, chosen, values)
            with _disable_current_modes():
                every = torch.arange(routed.experts).expand(shape).contiguous()
            return torch.return_types.topk((dense, every))

    return Dense()


def _count_holders(routed: Routed) -> list[tuple[object, str]]:
    """Where the block keeps its top-k count: integer attributes named for it (``top_k``,
    ``moe_topk``, ``num_experts_per_tok``) equal to it, on the block, its modules and their
    configurations."""
    import re

    named = re.compile(r"top_?k|per_tok", re.IGNORECASE)
    holders, seen = [], set()
    for module in routed.module.modules():
        for owner in (module, getattr(module, "config", None)):
            if owner is None or id(owner) in seen:
                continue
            seen.add(id(owner))
            for name, value in list(vars(owner).items()):
                if named.search(name) and type(value) is int and value == routed.top_k:
                    holders.append((owner, name))
    return holders


@contextmanager
def _raised(holders, count: int):
    before = [(owner, name, getattr(owner, name)) for owner, name in holders]
    try:
        for owner, name in holders:
            setattr(owner, name, count)
        yield
    finally:
        for owner, name, value in before:
            setattr(owner, name, value)


def dense_forward(routed: Routed, fill: float, holders: list):
    """``routed``'s own forward with every token routed to every expert, the top-k count
    raised to the number of experts where ``holders`` (:func:`_count_holders`) keep it."""

    def forward(self, *args, **kwargs):
        with _raised(holders, routed.experts), _dense_mode(routed, fill):
            return type(self).forward(self, *args, **kwargs)

    return forward


def replacement(routed: Routed, call, difference, tolerance: float):
    """``(method, gap, failure)``: the bound forward that computes ``routed`` with every
    expert on every token, the first variant (fill, top-k count raised or not) within
    ``tolerance`` of the block on ``call``; ``None``, the smallest difference and the first
    error the block's code raised where none is."""
    import torch

    holders = _count_holders(routed)
    variants = [(fill, []) for fill in FILLS] + [(fill, holders) for fill in FILLS if holders]
    if call is None:  # the block did not run on the example: nothing to check it against
        return types.MethodType(dense_forward(routed, *variants[0]), routed.module), 0.0, None
    args, kwargs, want = call
    best, failure = float("inf"), None
    for fill, raised in variants:
        method = types.MethodType(dense_forward(routed, fill, raised), routed.module)
        try:
            with torch.no_grad():
                got = method(*args, **kwargs)
        except Exception as exc:  # a variant the block's code cannot run (an index past the end)
            failure = failure or f"{type(exc).__name__}: {exc}"
            continue
        gap = difference(got, want)
        if gap <= tolerance:
            return method, gap, None
        best = min(best, gap)
    return None, best, failure
