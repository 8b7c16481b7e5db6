"""Conversions of torch operators that TVM 0.27's importer types unlike torch.

Handed to ``from_exported_program`` as its ``custom_convert_map`` (the importer's own way to
replace how one operator converts), so the Relax module has torch's dtypes from the start
and every operator after it is converted for them.

``cumsum`` and ``cumprod`` without a ``dtype``: torch promotes a bool or integer input to
int64 (``torch.cumsum`` of a bool tensor counts), while the importer keeps the input's
dtype. A cumulative sum over bool, which Hugging Face decoders (Llama, Qwen2, Mistral, OPT,
GPT-NeoX) compute when called without an attention mask, then fails in LLVM code generation
under every strategy (``Check failed: (t.MatchesCode(DLDataTypeCode::kDLFloat))``); one over
int32 builds but returns int32 where torch returns int64. Here the scan is given the dtype
of torch's own result, which export recorded on the node (``meta["val"]``).

Elementwise operators of two operands compute in the type torch computes them in
(:func:`_in_torch_types`): torch promotes operands of different types (an int64 tensor
floor-divided by a Python 32, an int tensor times 0.5, a float16 tensor and a float32
0-d tensor), while the importer makes a Python number a constant of a fixed type or of the
other operand's type, and promotes two tensors without torch's rule for 0-d tensors: a
model then failed to import (``Binary operators must have the same datatype``) or computed
in another type than torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _scan_in_torch_dtype(name: str) -> Callable:
    def convert(node, importer):
        from tvm import relax

        if "out" in node.kwargs:
            raise ValueError(f"specifying out for {name} is not supported yet")
        data = importer.env[node.args[0]]
        dim = _arg(node, 1, "dim")
        dtype = node.kwargs.get("dtype")
        if dtype is None:
            dtype = getattr(node.meta.get("val"), "dtype", None)
        dtype = None if dtype is None else str(dtype).removeprefix("torch.")
        return importer.block_builder.emit(getattr(relax.op, name)(data, dim, dtype))

    return convert


def _complex(node) -> bool:
    value = getattr(node, "meta", {}).get("val")
    return value is not None and hasattr(value, "is_complex") and value.is_complex()


def _default(importer, name: str):
    # The importer's own conversion of ``name``; ours replaced it in its map.
    table = getattr(importer, "_peakwatch_defaults", None)
    if table is None:
        table = importer._peakwatch_defaults = importer.create_convert_map()
    return table[name]


def _arg(node, at: int, keyword: str, default=None):
    """The node's argument at position ``at``, else its ``keyword``, else ``default``."""
    return node.args[at] if len(node.args) > at else node.kwargs.get(keyword, default)


def _split_with_empty_pieces(node, importer):
    """``split_with_sizes`` where some pieces are empty (Mamba2 splits its projection into
    ``[d_mlp, d_mlp, ...]`` with ``d_mlp = 0``): the importer's cut positions repeat there,
    and Relax's split refuses them (``split_indices must be sorted``). The non-empty pieces
    are split as the importer splits them, and each empty piece is a slice of width 0 at its
    place, so every piece keeps its index and its shape."""
    from tvm import relax

    sizes = node.args[1]
    if not isinstance(sizes, list | tuple) or not any(size == 0 for size in sizes) or not all(
        isinstance(size, int) for size in sizes
    ):
        return _default(importer, "split_with_sizes.default")(node)
    data = importer.env[node.args[0]]
    dim = _arg(node, 2, "dim", 0)
    source = getattr(node.args[0], "meta", {}).get("val")
    if dim < 0 and source is not None:
        dim += source.dim()
    kept = [size for size in sizes if size]
    cuts, at = [], 0
    for size in kept[:-1]:
        at += size
        cuts.append(at)
    pieces = importer.block_builder.emit(relax.op.split(data, cuts, dim)) if kept else None
    found, taken, start = [], 0, 0
    for size in sizes:
        if size:
            found.append(importer.block_builder.emit(relax.TupleGetItem(pieces, taken)))
            taken += 1
        else:
            found.append(importer.block_builder.emit(
                relax.op.strided_slice(data, axes=[dim], begin=[start], end=[start])
            ))
        start += size
    return importer.block_builder.emit(relax.Tuple(found))


