"""A network as the repository's process hands it over: module, inputs, its planner's plans.

A compile for a tracked repository runs in two sandboxed processes. The first imports the
repository's code (model file, pipeline, planner) and writes what it built with
:func:`save_imported`; the second never imports a line of the repository, reads that folder
back with :func:`load_imported` and does every step that produces a figure (lowering,
planning, building, checking, measuring). So a hostile model file can hand over a wrong
model, which is then measured honestly, but no figure of its own.

Nothing in the folder is believed. The module is TVM's JSON, checked before TVM parses it
against a list of what real networks hold (:mod:`planner.tvm.sources.module_check`): nothing that
reaches code outside the module (``system`` through ``T.call_extern``, a shared library
loaded by ``R.call_pure_packed``, C pasted in by a pragma) gets in, since the second process
runs the compiled kernels. Input names, shapes and dtypes are read off the entry function's
signature, bound weights are counted from the module's constants, and the repository
planner's offsets are checked for type here and against the problem by ``validate_plan``
before any build.

The one thing in the folder that is not checked against the module is ``reference.npz``:
the framework's own outputs (PyTorch eager) on the draws the second process checks every
build on, for checking TVM's stock build against (:func:`run_reference`). They come from
the repository's process, so they are believed only as far as they can do no harm beyond
that repository's own results: wrong values make its stock build look wrong (every strategy
fails) or right (as unchecked as it was before), never another repository's figures. Their
count, shapes and dtypes must be those of the stock build's outputs, or the check is
refused with the reason (:func:`planner.tvm.build.check.judge_reference`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from planner import npz_files
from planner.tvm.sources.module_check import UnsafeModule, check_module_json

# TVM is imported where it is used: a worker reads the file names here without loading it.

MODULE_FILE = "module.json"
#: The same network with its weights as inputs, for boards that keep them apart (micro).
UNBOUND_FILE = "module-unbound.json"
NETWORK_FILE = "network.json"
FIXED_FILE = "fixed.npz"
PLANS_FILE = "plans.json"
#: The framework's outputs by draw (see :func:`run_reference`).
REFERENCE_FILE = "reference.npz"
#: Float types numpy lacks (ml_dtypes'), handed over as float32 with their name beside.
NARROW_FLOATS = frozenset({
    "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu",
})
#: Every file the repository's process may hand over, and nothing else.
FILES = (MODULE_FILE, UNBOUND_FILE, NETWORK_FILE, FIXED_FILE, PLANS_FILE, REFERENCE_FILE)

MAX_NAME = 200
MAX_PLAN_BUFFERS = 1_000_000
#: What a written network may say it assumes (see Network.assumptions): a few sentences.
MAX_ASSUMPTIONS = 8
MAX_ASSUMPTION = 1000
#: What a handed-over framework's name is added to, so that every page says where it ran.
HANDED_OVER = "run in the import sandbox"
#: A member of ``reference.npz``: the draw's key (:func:`draw_key`), a dot, the output's index.
_REFERENCE_MEMBER = re.compile(r"^([0-9a-f]{32})\.([0-9]{1,4})$")
_FRAMEWORK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,39}$")


class ImportedError(ValueError):
    """What the repository's process handed over cannot be compiled; the message says why."""


@dataclass
class Imported:
    """A network read back from the folder, with the repository planner's plans."""

    network: Any  # planner.tvm.network.Network
    #: By strategy name: ``{"offsets": {buffer: offset}, "seconds": s}`` or ``{"error": ...}``.
    plans: dict[str, dict]


@dataclass
class Reference:
    """The framework's outputs on the draws a build is checked on, by :func:`draw_key`;
    ``missing`` says why there are none."""

    framework: str
    outputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    missing: str = ""


def draw_key(draw) -> str:
    """A draw's identity: a digest of every input's dtype, shape and bytes, so that outputs
    are matched to the draw they were computed on, not to a position in a list."""
    digest = hashlib.sha256()
    for value in draw:
        value = np.ascontiguousarray(value)
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()[:32]


def run_reference(framework, draws) -> Reference:
    """``framework`` (a :class:`~planner.tvm.network.Framework`) run on each of
    ``draws``, in the process that has it; its failure is a reason, never an exception."""
    if framework.run is None:
        return Reference(framework.name, missing=framework.missing)
    outputs = {}
    try:
        for draw in draws:
            outputs[draw_key(draw)] = [np.asarray(v) for v in framework.run(list(draw))]
    except Exception as exc:  # the framework failing is no verdict on TVM's build
        return Reference(
            framework.name, missing=f"{framework.name} failed: {type(exc).__name__}: {exc}"
        )
    return Reference(framework.name, outputs)


