"""Mixture-of-experts blocks in the fixed-shape forms a deployment compiles.

transformers computes a mixture of experts by looping over the experts the router hit and
gathering each one's tokens (``for expert_idx in expert_hit: torch.where(...)``): shapes
that depend on the data, which ``torch.export`` refuses. A compiled deployment routes with
fixed shapes instead, in one of two forms (:data:`FORMS`, picked per model source):

- **dense**: every expert runs on every token, weighted by the router's top-k weight for
  that token and by zero elsewhere;
- **grouped**: each token's top-k rows sorted by expert, each row through its own expert's
  weights, back in order and summed (:mod:`planner.tvm.sources.grouped`), which is what a
  grouped-GEMM deployment holds.

The router is the block's own (its code run up to its dispatch, or a top-k over a softmax or
a sigmoid, with or without renormalising, whichever gives the block's own output; or the
family's router module). The outputs are the block's to rounding; :data:`ASSUMPTION` says
in every Result of such a model what its plan holds.

Blocks are found by what they hold and compute rather than by their class:

- a ``moe(hidden_states, topk_indices, topk_weights)`` method beside a ``ModuleList`` of
  experts (DeepSeek-V2 and V3, dots1, GLM-4 MoE, LongCat): only that method is replaced;
- any other block with a ``ModuleList`` of experts (Mixtral, Qwen-MoE, OLMoE, Jamba,
  PhiMoE, ...), with an optional shared expert: the forward is replaced;
- any block that takes a top-k and then reads routing data, however its experts are held
  (stacked weights: GPT-OSS, DBRX, GraniteMoE, Aria): :mod:`planner.tvm.sources.routing`
  runs its own code with every token routed to every expert (dense form only).

Each replaced block is run on the input the model gave it, in PyTorch, before the export;
a block whose fixed-shape form differs from it is refused with its name, so a family that
routes otherwise fails in one line instead of planning a different model. A block whose own
forward exports on that input with no size read from the data (a user wrote it in fixed
shapes) is never replaced.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from planner.job_spec import MOE_FORMS
from planner.tvm.sources.routing import ExpertsError, find_routed, reads_data, replacement

#: How a mixture of experts is computed: ``dense`` (every expert on every token) or
#: ``grouped`` (each token's top-k rows through their experts, :mod:`.grouped`).
FORMS = MOE_FORMS
FORM: ContextVar[str] = ContextVar("moe_form", default="dense")

#: Said in the Results of a model with converted blocks: what the plan assumes of routing,
#: by form (:data:`FORM`).
ASSUMPTION = {
    "dense": (
        "mixture of experts in fixed shapes, dense form: {blocks} (of {kinds}; {experts} "
        "experts, top-{top_k}) computed as every expert on every token, weighted by the "
        "router's top-{top_k} weights and zero elsewhere; the plan holds each expert's "
        "activations for every token, as many experts at once as TVM's schedule keeps live "
        "(it may fuse one expert's last matmul into the sum while the next runs); a "
        "grouped-GEMM deployment holds top-{top_k} rows per token instead (the grouped form)"
    ),
    "grouped": (
        "mixture of experts in fixed shapes, grouped form: {blocks} (of {kinds}; {experts} "
        "experts, top-{top_k}) computed as a grouped-GEMM deployment runs it: each token's "
        "top-{top_k} rows sorted by expert, each row through its own expert's weights (one "
        "grouped matmul per layer), put back in token order and summed, weighted; the plan "
        "holds tokens x top-{top_k} rows per buffer, whichever experts they go to"
    ),
}

#: How far a converted block may be from the original, relative to its largest output.
TOLERANCE = 1e-4


@dataclass(frozen=True)
class _Block:
    name: str
    module: object
    attribute: str  # "moe" or "forward": what is replaced
    normalise: bool | None  # None: the block does not say (tried both, against its output)


def _experts(module) -> list | None:
    import torch

    experts = getattr(module, "experts", None)
    if isinstance(experts, torch.nn.ModuleList) and len(experts) > 1:
        return list(experts)
    return None


def _router(module):
    import torch

    for name in ("gate", "router"):
        router = getattr(module, name, None)
        if isinstance(router, torch.nn.Linear):
            return router
    return None


def _top_k(module) -> int | None:
    for name in ("top_k", "num_experts_per_tok"):
        value = getattr(module, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _shared(module):
    for name in ("shared_expert", "shared_experts", "shared_mlp"):
        shared = getattr(module, name, None)
        if shared is not None:
            return shared, getattr(module, "shared_expert_gate", None)
    return None, None


def find_blocks(model) -> list[_Block]:
    """The mixture-of-experts blocks of ``model`` this module can convert."""
    blocks = []
    for name, module in model.named_modules():
        experts = _experts(module)
        if experts is None:
            continue
        if callable(getattr(type(module), "moe", None)):
            blocks.append(_Block(name, module, "moe", None))
        else:
            # Any router: its own code gives the weights (see _own_router_forward); a linear
            # one with a top-k is also tried as a softmax or sigmoid.
            normalise = getattr(module, "norm_topk_prob", None)
            blocks.append(_Block(name, module, "forward", normalise))
    return blocks


class _Dispatch(Exception):
    """Raised where a block's forward first reads routing data to pick tokens."""