def _index_from_the_front(node, importer):
    """``index.Tensor`` with negative indices counted from the end, as torch counts them.
    TVM 0.27's importer hands them to ``take`` as they are, which reads another row or past
    the tensor: Falcon's multi-query attention picks its key and value heads with
    ``fused_qkv[..., [-2], :]`` and ``[..., [-1], :]``, and TVM's build of it returned NaN
    or logits 0.885 off. Each integer index is normalised where the indexed dimension's
    size is known, then converted as the importer converts it."""
    import torch
    from tvm import relax

    source = getattr(node.args[0], "meta", {}).get("val")
    saved = {}
    bb = importer.block_builder
    for axis, index in enumerate(node.args[1]):
        value = getattr(index, "meta", {}).get("val") if index is not None else None
        if (
            value is None or source is None or axis >= source.dim()
            or value.is_floating_point() or value.dtype == torch.bool
            or not isinstance(source.shape[axis], int)
        ):
            continue
        expr = importer.env[index]
        dtype = str(value.dtype).removeprefix("torch.")
        size = relax.const(source.shape[axis], dtype)
        saved[index] = expr
        importer.env[index] = bb.emit(relax.op.where(
            bb.emit(relax.op.less(expr, relax.const(0, dtype))),
            bb.emit(relax.op.add(expr, size)),
            expr,
        ))
    try:
        taken = _index_broadcast(node, importer, source)
        return taken if taken is not None else _default(importer, "index.Tensor")(node)
    finally:
        importer.env.update(saved)


def _index_broadcast(node, importer, source):
    """``x[..., i, j]`` with integer indices of adjacent dimensions whose shapes differ and
    broadcast (``F.unfold`` decomposes to ``x[:, :, rows[..., None, None], columns]``):
    TVM 0.27's index refuses to broadcast them ("cannot broadcast index shapes"; timm's TNT
    stopped at import). The indexed dimensions are flattened into one and each element taken
    at ``i * width + j`` over the broadcast shape, which is what torch reads. None where the
    indices are not of that form (the importer's own conversion takes them)."""
    import math

    import torch
    from tvm import relax

    indices = list(node.args[1])
    places = [axis for axis, index in enumerate(indices) if index is not None]
    values = [getattr(indices[a], "meta", {}).get("val") for a in places]
    if (
        source is None or len(places) < 2 or places != list(range(places[0], places[-1] + 1))
        or any(v is None or v.is_floating_point() or v.dtype == torch.bool for v in values)
        # Static sizes first: a symbolic one is not hashable, nor taken here.
        or not all(isinstance(d, int) for d in source.shape)
        or not all(isinstance(d, int) for v in values for d in v.shape)
        or len({tuple(v.shape) for v in values}) == 1
    ):
        return None
    shape = list(torch.broadcast_shapes(*(tuple(v.shape) for v in values)))
    bb = importer.block_builder
    first, last = places[0], places[-1]
    linear = None
    for axis in places:
        stride = math.prod(source.shape[axis + 1:last + 1])
        term = bb.emit(relax.op.astype(importer.env[indices[axis]], "int64"))
        if stride != 1:
            term = bb.emit(relax.op.multiply(term, relax.const(stride, "int64")))
        linear = term if linear is None else bb.emit(relax.op.add(linear, term))
    linear = bb.emit(relax.op.broadcast_to(linear, shape))
    flat = [*source.shape[:first], math.prod(source.shape[first:last + 1]),
            *source.shape[last + 1:]]
    data = bb.emit(relax.op.reshape(importer.env[node.args[0]], flat))
    return bb.emit(relax.op.take(data, linear, axis=first))


