"""Where networks come from: the built-in zoo, ONNX files and Python factories.

A model source is one of

- ``zoo:NAME`` with keyword parameters, e.g. ``zoo:small_cnn`` with ``{"channels": 16}``;
  the tracked repository's manifest changes those parameters from commit to commit, which is
  what moves its memory up and down;
- ``path/to/model.onnx``, with an optional ``input_shapes`` parameter for inputs whose shape
  is symbolic in the file; a ``dim_param`` named like a symbol of the shape axis stays
  symbolic (:mod:`planner.tvm.sources.onnx_file`);
- ``torchvision:NAME``: one of torchvision's classification networks with random weights,
  parameters ``image`` (default 64) and the builder's keywords
  (:mod:`planner.tvm.sources.torchvision_models`);
- ``timm:NAME``: one of timm's image classification networks with random weights (GhostNet,
  HRNet and others torchvision lacks), same parameters (:mod:`planner.tvm.sources.timm_models`);
- ``transformers:gpt2`` and ``transformers:bert``: a small GPT-2 decoder and BERT encoder
  from Hugging Face transformers with random weights, parameters ``seq``, ``dynamic`` (the
  sequence length symbolic, named ``seq``, bounded by ``seq``) and the model's sizes
  (:mod:`planner.tvm.sources.transformers_models`);
- ``path/to/module.py:factory``, called with the parameters; it returns a
  :class:`~planner.tvm.network.Network`, ``(torch.nn.Module, example inputs)`` or
  ``(module, example inputs, dynamic_shapes)`` with ``torch.export.Dim`` named like the
  shape axis's symbols (:mod:`planner.tvm.sources.python_file`).

A shape axis's ``dims`` (:attr:`planner.shapes.ShapeAxis.dims`) make the dimensions it names
symbolic in a model file or an ONNX file that leaves them static.

Relative paths are resolved against ``base_dir`` (the tracked checkout), else the current
directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.shapes import ShapeAxis

if TYPE_CHECKING:
    from planner.tvm.network import Network


class ModelSourceError(ValueError):
    """A model source that cannot be built: unknown name, bad parameters, unreadable file."""


@dataclass(frozen=True)
class ModelSource:
    """Where a network comes from, in the words a manifest uses."""

    source: str
    params: dict[str, Any] = field(default_factory=dict)
    #: How its mixtures of experts are computed (:data:`planner.tvm.sources.experts.FORMS`).
    moe: str = "dense"

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        shown = f"{self.source}({args})" if args else self.source
        return shown if self.moe == "dense" else f"{shown} [moe {self.moe}]"


#: The parameter that sets the bound of each symbolic dimension a library source builds
#: (``seq`` sizes GPT-2's position table), and the parameter that makes it symbolic.
AXIS_PARAMETERS = {
    "transformers": ({"seq": "seq"}, "dynamic"),
    "torchvision": ({"h": "image", "w": "image"}, "dynamic"),
}


def build_network(
    source: ModelSource,
    *,
    base_dir: Path | None = None,
    axis: ShapeAxis | None = None,
) -> Network:
    """Return the :class:`~planner.tvm.network.Network` that ``source`` names, its mixtures
    of experts computed in ``source.moe``'s form (see :func:`_build_network`)."""
    from planner.tvm.sources.experts import FORM, FORMS

    if source.moe not in FORMS:
        raise ModelSourceError(
            f"unknown form of mixture of experts {source.moe!r}: one of {', '.join(FORMS)}"
        )
    token = FORM.set(source.moe)
    try:
        return _build_network(source, base_dir=base_dir, axis=axis)
    finally:
        FORM.reset(token)