def save_imported(
    bound, folder: Path, *, unbound=None, plans: dict | None = None,
    reference: Reference | None = None,
) -> None:
    """Write ``bound`` (a Network, weights bound), ``unbound`` (the same with its weights as
    inputs), ``plans`` and ``reference`` (see :func:`run_reference`)."""
    import tvm

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODULE_FILE).write_text(tvm.ir.save_json(bound.mod))
    source = unbound or bound
    if unbound is not None:
        (folder / UNBOUND_FILE).write_text(tvm.ir.save_json(unbound.mod))
    meta = {
        "entry": source.entry,
        "shape_bounds": source.shape_bounds,
        "shape_limits": {k: list(v) for k, v in source.shape_limits.items()},
        "assumptions": list(source.assumptions),
        "input_ranges": {k: list(v) for k, v in source.input_ranges.items()},
        "data_inputs": source.data_inputs,
    }
    if reference is not None:
        meta["reference"] = {"framework": reference.framework}
        if reference.missing or not reference.outputs:
            meta["reference"]["missing"] = (reference.missing or "no outputs")[:500]
        else:
            members = {
                f"{key}.{index}": value
                for key, values in reference.outputs.items()
                for index, value in enumerate(values)
            }
            # npz holds numpy's own types only: bfloat16 and float8 outputs travel as
            # float32 (exactly), their type named beside them.
            narrow = {m: v.dtype.name for m, v in members.items() if v.dtype.name in NARROW_FLOATS}
            if narrow:
                meta["reference"]["dtypes"] = narrow
            np.savez(folder / REFERENCE_FILE, **{
                m: v.astype(np.float32) if m in narrow else v for m, v in members.items()
            })
    (folder / NETWORK_FILE).write_text(json.dumps(meta))
    if source.fixed_inputs:
        np.savez(folder / FIXED_FILE, **source.fixed_inputs)
    (folder / PLANS_FILE).write_text(json.dumps(plans or {}))


def load_imported(folder: Path, *, name: str, unbound: bool = False) -> Imported:
    """The network and plans in ``folder``, every field checked; ImportedError says why not.

    ``unbound``: the network with its weights as inputs, which only a micro job asks for.
    """
    from tvm import relax

    from planner.tvm.network import Network

    mod = load_module(read_handed(folder / (UNBOUND_FILE if unbound else MODULE_FILE)))
    meta = read_handed_json(folder / NETWORK_FILE, dict)
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
            or not all(is_int(v) for v in pair) or pair[0] >= pair[1]
        ):
            raise ImportedError(f"input_ranges[{key!r}] is not a range of one of the inputs")
        ranges[key] = (pair[0], pair[1])
    limits = {}
    for key, pair in _mapping(meta.get("shape_limits", {}), "shape_limits").items():
        # Only ever refuses points: a wrong limit can fail this model, never forge a figure.
        if (
            key not in bounds or not isinstance(pair, list) or len(pair) != 2
            or not is_int(pair[0]) or pair[0] < 1 or not isinstance(pair[1], str)
        ):
            raise ImportedError(f"shape_limits[{str(key)[:80]!r}] is not a limit of a symbol")
        limits[key] = (pair[0], pair[1][:MAX_NAME])
    assumptions = checked_assumptions(meta.get("assumptions", []))
    data_inputs = len(names)
    if unbound:
        data_inputs = meta.get("data_inputs")
        if not is_int(data_inputs) or not 1 <= data_inputs <= len(names):
            raise ImportedError("data_inputs is not a count of the inputs")
    fixed = _fixed_inputs(folder / FIXED_FILE, names, shapes, dtypes)
    network = Network(
        name, mod, names, shapes, dtypes, entry=entry, fixed_inputs=fixed,
        shape_bounds=bounds, data_inputs=data_inputs, input_ranges=ranges,
        bound_weights_bytes=constant_bytes(func), shape_limits=limits,
        assumptions=assumptions,
        framework=_framework(folder / REFERENCE_FILE, meta.get("reference")),
    )
    return Imported(network, _plans(folder / PLANS_FILE))


def load_module(text: str):
    """The IRModule in the handed-over JSON ``text``, checked first (:func:`check_module`);
    ImportedError where it is refused or does not load."""
    import tvm

    written_by = check_module(text)
    try:
        if written_by == tvm.__version__:
            from tvm_ffi.serialization import from_json_graph_str

            # tvm.ir.load_json first rewrites the JSON of older TVM releases in Python
            # (0.13 s for the zoo's DenseNet); what this TVM wrote needs none of it.
            mod = from_json_graph_str(text)
        else:
            mod = tvm.ir.load_json(text)
    except Exception as exc:
        raise ImportedError(f"the imported module does not load: {exc}") from None
    if not isinstance(mod, tvm.IRModule):
        raise ImportedError(f"the imported module is a {type(mod).__name__}, not an IRModule")
    return mod


def checked_assumptions(value: Any) -> tuple[str, ...]:
    """What a handed-over model says it assumes: only ever words in a Result, but written
    where a repository's code ran, so bounded."""
    if (
        not isinstance(value, list) or len(value) > MAX_ASSUMPTIONS
        or not all(isinstance(a, str) and len(a) <= MAX_ASSUMPTION for a in value)
    ):
        raise ImportedError("assumptions is not a short list of texts")
    return tuple(value)