def _select_from_the_front(node, importer):
    """``x[..., -1]`` (``select.int`` with a negative index), counted from the end as torch
    counts it. TVM 0.27's importer makes it ``take(x, -1)`` in its fast mode, which reads the
    element before each row: every value shifted by one and the first read from before the
    tensor. Mamba2's and Falcon-H1's chunked scan take ``A_cumsum[:, :, :, -1]``: the stock
    build was 0.0275 off PyTorch in Mamba2, and Falcon-H1's planned build returned NaN where
    the arena held stale bytes before that tensor. Where the dimension's size is known the
    index is made positive; along a symbolic one, ``take`` wraps it."""
    from tvm import relax

    dim, index = node.args[1], node.args[2]
    source = getattr(node.args[0], "meta", {}).get("val")
    if not isinstance(index, int) or index >= 0 or source is None:
        return _default(importer, "select.int")(node)
    dim %= source.dim()
    size = source.shape[dim]
    data = importer.env[node.args[0]]
    if isinstance(size, int):
        return importer.block_builder.emit(
            relax.op.take(data, relax.const(index + size, "int64"), axis=dim)
        )
    return importer.block_builder.emit(
        relax.op.take(data, relax.const(index, "int64"), axis=dim, mode="wrap")
    )


def _index_put_by_mask(name: str) -> Callable:
    """``x[mask] = value`` (``index_put`` with one boolean index), which TVM 0.27's importer
    refuses (``IndexPut requires each index tensor to have integer dtype``; Gemma3 zeroes its
    image tokens so): where the mask covers ``x``'s leading dimensions and the value is one
    element, it is ``where(mask, value, x)`` (``x + value`` with ``accumulate``), which is
    what torch computes. Integer indices of ``x``'s leading dimensions only (what
    ``index_add`` becomes) are given the trailing ones (:func:`_index_put_leading`). Any other
    form goes to the importer as before."""

    def convert(node, importer):
        from tvm import relax

        x, indices, values = node.args[:3]
        accumulate = _arg(node, 3, "accumulate", False)
        source = getattr(x, "meta", {}).get("val")
        mask = indices[0] if len(indices) == 1 and indices[0] is not None else None
        mask_value = getattr(mask, "meta", {}).get("val") if mask is not None else None
        value = getattr(values, "meta", {}).get("val")
        if _leading_integer_indices(source, indices):
            return _index_put_leading(node, importer, source, indices, values, accumulate)
        if (
            source is None or mask_value is None or value is None
            or str(mask_value.dtype) != "torch.bool" or value.numel() != 1
            or tuple(mask_value.shape) != tuple(source.shape[:mask_value.dim()])
        ):
            return _default(importer, name)(node)
        bb = importer.block_builder
        data, chosen = importer.env[x], importer.env[mask]
        trailing = source.dim() - mask_value.dim()
        if trailing:
            chosen = bb.emit(relax.op.reshape(chosen, [*mask_value.shape, *([1] * trailing)]))
        dtype = str(source.dtype).removeprefix("torch.")
        put = bb.emit(relax.op.reshape(relax.op.astype(importer.env[values], dtype), []))
        if accumulate:
            put = bb.emit(relax.op.add(data, put))
        return bb.emit(relax.op.where(chosen, put, data))

    return convert


def _integer_clamp(name: str) -> Callable:
    """``clamp`` (``clamp_min``, ``clamp_max``) of an integer tensor with one bound left
    open, which the importer writes as a clip to -inf or inf: TVM then casts that infinity
    to the integer type and folding fails (``Cannot convert infinity to BigInt``; SAM's
    relative positions clamp ``max=`` an int64 index so). The open bound is the type's own
    limit, which is what an open bound means in torch. Any other clamp goes to the importer
    as before."""
    import math

    def convert(node, importer):
        import torch
        from tvm import relax

        x = node.args[0]
        value = getattr(x, "meta", {}).get("val")
        if name == "clamp_min.default":
            low, high = _arg(node, 1, "min"), None
        elif name == "clamp_max.default":
            low, high = None, _arg(node, 1, "max")
        else:
            low, high = _arg(node, 1, "min"), _arg(node, 2, "max")
        bounds = (low, high)
        if low == math.inf or high == -math.inf or (
            not isinstance(value, torch.Tensor) or value.is_floating_point()
            or value.dtype == torch.bool or value.is_complex()
            or not all(b is None or (isinstance(b, int | float) and not isinstance(b, bool)
                                     and (math.isinf(b) or float(b).is_integer()))
                       for b in bounds)
        ):
            return _default(importer, name)(node)
        info = torch.iinfo(value.dtype)
        low = info.min if low is None or low == -math.inf else int(low)
        high = info.max if high is None or high == math.inf else int(high)
        return importer.block_builder.emit(relax.op.clip(importer.env[x], low, high))

    return convert