def _stop_at_dispatch():
    from torch.overrides import TorchFunctionMode

    class StopAtDispatch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if reads_data(func, args):
                raise _Dispatch()
            return func(*args, **(kwargs or {}))

    return StopAtDispatch()


def _routing(block_module, hidden_states, args, kwargs):
    """``(weights, indices, logits)`` as the block's own forward computes them, read from
    its frames where the dispatch begins: ``indices`` an integer ``[tokens, k]`` tensor of
    expert numbers, ``weights`` a float tensor of the same shape (or ``[tokens, experts]``,
    dense scores), ``logits`` a float ``[tokens, experts]`` tensor or None. None where the
    forward reaches no dispatch or holds no such pair."""
    import torch

    experts = len(_experts(block_module))
    tokens = hidden_states.reshape(-1, hidden_states.shape[-1]).shape[0]
    try:
        with _stop_at_dispatch():
            type(block_module).forward(block_module, hidden_states, *args, **kwargs)
        return None
    except _Dispatch as stop:
        trace = stop.__traceback__
    frames = []
    while trace is not None:
        frames.append(trace.tb_frame)
        trace = trace.tb_next
    for frame in frames:
        values = [v for v in frame.f_locals.items() if isinstance(v[1], torch.Tensor)]
        rows = [(n, v) for n, v in values if v.dim() == 2 and v.shape[0] == tokens]
        chosen = [v for n, v in rows if not v.is_floating_point() and v.dtype != torch.bool
                  and v.shape[1] < experts]
        if len(chosen) != 1:
            continue
        indices = chosen[0]
        same = [v for n, v in rows if v.is_floating_point() and v.shape == indices.shape]
        dense = [(n, v) for n, v in rows if v.is_floating_point() and v.shape[1] == experts]
        logits = next((v for n, v in dense if "logit" in n), dense[0][1] if dense else None)
        if len(same) == 1:
            return same[0], indices, logits
        scores = [v for n, v in dense if "logit" not in n]
        if len(scores) == 1:  # dense scores: each token's chosen experts' entries
            return torch.gather(scores[0], 1, indices), indices, logits
    return None


def _own_router_forward(returns_logits: bool):
    """The block's forward with its own router (whatever it computes, up to the dispatch)
    and every expert on every token, weighted as that router weighted the token."""

    def forward(self, hidden_states, *args, **kwargs):
        found = _routing(self, hidden_states, args, kwargs)
        if found is None:
            raise ExpertsError("no routing found before the dispatch")
        weights, indices, logits = found
        shape = hidden_states.shape
        flat = hidden_states.reshape(-1, shape[-1])
        out = _every_expert(self, flat, indices, weights).reshape(shape)
        return (out, logits) if returns_logits else out

    return forward


def _every_expert(block, flat, indices, weights):
    """``block``'s experts on every row of ``flat``, weighted by the routing, plus its shared
    expert (gated where it has a gate) as the block adds it."""
    import torch

    out = _experts_applied(block.experts, flat, indices, weights.to(flat.dtype))
    shared, gate = _shared(block)
    if shared is not None:
        common = shared(flat)
        if gate is not None:
            common = torch.sigmoid(gate(flat)) * common
        out = out + common
    return out


def _weighted_sum(experts, hidden, indices, weights):
    """Every expert on every row of ``hidden``, weighted by its share of the row's top-k."""
    out = None
    for number, expert in enumerate(experts):
        share = (weights * (indices == number).to(weights.dtype)).sum(dim=-1, keepdim=True)
        term = expert(hidden) * share
        out = term if out is None else out + term
    return out


def _experts_applied(experts, hidden, indices, weights):
    """The routed experts' sum in the form in force (:data:`FORM`)."""
    if FORM.get() == "grouped":
        from planner.tvm.sources.grouped import GroupedError, grouped_sum

        try:
            return grouped_sum(list(experts), hidden, indices, weights)
        except GroupedError as exc:
            raise ExpertsError(f"the grouped form does not apply: {exc}") from exc
    return _weighted_sum(experts, hidden, indices, weights)


