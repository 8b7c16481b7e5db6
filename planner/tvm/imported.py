"""A network as the repository's process hands it over: module, inputs, its planner's plans.

A compile for a tracked repository runs in two sandboxed processes. The first imports the
repository's code (model file, pipeline, planner) and writes what it built with
:func:`save_imported`; the second never imports a line of the repository, reads that folder
back with :func:`load_imported` and does every step that produces a figure (lowering,
planning, building, checking, measuring). So a hostile model file can hand over a wrong
model, which is then measured honestly, but no figure of its own.

Nothing in the folder is believed. The module is TVM's JSON, checked before TVM parses it
against a list of what real networks hold (:mod:`planner.tvm.module_check`): nothing that
reaches code outside the module (``system`` through ``T.call_extern``, a shared library
loaded by ``R.call_pure_packed``, C pasted in by a pragma) gets in, since the second process
runs the compiled kernels. Input names, shapes and dtypes are read off the entry function's
signature, bound weights are counted from the module's constants, and the repository
planner's offsets are checked for type here and against the problem by ``validate_plan``
before any build.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner import npz_files
from planner.tvm.module_check import UnsafeModule, check_module_json

# TVM is imported where it is used: a worker reads the file names here without loading it.

MODULE_FILE = "module.json"
#: The same network with its weights as inputs, for boards that keep them apart (micro).
UNBOUND_FILE = "module-unbound.json"
NETWORK_FILE = "network.json"
FIXED_FILE = "fixed.npz"
PLANS_FILE = "plans.json"
#: Every file the repository's process may hand over, and nothing else.
FILES = (MODULE_FILE, UNBOUND_FILE, NETWORK_FILE, FIXED_FILE, PLANS_FILE)

MAX_NAME = 200
MAX_PLAN_BUFFERS = 1_000_000


class ImportedError(ValueError):
    """What the repository's process handed over cannot be compiled; the message says why."""


@dataclass
class Imported:
    """A network read back from the folder, with the repository planner's plans."""

    network: Any  # planner.tvm.zoo.network.Network
    #: By strategy name: ``{"offsets": {buffer: offset}, "seconds": s}`` or ``{"error": ...}``.
    plans: dict[str, dict]


def save_imported(bound, folder: Path, *, unbound=None, plans: dict | None = None) -> None:
    """Write ``bound`` (a Network, weights bound), ``unbound`` (the same with its weights as
    inputs) and ``plans``."""
    import tvm

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODULE_FILE).write_text(tvm.ir.save_json(bound.mod))
    source = unbound or bound
    if unbound is not None:
        (folder / UNBOUND_FILE).write_text(tvm.ir.save_json(unbound.mod))
    (folder / NETWORK_FILE).write_text(json.dumps({
        "entry": source.entry,
        "shape_bounds": source.shape_bounds,
        "shape_limits": {k: list(v) for k, v in source.shape_limits.items()},
        "input_ranges": {k: list(v) for k, v in source.input_ranges.items()},
        "data_inputs": source.data_inputs,
    }))
    if source.fixed_inputs:
        np.savez(folder / FIXED_FILE, **source.fixed_inputs)
    (folder / PLANS_FILE).write_text(json.dumps(plans or {}))


def load_imported(folder: Path, *, name: str, unbound: bool = False) -> Imported:
    """The network and plans in ``folder``, every field checked; ImportedError says why not.

    ``unbound``: the network with its weights as inputs, which only a micro job asks for.
    """
    import tvm
    from tvm import relax

    from planner.tvm.zoo.network import Network

    text = _read(folder / (UNBOUND_FILE if unbound else MODULE_FILE))
    check_module(text)
    try:
        mod = tvm.ir.load_json(text)
    except Exception as exc:
        raise ImportedError(f"the imported module does not load: {exc}") from None
    if not isinstance(mod, tvm.IRModule):
        raise ImportedError(f"the imported module is a {type(mod).__name__}, not an IRModule")
    meta = _json(folder / NETWORK_FILE, dict)
    entry = _string(meta.get("entry"), "entry")
    func = next((f for gv, f in mod.functions.items() if gv.name_hint == entry), None)
    if not isinstance(func, relax.Function):
        raise ImportedError(f"the imported module has no Relax function {entry!r}")
    bounds = _sizes(meta.get("shape_bounds", {}), "shape_bounds")
    names, shapes, dtypes = _signature(func, bounds)
    ranges = {}
    for key, pair in _mapping(meta.get("input_ranges", {}), "input_ranges").items():
        if (
            key not in names or not isinstance(pair, list) or len(pair) != 2
            or not all(_is_int(v) for v in pair) or pair[0] >= pair[1]
        ):
            raise ImportedError(f"input_ranges[{key!r}] is not a range of one of the inputs")
        ranges[key] = (pair[0], pair[1])
    limits = {}
    for key, pair in _mapping(meta.get("shape_limits", {}), "shape_limits").items():
        # Only ever refuses points: a wrong limit can fail this model, never forge a figure.
        if (
            key not in bounds or not isinstance(pair, list) or len(pair) != 2
            or not _is_int(pair[0]) or pair[0] < 1 or not isinstance(pair[1], str)
        ):
            raise ImportedError(f"shape_limits[{str(key)[:80]!r}] is not a limit of a symbol")
        limits[key] = (pair[0], pair[1][:MAX_NAME])
    data_inputs = len(names)
    if unbound:
        data_inputs = meta.get("data_inputs")
        if not _is_int(data_inputs) or not 1 <= data_inputs <= len(names):
            raise ImportedError("data_inputs is not a count of the inputs")
    fixed = _fixed_inputs(folder / FIXED_FILE, names, shapes, dtypes)
    network = Network(
        name, mod, names, shapes, dtypes, entry=entry, fixed_inputs=fixed,
        shape_bounds=bounds, data_inputs=data_inputs, input_ranges=ranges,
        bound_weights_bytes=constant_bytes(func), shape_limits=limits,
    )
    return Imported(network, _plans(folder / PLANS_FILE))