def _pool_over_everything(node, importer):
    """``avg_pool2d`` whose one window covers the whole input (its kernel at least the
    input's size, no padding, one output per plane: transformers' EfficientNet pools with
    ``AvgPool2d(hidden_dim, ceil_mode=True)`` over a 1 x 1 map). TVM pads the input to the
    whole window and allocates it (a 1 x 2560 x 1 x 1 input became a 64 GB pad buffer, and
    the run failed with std::bad_alloc); torch clips the window to the input, so it is the
    mean over the plane. Any other pooling goes to the importer as before."""
    from tvm import relax

    x = node.args[0]
    source = getattr(x, "meta", {}).get("val")
    result = node.meta.get("val")
    kernel = _arg(node, 1, "kernel_size")
    padding = _arg(node, 3, "padding") or [0]
    divisor = _arg(node, 6, "divisor_override")
    if source is None or result is None or kernel is None or divisor is not None:
        return _default(importer, "avg_pool2d.default")(node)
    kernel = list(kernel) * (2 if len(kernel) == 1 else 1)
    plane = [int(size) if isinstance(size, int) else None for size in source.shape[-2:]]
    out = [int(size) if isinstance(size, int) else None for size in result.shape[-2:]]
    if (
        None in plane or out != [1, 1] or any(int(p) != 0 for p in padding)
        or any(k < size for k, size in zip(kernel, plane, strict=True))
    ):
        return _default(importer, "avg_pool2d.default")(node)
    return importer.block_builder.emit(
        relax.op.mean(importer.env[x], axis=[-2, -1], keepdims=True)
    )


def _extremum(name: str) -> Callable:
    """``amax`` and ``amin`` (the largest or smallest entry over some dimensions, all of
    them for an empty list), which TVM 0.27's importer lacks ("Unsupported function types
    ['amax.default']"; timm's Hiera pools its mask units so): Relax's ``max`` and ``min``
    over the same dimensions compute the same."""

    def convert(node, importer):
        from tvm import relax

        x = node.args[0]
        dims = _arg(node, 1, "dim")
        keep = bool(_arg(node, 2, "keepdim"))
        axis = None if not dims else [int(d) for d in
                                        ((dims,) if isinstance(dims, int) else dims)]
        op = relax.op.max if name == "amax" else relax.op.min
        return importer.block_builder.emit(op(importer.env[x], axis=axis, keepdims=keep))

    return convert


def _leading_integer_indices(source, indices) -> bool:
    """Whether ``indices`` are integer tensors of one static shape for fewer of ``source``'s
    dimensions than it has, from the first on."""
    import torch

    vals = [getattr(i, "meta", {}).get("val") if i is not None else None for i in indices]
    if source is None or not 0 < len(vals) < source.dim() or not all(
        isinstance(v, torch.Tensor) and not v.is_floating_point() and v.dtype != torch.bool
        for v in vals
    ):
        return False
    shapes = [tuple(v.shape) for v in vals]
    # Sizes are compared only once they are plain numbers: a symbolic one is not hashable.
    static = all(isinstance(d, int) for d in (*source.shape, *(d for s in shapes for d in s)))
    return static and all(shape == shapes[0] for shape in shapes)


