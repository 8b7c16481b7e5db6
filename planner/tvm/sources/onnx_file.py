"""Networks from ONNX files, imported with ``tvm.relax.frontend.onnx``.

Weights stay function parameters (``keep_params_in_input=True``), so the planner sees the
same kind of module as for the zoo; their trained values are kept as fixed inputs.

An input dimension whose ``dim_param`` is named like a symbol of the shape axis stays
symbolic under that name, bounded by the axis; so does one the axis's ``dims`` names
(``dims = { seq = "input_ids:1" }``), whatever the file says of it. Any other symbolic
dimension needs a size (``input_shapes``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.shapes import ShapeAxis, ShapeError, parse_place
from planner.tvm.network import Framework, Network, from_imported, symbolic_network

log = logging.getLogger(__name__)


class OnnxImportError(ValueError):
    """The file is missing, not ONNX, or uses something the importer cannot handle."""


def load_onnx(
    path: Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    axis: ShapeAxis | None = None,
) -> Network:
    """Import the ONNX model at ``path``.

    ``input_shapes`` fixes graph inputs whose shape has symbolic dimensions (a batch size
    named ``N``, say). The symbols of the shape ``axis`` stay symbolic, where a
    ``dim_param`` has their name or its ``dims`` put them (see the module docstring); every
    other dimension must be static.
    """
    try:
        import onnx
    except ImportError as exc:
        raise OnnxImportError("ONNX sources need the onnx package installed") from exc
    from tvm.relax.frontend.onnx import from_onnx

    from planner.tvm.sources.infinite_fills import finite_fills

    if not path.is_file():
        raise OnnxImportError(f"no ONNX file at {path}")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf reports a corrupt file with several exception types
        raise OnnxImportError(f"{path.name} is not a readable ONNX model: {exc}") from exc
    if not model.graph.node:
        raise OnnxImportError(f"{path.name} is not a readable ONNX model: it has no nodes")

    shapes, dtypes, symbols = _graph_inputs(model, dict(input_shapes or {}), path.name, axis)
    try:
        with warnings.catch_warnings():
            # The importer warns about every input name it sanitises; that is not news.
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=True)
        mod = finite_fills(mod)  # a ConstantOfShape of -inf, as torch's full of -inf
    except Exception as exc:  # unsupported operators surface as many exception types
        raise OnnxImportError(
            f"TVM's ONNX importer cannot import {path.name}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        if symbols and axis is not None:
            bounds = {s: axis.bounds[s] for s in symbols}
            network = symbolic_network(path.stem, mod, "main", bounds)
        else:
            network = from_imported(path.stem, mod, entry="main")
    except ValueError as exc:
        raise OnnxImportError(f"{path.name}: {exc}") from exc
    return replace(network, framework=_onnxruntime(model, network))


def _onnxruntime(model, network: Network) -> Framework:
    """onnxruntime on the same file, fed the data inputs by the graph's input names."""
    try:
        import onnxruntime
    except ImportError:
        return Framework("onnxruntime", missing="onnxruntime is not installed")
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in session.get_inputs()][: network.data_inputs]

    def run(inputs):
        return list(session.run(None, dict(zip(names, inputs, strict=True))))

    return Framework("onnxruntime", run)


def _graph_inputs(
    model: Any, overrides: dict[str, Sequence[int]], filename: str, axis: ShapeAxis | None
) -> tuple[dict[str, list], dict[str, str], list[str]]:
    """Each data input's shape (sizes, and a symbol where the axis takes the dimension) and
    dtype, and the axis's symbols in the order found."""
    import onnx
    import tvm

    symbols: dict[str, tvm.tirx.Var] = {}
    wanted = set(axis.bounds) if axis is not None else set()
    places = _places(axis)
    # Old exporters list the initialisers among the graph inputs too.
    initialisers = {init.name for init in model.graph.initializer}
    shapes: dict[str, list] = {}
    dtypes: dict[str, str] = {}
    data = [value for value in model.graph.input if value.name not in initialisers]
    for position, value in enumerate(data):
        tensor_type = value.type.tensor_type
        dtypes[value.name] = str(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        if value.name in overrides:
            shapes[value.name] = [int(d) for d in overrides.pop(value.name)]
            continue
        dims: list = []
        for index, dim in enumerate(tensor_type.shape.dim):
            named = places.pop((value.name, index), None)
            by_position = places.pop((position, index), None)
            symbol = named or by_position
            if symbol is None and dim.dim_param in wanted:
                symbol = dim.dim_param
            if symbol is not None:
                dims.append(symbols.setdefault(symbol, tvm.tirx.Var(symbol, "int64")))
                continue
            if not dim.HasField("dim_value"):
                param = dim.dim_param or "?"
                axis_hint = ""
                if axis is not None:
                    first = axis.symbols[0]
                    axis_hint = (
                        f"; or name the shape axis after it (shapes = {{ {param} = [...] }}), "
                        f'or say where {first} is: dims = {{ {first} = "{value.name}:{index}" }}'
                    )
                elif param.isidentifier():
                    axis_hint = (
                        f", or measure it at several sizes as a shape axis: shapes = "
                        f"{{ {param} = [...] }}"
                    )
                raise OnnxImportError(
                    f"{filename}: input {value.name!r} has a symbolic dimension {param} "
                    f"(dimension {index}); give its shape as input_shapes="
                    f"{{{value.name!r}: [...]}}{axis_hint}"
                )
            dims.append(int(dim.dim_value))
        shapes[value.name] = dims
    if overrides:
        raise OnnxImportError(
            f"{filename} has no input named {', '.join(sorted(overrides))}; "
            f"its inputs are {', '.join(shapes)}"
        )
    if places:
        (ref, index), symbol = next(iter(places.items()))
        inputs = ", ".join(
            f"{name} ({position}, {len(shape)} dimensions)"
            for position, (name, shape) in enumerate(shapes.items())
        )
        raise OnnxImportError(
            f"dims.{symbol} = '{ref}:{index}': {filename} has no input {ref!r} with a "
            f"dimension {index} (dimensions count from 0); its inputs: {inputs}"
        )
    missing = [s for s in (axis.symbols if axis is not None else []) if s not in symbols]
    if missing:
        params = _dim_params(data)
        raise OnnxImportError(
            f"{filename} has no input dimension named {missing[0]} for the shape axis "
            f"(its symbolic dimensions: {params or 'none'}): name that dim_param "
            f'{missing[0]}, or say where it is with dims = {{ {missing[0]} = "INPUT:DIM" }}'
        )
    return shapes, dtypes, list(symbols)


def _places(axis: ShapeAxis | None) -> dict[tuple[str | int, int], str]:
    """The symbol of each (input name or position, dimension) the axis's ``dims`` give."""
    places: dict[tuple[str | int, int], str] = {}
    for symbol, texts in (axis.dims if axis is not None else {}).items():
        for text in texts:
            try:
                places[parse_place(text, f"dims.{symbol}")] = symbol
            except ShapeError as exc:
                raise OnnxImportError(str(exc)) from None
    return places


def _dim_params(inputs) -> str:
    return ", ".join(
        f"{value.name}:{index} is {dim.dim_param}"
        for value in inputs
        for index, dim in enumerate(value.type.tensor_type.shape.dim)
        if dim.dim_param
    )