def check_module(text: str) -> None:
    """ImportedError unless the module JSON ``text`` holds only what Peakwatch builds."""
    try:
        check_module_json(text)
    except UnsafeModule as exc:
        raise ImportedError(str(exc)) from None


def constant_bytes(func) -> int:
    """Bytes of the constants (bound weights) in the Relax function ``func``."""
    from tvm import relax

    total = 0

    def visit(expr) -> None:
        nonlocal total
        if "Const" not in type(expr).__name__:
            return
        # 0.27 keeps a constant's tensor in ``value``, 0.25 and 0.26 in ``data``.
        for name in ("value", "data"):
            tensor = getattr(expr, name, None)
            if hasattr(tensor, "shape") and hasattr(tensor, "dtype"):
                count = int(np.prod([int(d) for d in tensor.shape], dtype=np.int64))
                total += count * np.dtype(str(tensor.dtype)).itemsize
                return

    relax.analysis.post_order_visit(func.body, visit)
    return total


def _signature(func, bounds: dict[str, int]):
    import tvm
    from tvm import relax

    names, shapes, dtypes = [], [], []
    for param in func.params:
        ty = param.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise ImportedError(f"input {param.name} is not a tensor of known rank")
        dims: list[int | str] = []
        for dim in ty.shape.values:
            if isinstance(dim, tvm.tirx.IntImm):
                dims.append(int(dim))
            elif isinstance(dim, tvm.tirx.Var) and dim.name in bounds:
                dims.append(dim.name)
            else:
                raise ImportedError(
                    f"input {param.name}: dimension {dim} is neither a number nor a symbol "
                    "with an upper bound"
                )
        names.append(param.name)
        shapes.append(tuple(dims))
        dtypes.append(str(ty.dtype))
    return names, shapes, dtypes


def _fixed_inputs(path: Path, names, shapes, dtypes) -> dict[str, np.ndarray]:
    if not path.exists():
        return {}
    fixed = {}
    try:
        arrays = npz_files.load_arrays(path)
    except npz_files.UnsafeArrays as exc:
        raise ImportedError(f"{FIXED_FILE} was refused: {exc}") from None
    for key, value in arrays.items():
        if key not in names:
            continue  # a weight of the unbound network, bound into this one
        index = names.index(key)
        if any(isinstance(d, str) for d in shapes[index]) or (
            tuple(value.shape) != shapes[index] or str(value.dtype) != dtypes[index]
        ):
            raise ImportedError(f"{FIXED_FILE}: {key} does not match the input's type")
        fixed[key] = value
    return fixed


def _plans(path: Path) -> dict[str, dict]:
    plans = {}
    for strategy, plan in _json(path, dict).items():
        if not isinstance(plan, dict):
            raise ImportedError(f"the plan of {strategy[:MAX_NAME]!r} is not an object")
        if "error" in plan:
            plans[strategy] = {"error": _string(plan["error"], "error", limit=20_000)}
            continue
        offsets = _mapping(plan.get("offsets"), f"offsets of {strategy}")
        if len(offsets) > MAX_PLAN_BUFFERS or not all(
            _is_int(v) and 0 <= v < 2**62 for v in offsets.values()
        ):
            raise ImportedError(f"the offsets of {strategy!r} are not byte offsets")
        seconds = plan.get("seconds", 0.0)
        if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
            seconds = 0.0
        plans[strategy] = {"offsets": offsets, "seconds": float(seconds)}
    return plans


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportedError(f"{path.name} cannot be read: {exc}") from None


def _json(path: Path, kind: type):
    if not path.exists():
        return kind()
    try:
        value = json.loads(_read(path))
    except (ValueError, RecursionError) as exc:
        raise ImportedError(f"{path.name} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise ImportedError(f"{path.name} holds a {type(value).__name__}, not a {kind.__name__}")
    return value


def _mapping(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ImportedError(f"{what} is not an object")
    return value


def _sizes(value: Any, what: str) -> dict[str, int]:
    sizes = _mapping(value, what)
    if not all(_is_int(v) and 0 < v < 2**40 for v in sizes.values()):
        raise ImportedError(f"{what} must map names to positive integers")
    return dict(sizes)


def _string(value: Any, what: str, *, limit: int = MAX_NAME) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ImportedError(f"{what} is not a name")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