def _index_put_leading(node, importer, source, indices, values, accumulate):
    """``index_put`` with integer indices of ``x``'s leading dimensions (``index_add`` along
    the first dimension becomes that), which TVM 0.27's ``IndexPut`` refuses (it takes one
    index per dimension): each trailing dimension is indexed by its whole range, broadcast
    against the given indices, and the values broadcast to the rows they fill, as torch
    fills them."""
    from tvm import relax

    bb = importer.block_builder
    shape = [int(size) for size in indices[0].meta["val"].shape]
    trailing = [int(size) for size in source.shape[len(indices):]]
    every = [bb.emit(relax.op.reshape(importer.env[i], [*shape, *[1] * len(trailing)]))
             for i in indices]
    for at, size in enumerate(trailing):
        span = bb.emit(relax.op.arange(0, size, 1, "int64"))
        place = [1] * len(shape) + [size if q == at else 1 for q in range(len(trailing))]
        every.append(bb.emit(relax.op.reshape(span, place)))
    filled = [*shape, *trailing]
    put = bb.emit(relax.op.broadcast_to(importer.env[values], filled))
    return bb.emit(relax.op.index_put(importer.env[node.args[0]], relax.Tuple(every), put,
                                      bool(accumulate)))


def _grouped(node, importer):
    """Peakwatch's own grouped matmul (the grouped form of a mixture of experts)."""
    from planner.tvm.sources.grouped import convert_grouped_linear

    return convert_grouped_linear(node, importer)


#: ``custom_convert_map`` for ``from_exported_program``.
def _top_k_in_any_order(node, importer):
    """``topk(..., sorted=False)``, which the importer refuses (DeepSeek's routers choose
    their experts so): torch promises no order then, so the sorted order is one torch may
    return. A model whose outputs depend on that order differs from PyTorch, which the
    output check reports."""
    from tvm import relax

    args = list(node.args) + [None] * (5 - len(node.args))
    data = importer.env[node.args[0]]
    k = args[1] if args[1] is not None else node.kwargs.get("k", 1)
    dim = args[2] if args[2] is not None else node.kwargs.get("dim", -1)
    largest = args[3] if args[3] is not None else node.kwargs.get("largest", True)
    return importer.block_builder.emit(
        relax.op.topk(data, k=k, axis=dim, largest=largest, ret_type="both", dtype="int64")
    )


def _cat_without_empty_vectors(node, importer):
    """``torch.cat`` skips an input that is an empty 1-D tensor, whatever the others' rank
    (an encoder-decoder's empty key cache, which BART, T5 and Whisper concatenate with the
    first keys when called with their default cache); Relax's concat refuses the mixed
    ranks (``Concat expects all input tensors to have same ndim``). Those inputs are left
    out, as torch leaves them."""
    from tvm import relax

    tensors = node.args[0]
    shapes = [getattr(t, "meta", {}).get("val") for t in tensors]
    empty = [
        v is not None and v.dim() == 1 and v.shape[0] == 0 for v in shapes
    ]
    if not any(empty) or all(empty):
        return _default(importer, "cat.default")(node)
    kept = [importer.env[t] for t, skip in zip(tensors, empty, strict=True) if not skip]
    dim = _arg(node, 1, "dim", 0)
    if len(kept) == 1:
        return kept[0]
    return importer.block_builder.emit(relax.op.concat(kept, axis=dim))