def check_module(text: str) -> str:
    """ImportedError unless the module JSON ``text`` holds only what Peakwatch builds; the
    TVM version that wrote it."""
    try:
        return check_module_json(text)
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


def _framework(path: Path, meta: Any):
    """A framework whose ``run`` returns the outputs handed over for a draw; None where
    none was named (a folder from before they were handed over, or a model written for
    TVM), which leaves the stock build unchecked, as it says.

    Only names and the archive's form are checked here; whether the outputs are shaped as
    the stock build's is checked beside them (:func:`planner.tvm.build.check.judge_reference`).
    """
    from planner.tvm.network import Framework

    if meta is None:
        return None
    meta = _mapping(meta, "reference")
    name = meta.get("framework")
    if not isinstance(name, str) or not _FRAMEWORK_NAME.match(name):
        raise ImportedError("reference names no framework")
    named = f"{name} ({HANDED_OVER})"
    if "missing" in meta:
        why = _string(meta["missing"], "reference's missing", limit=500)
        return Framework(named, missing=f"{why} ({HANDED_OVER})")
    if not path.exists():
        return Framework(named, missing=f"{named} handed over no {REFERENCE_FILE}")
    try:
        arrays = npz_files.load_arrays(path)
    except npz_files.UnsafeArrays as exc:
        raise ImportedError(f"{REFERENCE_FILE} was refused: {exc}") from None
    by_draw: dict[str, dict[int, np.ndarray]] = {}
    for member, value in arrays.items():
        found = _REFERENCE_MEMBER.match(member)
        if found is None:
            raise ImportedError(f"{REFERENCE_FILE}: {member[:80]!r} is not a draw's output")
        by_draw.setdefault(found[1], {})[int(found[2])] = value
    outputs = {}
    for key, values in by_draw.items():
        if sorted(values) != list(range(len(values))):
            raise ImportedError(f"{REFERENCE_FILE}: the outputs of draw {key} are not numbered "
                                f"0..{len(values) - 1}")
        outputs[key] = [values[i] for i in range(len(values))]
    for member, name in _narrow_dtypes(meta.get("dtypes", {})).items():
        found = _REFERENCE_MEMBER.match(member)
        values = outputs.get(found[1], []) if found else []
        index = int(found[2]) if found else -1
        if not 0 <= index < len(values) or values[index].dtype != np.float32:
            raise ImportedError(f"{REFERENCE_FILE}: {member[:80]!r} is named {name} but "
                                "is no float32 output handed over")
        import ml_dtypes

        values[index] = values[index].astype(getattr(ml_dtypes, name))

    def run(draw: list[np.ndarray]) -> list[np.ndarray]:
        key = draw_key(draw)
        if key not in outputs:
            raise LookupError(f"no outputs were handed over for the draw {key}")
        return [value.copy() for value in outputs[key]]

    return Framework(named, run)


def _narrow_dtypes(value) -> dict[str, str]:
    """The reference's ``dtypes`` (member -> one of :data:`NARROW_FLOATS`), checked."""
    if not isinstance(value, dict) or len(value) > 10_000 or not all(
        isinstance(k, str) and isinstance(v, str) and v in NARROW_FLOATS
        for k, v in value.items()
    ):
        raise ImportedError("reference dtypes must map outputs to bfloat16 or float8 names")
    return value


def _plans(path: Path) -> dict[str, dict]:
    plans = {}
    for strategy, plan in read_handed_json(path, dict).items():
        if not isinstance(plan, dict):
            raise ImportedError(f"the plan of {strategy[:MAX_NAME]!r} is not an object")
        if "error" in plan:
            plans[strategy] = {"error": _string(plan["error"], "error", limit=20_000)}
            continue
        offsets = _mapping(plan.get("offsets"), f"offsets of {strategy}")
        if len(offsets) > MAX_PLAN_BUFFERS or not all(
            is_int(v) and 0 <= v < 2**62 for v in offsets.values()
        ):
            raise ImportedError(f"the offsets of {strategy!r} are not byte offsets")
        seconds = plan.get("seconds", 0.0)
        if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
            seconds = 0.0
        plans[strategy] = {"offsets": offsets, "seconds": float(seconds)}
    return plans


def read_handed(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportedError(f"{path.name} cannot be read: {exc}") from None


def read_handed_json(path: Path, kind: type):
    if not path.exists():
        return kind()
    try:
        value = json.loads(read_handed(path))
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
    if not all(is_int(v) and 0 < v < 2**40 for v in sizes.values()):
        raise ImportedError(f"{what} must map names to positive integers")
    return dict(sizes)


def _string(value: Any, what: str, *, limit: int = MAX_NAME) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ImportedError(f"{what} is not a name")
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
