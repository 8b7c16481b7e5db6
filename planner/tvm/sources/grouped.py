"""The grouped form of a mixture of experts: what a grouped-GEMM deployment holds.

A deployment (MLC-LLM's ``group_gemm``, vLLM's fused MoE) does not run every expert on every
token. It copies each token once per expert the router chose (``tokens x top_k`` rows),
sorts the rows by expert, runs each expert's weights over its own rows in one grouped
matmul, puts the rows back in token order and sums each token's ``top_k`` rows, weighted.
Every buffer is ``tokens x top_k`` rows wide, whichever experts the rows go to: fixed
shapes, though which rows go where is data.

:func:`grouped_sum` computes a block so, with one expert's own forward run once on all the
rows and each of its linear layers replaced by :func:`grouped_linear`: row ``r`` through
that layer of expert ``expert[r]``. That operator is one kernel in TVM
(:func:`convert_grouped_linear`), reading each row's expert's weights where they are, so
the plan holds what the deployment holds: the rows, not a copy of the weights per row.
"""

from __future__ import annotations

import functools

#: The library that holds :func:`grouped_linear` in torch.
LIBRARY = "peakwatch"


class GroupedError(ValueError):
    """The block's experts cannot run as one grouped matmul per layer."""


@functools.cache
def _register():
    """``torch.ops.peakwatch.grouped_linear``: defined once per process."""
    import torch

    # The schema written out: this module's annotations are strings (``from __future__``).
    @torch.library.custom_op(
        f"{LIBRARY}::grouped_linear", mutates_args=(),
        schema="(Tensor rows, Tensor expert, Tensor[] weights, Tensor[] biases) -> Tensor",
    )
    def grouped_linear(rows, expert, weights, biases):
        out = rows.new_empty(rows.shape[0], weights[0].shape[0])
        for number, weight in enumerate(weights):
            mine = expert == number
            bias = biases[number] if biases else None
            out[mine] = torch.nn.functional.linear(rows[mine], weight, bias)
        return out

    @grouped_linear.register_fake
    def _(rows, expert, weights, biases):
        return rows.new_empty(rows.shape[0], weights[0].shape[0])

    return grouped_linear


def grouped_linear(rows, expert, weights: list, biases: list):
    """``linear(rows[r], weights[expert[r]], biases[expert[r]])`` for every row ``r``."""
    return _register()(rows, expert, list(weights), list(biases))


def _through_experts(experts: list, rows, expert):
    """Each row through its own expert, as one forward of ``experts[0]`` over every row
    whose linear layers take each row's expert's weights."""
    import torch
    from torch.overrides import TorchFunctionMode

    first = experts[0]
    owned = {id(p): name for name, p in first.named_parameters()}
    if not owned:
        raise GroupedError("its experts hold no weights")
    others = [dict(e.named_parameters()) for e in experts]
    layout = [(n, tuple(p.shape)) for n, p in others[0].items()]
    for number, params in enumerate(others):
        if [(n, tuple(p.shape)) for n, p in params.items()] != layout:
            raise GroupedError(f"expert {number} is not built like expert 0")

    class Grouped(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.nn.functional.linear and id(args[1]) in owned:
                weight = owned[id(args[1])]
                bias = args[2] if len(args) > 2 else kwargs.get("bias")
                biases = [] if bias is None else [p[owned[id(bias)]] for p in others]
                return grouped_linear(args[0], expert, [p[weight] for p in others], biases)
            used = [owned[id(a)] for a in (*args, *kwargs.values())
                    if isinstance(a, torch.Tensor) and id(a) in owned]
            if used:
                raise GroupedError(
                    f"an expert's {used[0]} is used by {getattr(func, '__name__', func)}, "
                    "not by a linear layer: only linear layers run grouped"
                )
            return func(*args, **kwargs)

    with Grouped():
        return first(rows)


def grouped_sum(experts: list, hidden, indices, weights):
    """The experts on ``hidden`` (``[tokens, width]``) as a grouped-GEMM deployment runs
    them: each token's ``top_k`` rows (``indices``, ``[tokens, k]``) sorted by expert,
    through their experts, back in order and summed with ``weights``."""
    import torch

    tokens, k = indices.shape
    slot_expert = indices.reshape(-1)
    order = torch.argsort(slot_expert)
    rows = hidden[order // k]
    done = _through_experts(experts, rows, slot_expert[order])
    back = done[torch.argsort(order)]
    return (back.reshape(tokens, k, -1) * weights.to(back.dtype)[..., None]).sum(dim=1)


def convert_grouped_linear(node, importer):
    """:func:`grouped_linear` as one TIR kernel: ``out[r, o] = sum_h rows[r, h] *
    W_e[o, h]`` with ``e = expert[r]``, each expert's weight read where it is."""
    from tvm import te
    from tvm import tirx as tir

    rows, expert, weights, biases = node.args[:4]
    env = importer.env
    count = len(weights)

    def pick(tensors, number, *index):
        value = tensors[-1][index]
        for at in range(count - 2, -1, -1):
            value = tir.Select(number == tir.const(at, number.dtype), tensors[at][index], value)
        return value

    def compute(x, e, *params):
        ws, bs = params[:count], params[count:]
        width = x.shape[1]
        h = te.reduce_axis((0, width), name="h")
        out = te.compute(
            (x.shape[0], ws[0].shape[0]),
            lambda r, o: te.sum(x[r, h] * pick(ws, e[r], o, h), axis=h),
            name="grouped_linear",
        )
        if bs:
            out = te.compute(out.shape, lambda r, o: out[r, o] + pick(bs, e[r], o),
                             name="grouped_bias")
        return out

    params = [env[w] for w in weights] + [env[b] for b in biases]
    return importer.block_builder.emit_te(compute, env[rows], env[expert], *params,
                                          primfunc_name_hint="grouped_linear")