def _slice_in_bounds(node, importer):
    """``x[..., start:end]`` with a symbolic bound, where torch's own result has exactly
    ``end - start`` rows: sliced without clamping. The importer clamps every bound for
    negative and out-of-range values, which at a symbolic length leaves ``if_then_else(s <
    0, ...)`` in the result's shape; TVM 0.27 then fails to type it in lowering (``Cannot
    find the FInferType attribute registered to op: prim.if_then_else``, BART's decoder
    along a symbolic length). torch.export has checked the bounds for the whole range."""
    import sympy
    import torch
    from torch import fx
    from tvm import relax

    args = list(node.args) + [None] * (5 - len(node.args))
    start = args[2] if args[2] is not None else 0
    end = args[3] if args[3] is not None else sys.maxsize
    step = args[4] if args[4] is not None else 1
    result, source = node.meta.get("val"), getattr(node.args[0], "meta", {}).get("val")
    symbolic = [v for v in (start, end) if isinstance(v, fx.Node)]
    if not symbolic or step != 1 or result is None or source is None:
        return _default(importer, "slice.Tensor")(node)
    dim = args[1] or 0
    dim = dim + source.dim() if dim < 0 else dim

    def expr(value):
        if isinstance(value, int):
            return sympy.Integer(value)
        known = value.meta.get("val") if isinstance(value, fx.Node) else None
        return known.node.expr if isinstance(known, torch.SymInt) else None

    def size(value):
        return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)

    rows, length = size(result.shape[dim]), size(source.shape[dim])
    first, last = expr(start), expr(end)
    if first is None or last is None:
        return _default(importer, "slice.Tensor")(node)
    data = importer.env[node.args[0]]
    extent = importer.shape_of(data)[dim]

    def bound(value):
        return importer.env[value] if isinstance(value, fx.Node) else value

    # As torch reads them: a start counted from the end (T5's ``bias[:, :, -seq:, :]``),
    # an end past the length (``sys.maxsize``) cut to it; kept only where the rows agree
    # with torch's own result over the whole range.
    for begin, begin_at in ((first, bound(start)), (first + length, bound(start) + extent)):
        for stop, stop_at in ((last, bound(end)), (length, extent)):
            if sympy.simplify(stop - begin - rows) == 0:
                return importer.block_builder.emit(relax.op.strided_slice(
                    data, [dim], [begin_at], [stop_at], [1], assume_inbound=True
                ))
    return _default(importer, "slice.Tensor")(node)