def _build_network(
    source: ModelSource,
    *,
    base_dir: Path | None = None,
    axis: ShapeAxis | None = None,
) -> Network:
    """Return the :class:`~planner.tvm.network.Network` that ``source`` names.

    ``axis``: the shape axis the network is built for. A library source that sizes a
    dimension by a parameter (:data:`AXIS_PARAMETERS`) and a Python factory with a parameter
    named after a symbol get the axis's bound there, unless the source gives one itself: a
    model is then built for the range it is measured over. A model file or an ONNX file
    takes its symbols' names and bounds from it (and their places, where it gives ``dims``).
    """
    text = source.source
    bounds = dict(axis.bounds) if axis is not None else {}
    file_part, sep, factory = text.rpartition(":")
    from_python = bool(sep) and file_part.endswith(".py") and factory.isidentifier()
    if axis is not None and axis.dims and not (from_python or text.endswith(".onnx")):
        raise ModelSourceError(
            f"{text} names its own symbols: dims (where a symbol is in the inputs) is for a "
            "model file (path.py:function) or an .onnx file"
        )
    if text.startswith("zoo:"):
        return _build_zoo(text.removeprefix("zoo:"), source.params)
    library, sep, name = text.partition(":")
    if sep and library in ("torchvision", "timm", "transformers"):
        return _build_library(library, name, _sized_by_axis(library, source.params, bounds))
    if text.endswith(".onnx"):
        return _build_onnx(_resolve(text, base_dir), source.params, axis)
    if from_python:
        return _build_python(_resolve(file_part, base_dir), factory, source.params, axis)
    from planner.tvm.zoo import zoo_names

    raise ModelSourceError(
        f"unsupported model source {text!r}: expected zoo:NAME with NAME one of "
        f"{', '.join(zoo_names())}, torchvision:NAME, timm:NAME, transformers:gpt2|bert, "
        "a path to an .onnx file, or path/to/module.py:factory"
    )


def _build_zoo(name: str, params: dict[str, Any]) -> Network:
    from planner.tvm.zoo import ZOO, zoo_names

    try:
        factory = ZOO[name]
    except KeyError:
        raise ModelSourceError(
            f"unknown zoo model {name!r}; known: {', '.join(zoo_names())}"
        ) from None
    try:
        return factory(**params)
    except (TypeError, ValueError) as exc:
        raise ModelSourceError(f"bad parameters for zoo:{name}: {exc}") from None


def _build_onnx(path: Path, params: dict[str, Any], axis: ShapeAxis | None) -> Network:
    from planner.tvm.sources.onnx_file import OnnxImportError, load_onnx

    unknown = set(params) - {"input_shapes"}
    if unknown:
        raise ModelSourceError(
            f"bad parameters for {path.name}: ONNX sources take only input_shapes, "
            f"not {', '.join(sorted(unknown))}"
        )
    try:
        return load_onnx(path, params.get("input_shapes"), axis=axis)
    except OnnxImportError as exc:
        raise ModelSourceError(str(exc)) from exc


def _build_library(library: str, name: str, params: dict[str, Any]) -> Network:
    """``torchvision:NAME``, ``timm:NAME`` or ``transformers:NAME``: the library's model with
    random weights."""
    if library == "transformers":
        from planner.tvm.sources.transformers_models import TransformersError as LibraryError
        from planner.tvm.sources.transformers_models import transformers_network as build
    elif library == "timm":
        from planner.tvm.sources.timm_models import TimmError as LibraryError
        from planner.tvm.sources.timm_models import timm_network as build
    else:
        from planner.tvm.sources.torchvision_models import TorchvisionError as LibraryError
        from planner.tvm.sources.torchvision_models import torchvision_network as build
    try:
        return build(name, **params)
    except TypeError as exc:
        raise ModelSourceError(f"bad parameters for {library}:{name}: {exc}") from None
    except LibraryError as exc:
        raise ModelSourceError(str(exc)) from exc


def _sized_by_axis(
    library: str, params: dict[str, Any], bounds: dict[str, int] | None
) -> dict[str, Any]:
    sizes, dynamic = AXIS_PARAMETERS.get(library, ({}, ""))
    derived: dict[str, Any] = {}
    for symbol, bound in (bounds or {}).items():
        if symbol in sizes:
            # h and w share ``image``: the larger bound holds both.
            derived[sizes[symbol]] = max(bound, derived.get(sizes[symbol], 0))
    if not derived:
        return params
    return {dynamic: True, **derived, **params}


def _build_python(
    path: Path, factory: str, params: dict[str, Any], axis: ShapeAxis | None
) -> Network:
    from planner.tvm.sources.python_file import PythonSourceError, load_factory

    try:
        return load_factory(path, factory, params, axis=axis)
    except PythonSourceError as exc:
        raise ModelSourceError(str(exc)) from exc


def _resolve(path: str, base_dir: Path | None) -> Path:
    """Inside a tracked checkout, only the checkout; on the command line, any path."""
    if base_dir is not None:
        from planner.tvm.repo_code import RepoCodeError, resolve_in_tree

        try:
            return resolve_in_tree(base_dir, path)
        except RepoCodeError as exc:
            raise ModelSourceError(f"model source {exc}") from None
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    return Path.cwd() / candidate