def _fixed_moe(self, hidden_states, topk_indices, topk_weights):
    routed = _experts_applied(self.experts, hidden_states, topk_indices, topk_weights)
    return routed.to(hidden_states.dtype)


#: The scores a router takes its top-k over, tried in this order against the block's output.
SCORES = ("softmax", "sigmoid")


def _fixed_forward(normalise: bool, returns_logits: bool, score: str = "softmax"):
    def forward(self, hidden_states, *args, **kwargs):
        import torch

        shape = hidden_states.shape
        flat = hidden_states.reshape(-1, shape[-1])
        logits = _router(self)(flat)
        if score == "sigmoid":
            weights = torch.sigmoid(logits.float())
        else:
            weights = torch.softmax(logits, dim=-1, dtype=torch.float32)
        weights, indices = torch.topk(weights, _top_k(self), dim=-1)
        if normalise:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = _every_expert(self, flat, indices, weights).reshape(shape)
        return (out, logits) if returns_logits else out

    return forward


def _first_tensor(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _difference(got, want) -> float:
    got, want = _first_tensor(got), _first_tensor(want)
    if got is None or want is None or got.shape != want.shape:
        return float("inf")
    scale = max(float(want.abs().max()), 1e-6)
    return float((got.float() - want.float()).abs().max()) / scale


def _seen_calls(model, blocks: list[_Block], example_inputs) -> dict[str, tuple]:
    """Each block's first call (arguments and output) in one eager run of ``model``."""
    import torch

    seen: dict[str, tuple] = {}
    handles = []
    for block in blocks:
        def hook(module, args, kwargs, output, name=block.name):
            seen.setdefault(name, (args, kwargs, output))

        handles.append(block.module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(*example_inputs)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def _replacement(block: _Block, call: tuple | None):
    """The bound method that replaces ``block``'s own, checked on ``call`` where it ran."""
    import torch

    if call is None:  # the block did not run on the example: nothing to check it against
        if block.attribute == "moe":
            return types.MethodType(_fixed_moe, block.module)
        normalise = True if block.normalise is None else bool(block.normalise)
        return types.MethodType(_fixed_forward(normalise, False), block.module)
    args, kwargs, want = call
    if block.attribute == "moe":
        method = types.MethodType(_fixed_moe, block.module)
        # The router's own output is what moe receives: checked through the whole block.
        original = block.module.moe
        block.module.moe = method
        try:
            with torch.no_grad():
                got = block.module(*args, **kwargs)
        finally:
            block.module.moe = original
        difference = _difference(got, want)
        if difference > TOLERANCE:
            raise _unlike(block, difference)
        return method
    returns_logits = isinstance(want, tuple) and len(want) == 2
    choices = [block.normalise] if block.normalise is not None else [True, False]
    # The router is known by what it computes: first its own code, run up to the dispatch;
    # then, for a linear router with a top-k, each score with and without renormalising.
    # Each against the block's own output on the example.
    candidates = [_own_router_forward(returns_logits)]
    if _router(block.module) is not None and _top_k(block.module) is not None:
        candidates += [
            _fixed_forward(bool(normalise), returns_logits, score)
            for score in SCORES for normalise in choices
        ]
    best = float("inf")
    for candidate in candidates:
        method = types.MethodType(candidate, block.module)
        try:
            with torch.no_grad():
                difference = _difference(method(*args, **kwargs), want)
        except ExpertsError:
            continue
        if difference <= TOLERANCE:
            return method
        best = min(best, difference)
    raise _unlike(block, best)


def _exports_as_is(block: _Block, call: tuple | None, exported: dict) -> bool:
    """Whether ``block``'s own forward exports on the call the model made (its shapes fixed
    already, as a user who wrote it so made it): such a block is never replaced. Tried once
    per class of block."""
    import torch

    from planner.tvm.sources.export_failure import quiet_draft

    if call is None:
        return False
    kind = type(block.module)
    if kind not in exported:
        args, kwargs, _ = call
        try:
            with torch.no_grad(), quiet_draft():
                program = torch.export.export(block.module, tuple(args), dict(kwargs))
            exported[kind] = not _data_dependent_shapes(program)
        except Exception:  # the loop over experts, or anything else export refuses
            exported[kind] = False
    return exported[kind]


def _data_dependent_shapes(program) -> bool:
    """Whether any value of ``program`` has a size read from the data (an unbacked symbol:
    ``nonzero``, a split by counts): export takes those, TVM's importer does not, and a
    deployment would not compile them."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in program.graph.nodes:
        value = node.meta.get("val")
        try:
            if value is not None and free_unbacked_symbols(value):
                return True
        except Exception:  # a value of a kind it cannot walk has no shape of its own
            continue
    return False


def _unlike(block, difference: float, failure: str | None = None) -> ExpertsError:
    """``block`` (a :class:`_Block`, or a :class:`~planner.tvm.sources.routing.Routed` and
    the first error its code raised with every token routed to every expert) refused."""
    if difference == float("inf") and failure:
        differs = (f"fails in the block's own code with every token routed to every expert "
                   f"({failure[:200]})")
    elif difference == float("inf"):
        differs = "gives an output of another shape than the block's"
    else:
        differs = f"differs from the block by {difference:.3g} of its largest output"
    return ExpertsError(
        f"the mixture of experts {type(block.module).__name__} at "
        f"{block.name or 'the top of the model'} has no fixed-shape form here: every expert "
        "on every token, weighted as its own router weights the token (its code run up to "
        f"its dispatch, or a top-k over a softmax or a sigmoid), {differs}, so the block "
        "computes something other than a weighting of its experts on each token; write the "
        "block's forward with fixed shapes in the model file: a block whose forward exports "
        "with fixed shapes is never replaced"
    )


def _describe(blocks: list[_Block], routed: list) -> str:
    kinds = sorted({type(b.module).__name__ for b in blocks} | {type(r.module).__name__
                                                                for r in routed})
    sizes = sorted({len(_experts(b.module)) for b in blocks} | {r.experts for r in routed})
    tops = sorted({_top_k(b.module) or _top_k(getattr(b.module, "gate", None)) or 0
                   for b in blocks} | {r.top_k for r in routed})
    total = len(blocks) + len(routed)
    count = f"{total} block" + ("s" if total != 1 else "")
    return ASSUMPTION[FORM.get()].format(
        blocks=count, kinds=", ".join(kinds), experts="/".join(map(str, sizes)),
        top_k="/".join(str(t) for t in tops if t) or "k",
    )


@contextmanager
def fixed_shape_experts(model, example_inputs: tuple) -> Iterator[list[str]]:
    """Within it, ``model``'s mixture-of-experts blocks compute in fixed shapes (each
    checked against the block on ``example_inputs``); yields the assumptions to report,
    none where the model has no such block. The model is as before on leaving.

    Blocks with a ``ModuleList`` of experts are found by it; any other block that takes a
    top-k and then reads routing data (stacked expert weights, a grouped matmul) by
    :func:`planner.tvm.sources.routing.find_routed`, and run in its own code with every token
    routed to every expert."""
    blocks = find_blocks(model)
    chains = find_routed(model, example_inputs, skip=tuple(b.name for b in blocks))
    if not blocks and not chains:
        yield []
        return
    calls = _seen_calls(model, [*blocks, *(r for chain in chains for r in chain)],
                        example_inputs)
    exported: dict = {}
    blocks = [b for b in blocks if not _exports_as_is(b, calls.get(b.name), exported)]
    chains = [c for c in chains
              if not any(_exports_as_is(r, calls.get(r.name), exported) for r in c)]
    if not blocks and not chains:
        yield []
        return
    if chains and FORM.get() == "grouped":
        block = _first_dense(chains[0], calls)[0]
        raise ExpertsError(
            f"the mixture of experts at {block.name or 'the top of the model'} "
            f"({type(block.module).__name__}) keeps its experts in its own code (stacked "
            "weights, not a list of expert modules), which only the dense form runs: plan "
            'it with moe = "dense"'
        )
    replaced, routed = [], []
    try:
        for block in blocks:
            method = _replacement(block, calls.get(block.name))
            replaced.append(_shadow(block.module, block.attribute, method))
        for chain in chains:
            found, method, gap, failure = _first_dense(chain, calls)
            if method is None:
                raise _unlike(found, gap, failure)
            routed.append(found)
            replaced.append(_shadow(found.module, "forward", method))
        yield [_describe(blocks, routed)]
    finally:
        for module, attribute, had, before in replaced:
            if had:
                setattr(module, attribute, before)
            else:
                delattr(module, attribute)


def _first_dense(chain: list, calls: dict) -> tuple:
    """The innermost call of ``chain`` whose every-expert form gives its own output, that
    form, and else the smallest difference and first error seen: the router may read routing
    data itself, and only a call around it returns what the experts computed."""
    best, failure = float("inf"), None
    for found in chain:
        method, gap, failed = replacement(found, calls.get(found.name), _difference, TOLERANCE)
        if method is not None:
            return found, method, gap, None
        best, failure = min(best, gap), failure or failed
    return chain[-1], None, best, failure


def _shadow(module, attribute: str, method) -> tuple:
    """Set ``method`` as ``module``'s own ``attribute`` (an instance attribute shadows the
    class's method for this module alone); what puts it back."""
    had = attribute in vars(module)
    before = vars(module).get(attribute)
    setattr(module, attribute, method)
    return module, attribute, had, before