#: Elementwise operators of two operands, by the name export gives them: the Relax
#: operator each computes with. Their result is in the type they compute in, except the
#: comparisons' (bool).
_ARITHMETIC = {
    **{f"{op}.{kind}": relax for op, relax in (
        ("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("div", "divide"),
        ("remainder", "floor_mod"), ("bitwise_and", "bitwise_and"),
        ("bitwise_or", "bitwise_or"), ("bitwise_xor", "bitwise_xor"),
    ) for kind in ("Tensor", "Scalar")},
    "div.Tensor_mode": "floor_divide",
    "floor_divide.default": "floor_divide",
    "maximum.default": "maximum",
    "minimum.default": "minimum",
}
_COMPARISONS = {
    f"{op}.{kind}": relax
    for op, relax in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                      ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"))
    for kind in ("Tensor", "Scalar")
}


def _torch_value(operand):
    """What torch computed ``operand`` as: a tensor (export's fake one) or a Python number;
    None for anything else (a symbolic size)."""
    import torch

    if isinstance(operand, bool | int | float):
        return operand
    value = getattr(operand, "meta", {}).get("val")
    return value if isinstance(value, torch.Tensor) else None


def _compute_type(node, name: str):
    """The torch dtype ``node`` computes in: its result's for arithmetic (true division of
    integers computes in floats), the operands' promoted type for a comparison; None where
    it cannot be told from the graph."""
    import torch

    if name in _ARITHMETIC:
        value = getattr(node, "meta", {}).get("val")
        return value.dtype if isinstance(value, torch.Tensor) else None
    # torch.result_type tells a 0-d tensor from one with dimensions, which promote apart.
    operands = [
        torch.empty([1] * value.dim(), dtype=value.dtype)
        if isinstance(value, torch.Tensor) else value
        for value in map(_torch_value, node.args[:2])
    ]
    return torch.result_type(*operands)


def _in_torch_types(name: str) -> Callable:
    """``name``, an elementwise operator of two operands, with both in the type torch
    computes it in: a tensor of another type cast to it, a Python number made a constant of
    it. Where both already are, the module is the importer's, to the binding."""

    def convert(node, importer):
        from tvm import relax

        rounding = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
        extra = set(node.kwargs) - {"rounding_mode"}
        operands = node.args[:2]
        plain = (
            not extra and len(operands) == 2
            and all(_torch_value(x) is not None for x in operands)
            and (name != "div.Tensor_mode" or rounding in ("floor", "trunc"))
        )
        compute = _compute_type(node, name) if plain else None
        if compute is None or compute.is_complex:
            return _default(importer, name)(node)
        dtype = str(compute).removeprefix("torch.")
        bb = importer.block_builder
        values = []
        for operand in operands:
            if isinstance(operand, bool | int | float):
                values.append(relax.const(operand, dtype))
                continue
            value = importer.env[operand]
            if str(value.ty.dtype) != dtype:
                value = bb.emit(relax.op.astype(value, dtype))
            values.append(value)
        if name == "div.Tensor_mode" and rounding == "trunc":
            # As the importer divides towards zero: an integer division truncates already.
            quotient = bb.emit(relax.op.divide(*values))
            return bb.emit(relax.op.trunc(quotient)) if compute.is_floating_point else quotient
        relax_op = getattr(relax.op, _ARITHMETIC.get(name) or _COMPARISONS[name])
        return bb.emit(relax_op(*values))

    return convert


CONVERSIONS: dict[str, Callable] = {
    "cat.default": _cat_without_empty_vectors,
    "slice.Tensor": _slice_in_bounds,
    **{f"{name}.default": _scan_in_torch_dtype(name) for name in ("cumsum", "cumprod")},
    "split_with_sizes.default": _split_with_empty_pieces,
    "index.Tensor": _index_from_the_front,
    "select.int": _select_from_the_front,
    "topk.default": _top_k_in_any_order,
    **{name: _index_put_by_mask(name) for name in ("index_put.default", "index_put_.default")},
    **{name: _in_torch_types(name) for name in (*_ARITHMETIC, *_COMPARISONS)},
    "grouped_linear.default": _grouped,
    **{name: _integer_clamp(name)
       for name in ("clamp.default", "clamp_min.default", "clamp_max.default")},
    "avg_pool2d.default": _pool_over_everything,
    "amax.default": _extremum("amax"),
    "amin.default": _extremum("amin"),
}


# Complex tensors, as real arithmetic. Relax has no complex dtype; a complex tensor of shape
# S is carried as a real one of shape S + [2] (real and imaginary parts last), which is what
# view_as_real makes of it in torch too. The operators that make complex tensors
# (view_as_complex, polar) and take them apart (view_as_real) convert to that form; the
# others a rotary embedding applies to them (multiplication, unsqueeze, a change of
# device) convert for it where an input is complex and as the importer converts them
# otherwise. Anything else handed a complex tensor is refused by name before the import
# (:func:`complex_refusal`), never converted as if the trailing pair were an axis of the
# data.


def _parts(importer, value):
    """(real, imaginary) of a complex tensor in its real form."""
    from tvm import relax

    bb = importer.block_builder
    pair = bb.emit(relax.op.split(value, 2, axis=-1))
    return tuple(
        bb.emit(relax.op.squeeze(bb.emit(relax.TupleGetItem(pair, i)), axis=[-1]))
        for i in (0, 1)
    )


def _pair(importer, real, imaginary):
    from tvm import relax

    bb = importer.block_builder
    return bb.emit(relax.op.concat(
        [bb.emit(relax.op.expand_dims(part, -1)) for part in (real, imaginary)], axis=-1
    ))


def _as_is(node, importer):
    # view_as_complex of (..., 2) and view_as_real of a complex tensor: the real form is
    # the same tensor.
    return importer.env[node.args[0]]


def _polar(node, importer):
    from tvm import relax

    bb = importer.block_builder
    magnitude, angle = (importer.env[arg] for arg in node.args[:2])
    return _pair(
        importer,
        bb.emit(relax.op.multiply(magnitude, bb.emit(relax.op.cos(angle)))),
        bb.emit(relax.op.multiply(magnitude, bb.emit(relax.op.sin(angle)))),
    )


def _multiply(name: str) -> Callable:
    def convert(node, importer):
        from tvm import relax

        left, right = node.args[:2]
        if not (_complex(left) or _complex(right)):
            return _in_torch_types(name)(node, importer)
        bb = importer.block_builder
        if _complex(left) and _complex(right):
            (ar, ai), (br, bi) = (_parts(importer, importer.env[x]) for x in (left, right))
            real = bb.emit(relax.op.subtract(
                bb.emit(relax.op.multiply(ar, br)), bb.emit(relax.op.multiply(ai, bi))
            ))
            imaginary = bb.emit(relax.op.add(
                bb.emit(relax.op.multiply(ar, bi)), bb.emit(relax.op.multiply(ai, br))
            ))
            return _pair(importer, real, imaginary)
        # A complex tensor times a real tensor or a number: both parts scale.
        value, scale = (left, right) if _complex(left) else (right, left)
        if hasattr(scale, "meta"):
            factor = bb.emit(relax.op.expand_dims(importer.env[scale], -1))
        else:
            real_type = {"complex64": "float32", "complex128": "float64"}[
                str(value.meta["val"].dtype).removeprefix("torch.")
            ]
            factor = relax.const(float(scale), real_type)
        return bb.emit(relax.op.multiply(importer.env[value], factor))

    return convert


def _unsqueeze(node, importer):
    from tvm import relax

    if not _complex(node.args[0]):
        return _default(importer, "unsqueeze.default")(node)
    dim = node.args[1]
    # Counted from the end, a dimension of the complex tensor sits one further from the
    # end in its real form.
    return importer.block_builder.emit(
        relax.op.expand_dims(importer.env[node.args[0]], dim - 1 if dim < 0 else dim)
    )


#: Copies to a device (``.to(x.device)``), which change nothing of a complex tensor here.
_MOVES = ("_to_copy.default", "to.dtype_layout", "to.dtype")


def _passing(name: str) -> Callable:
    """A conversion that changes nothing of a complex tensor's values (a copy to a device,
    ``type_as`` to its own type); the importer's own otherwise."""

    def convert(node, importer):
        source = node.args[0]
        if not _complex(source):
            return _default(importer, name)(node)
        value = getattr(node, "meta", {}).get("val")
        if value is None or not value.is_complex() or value.dtype != source.meta["val"].dtype:
            raise ValueError(f"{name} of a complex tensor into another type is not converted")
        return importer.env[source]

    return convert


CONVERSIONS.update({
    "view_as_complex.default": _as_is,
    "view_as_real.default": _as_is,
    "polar.default": _polar,
    "mul.Tensor": _multiply("mul.Tensor"),
    "unsqueeze.default": _unsqueeze,
    **{name: _passing(name) for name in _MOVES},
})


#: What takes a complex tensor and is converted for it.
_TAKES_COMPLEX = frozenset({
    "view_as_real.default", "mul.Tensor", "unsqueeze.default", *_MOVES,
    # Checks torch.export leaves in the graph; the importer drops them.
    "_assert_tensor_metadata.default",
})


def complex_refusal(exported) -> str:
    """Why ``exported`` (a torch ExportedProgram) cannot be converted with complex tensors
    as real pairs: an operator handed a complex tensor that is not converted for one, or a
    complex output; "" where nothing stands in the way."""
    for node in exported.graph.nodes:
        complex_inputs = [a for a in node.all_input_nodes if _complex(a)]
        if not complex_inputs:
            continue
        if node.op == "output":
            return "the model returns a complex tensor, which Relax has no type for"
        name = getattr(node.target, "__name__", str(node.target))
        if node.op != "call_function" or name not in _TAKES_COMPLEX:
            return (
                f"{name} is handed a complex tensor ({complex_inputs[0].name}); complex "
                f"tensors convert as real pairs only through {', '.join(sorted(_TAKES_COMPLEX))}"
            )
    return ""
