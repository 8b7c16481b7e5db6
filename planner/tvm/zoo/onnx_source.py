"""Networks from ONNX files, imported with ``tvm.relax.frontend.onnx``.

Weights stay function parameters (``keep_params_in_input=True``), so the planner sees the
same kind of module as for the zoo; their trained values are kept as fixed inputs.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.tvm.zoo.network import Framework, Network, from_imported

log = logging.getLogger(__name__)


class OnnxImportError(ValueError):
    """The file is missing, not ONNX, or uses something the importer cannot handle."""


def load_onnx(path: Path, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Network:
    """Import the ONNX model at ``path``.

    ``input_shapes`` fixes graph inputs whose shape has symbolic dimensions (a batch size
    named ``N``, say); the planner needs every shape to be static.
    """
    try:
        import onnx
    except ImportError as exc:
        raise OnnxImportError("ONNX sources need the onnx package installed") from exc
    from tvm.relax.frontend.onnx import from_onnx

    if not path.is_file():
        raise OnnxImportError(f"no ONNX file at {path}")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf reports a corrupt file with several exception types
        raise OnnxImportError(f"{path.name} is not a readable ONNX model: {exc}") from exc
    if not model.graph.node:
        raise OnnxImportError(f"{path.name} is not a readable ONNX model: it has no nodes")

    shapes, dtypes = _graph_inputs(model, dict(input_shapes or {}), path.name)
    try:
        with warnings.catch_warnings():
            # The importer warns about every input name it sanitises; that is not news.
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=True)
    except Exception as exc:  # unsupported operators surface as many exception types
        raise OnnxImportError(
            f"TVM's ONNX importer cannot import {path.name}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
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
    model: Any, overrides: dict[str, Sequence[int]], filename: str
) -> tuple[dict[str, list[int]], dict[str, str]]:
    import onnx

    # Old exporters list the initialisers among the graph inputs too.
    initialisers = {init.name for init in model.graph.initializer}
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, str] = {}
    for value in model.graph.input:
        if value.name in initialisers:
            continue
        tensor_type = value.type.tensor_type
        dtypes[value.name] = str(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        if value.name in overrides:
            shapes[value.name] = [int(d) for d in overrides.pop(value.name)]
            continue
        dims = []
        for dim in tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                raise OnnxImportError(
                    f"{filename}: input {value.name!r} has a symbolic dimension "
                    f"{dim.dim_param or '?'}; give its shape as input_shapes="
                    f"{{{value.name!r}: [...]}}"
                )
            dims.append(int(dim.dim_value))
        shapes[value.name] = dims
    if overrides:
        raise OnnxImportError(
            f"{filename} has no input named {', '.join(sorted(overrides))}; "
            f"its inputs are {', '.join(shapes)}"
        )
    return shapes, dtypes
