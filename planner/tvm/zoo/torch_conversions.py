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
"""

from __future__ import annotations

from collections.abc import Callable


def _scan_in_torch_dtype(name: str) -> Callable:
    def convert(node, importer):
        from tvm import relax

        if "out" in node.kwargs:
            raise ValueError(f"specifying out for {name} is not supported yet")
        data = importer.env[node.args[0]]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dtype = node.kwargs.get("dtype")
        if dtype is None:
            dtype = getattr(node.meta.get("val"), "dtype", None)
        dtype = None if dtype is None else str(dtype).removeprefix("torch.")
        return importer.block_builder.emit(getattr(relax.op, name)(data, dim, dtype))

    return convert


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
        return type(importer)._split(importer, node)
    data = importer.env[node.args[0]]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
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


#: ``custom_convert_map`` for ``from_exported_program``.
CONVERSIONS: dict[str, Callable] = {
    **{f"{name}.default": _scan_in_torch_dtype(name) for name in ("cumsum", "cumprod")},
    "split_with_sizes.default": _split_with_empty_pieces,
}
