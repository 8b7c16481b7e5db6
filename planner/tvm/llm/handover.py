"""An LLM deployment handed from a repository's process to the compile (planner.tvm.job).

The import phase runs the repository's model file, which returns an
:class:`~planner.tvm.llm.decoders.LLMDeployment`; it writes, for each point of the model's shape
axis (context window x prefill chunk), a folder of its own:

- ``module.json``: the deployment's module, every function of it, as TVM writes it; checked
  by :mod:`planner.tvm.sources.module_check` before TVM reads it, as any handed-over module;
- ``params.npz``: the weights, in the order of the module's parameters;
- ``llm.json``: the name, the :class:`~planner.tvm.llm.decoders.DecoderConfig`, the parameter
  names and the framework's runs (the token ids of each and how many logits it gave);
- ``expected.npz``: those logits, by run.

The compile phase imports nothing of the repository: it reads the folder back, every field
checked (:func:`load`), and replays the framework's logits for the tokens it checks on. A
folder that does not hold what it says is an :class:`~planner.tvm.sources.handover.ImportedError`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

from planner import npz_files
from planner.tvm.sources.handover import (
    ImportedError,
    checked_assumptions,
    is_int,
    load_module,
    read_handed,
    read_handed_json,
)

INDEX_FILE = "llm-points.json"
META_FILE = "llm.json"
MODULE_FILE = "module.json"
PARAMS_FILE = "params.npz"
EXPECTED_FILE = "expected.npz"
#: The symbols an LLM deployment's shape axis may have: each is a field of its config.
AXIS_SYMBOLS = ("context_window", "prefill_chunk")
MAX_RUNS = 16
MAX_ERROR = 2000
MAX_TOKENS = 1 << 16


def handover_files(points: int) -> list[str]:
    """The files, relative to the folder, a deployment at ``points`` points is handed over in."""
    return [INDEX_FILE, *(
        f"{index}/{name}" for index in range(points)
        for name in (META_FILE, MODULE_FILE, PARAMS_FILE, EXPECTED_FILE)
    )]


def is_deployment(folder: Path) -> bool:
    """Whether the import phase handed over an LLM deployment in ``folder``."""
    return (folder / INDEX_FILE).is_file()


def save(deployments: list, points: list[dict[str, int]], folder: Path, *, seed: int,
         errors: dict[int, str] | None = None) -> None:
    """Each of ``deployments`` (at the matching one of ``points``) in a folder of its own,
    with the framework's logits for the tokens :func:`planner.tvm.llm.deployment.scenario_tokens`
    checks the builds on; ``errors``: why the deployment at a point (by index, None in
    ``deployments``) could not be built, which fails that point alone."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, deployment in enumerate(deployments):
        if deployment is not None:
            _save_one(deployment, folder / str(index), seed)
    (folder / INDEX_FILE).write_text(json.dumps({
        "points": [dict(p) for p in points],
        "errors": {str(i): text[:MAX_ERROR] for i, text in (errors or {}).items()},
    }))


def _save_one(deployment, folder: Path, seed: int) -> None:
    import tvm

    from planner.tvm.llm.deployment import reference_runs, scenario_tokens

    folder.mkdir(parents=True)
    (folder / MODULE_FILE).write_text(tvm.ir.save_json(deployment.mod))
    np.savez(folder / PARAMS_FILE, *deployment.params)
    meta: dict[str, Any] = {
        "name": deployment.name,
        "config": asdict(deployment.config),
        "param_names": list(deployment.param_names),
        "functions": list(deployment.functions),
        "assumptions": list(deployment.assumptions),
    }
    reference = deployment.reference
    if reference is not None:
        runs = reference_runs(scenario_tokens(deployment.config, seed))
        try:
            outputs = [[np.asarray(v, dtype=np.float32) for v in reference.run(p, s)]
                       for p, s in runs]
        except Exception as exc:  # the framework failing is no verdict on TVM's build
            meta["reference"] = {
                "name": reference.name,
                "missing": f"{reference.name} failed: {type(exc).__name__}: {exc}"[:500],
            }
        else:
            meta["reference"] = {
                "name": reference.name,
                "runs": [{"prompt": p, "steps": s, "outputs": len(o)}
                         for (p, s), o in zip(runs, outputs, strict=True)],
            }
            np.savez(folder / EXPECTED_FILE, **{
                f"run{i}.{k}": value for i, run in enumerate(outputs)
                for k, value in enumerate(run)
            })
    (folder / META_FILE).write_text(json.dumps(meta))


def index(folder: Path) -> tuple[list[dict[str, int]], dict[int, str]]:
    """The points the folder holds a deployment for, in order, and why the import could
    not build the deployment at some of them, by index (only ever fails those points)."""
    data = read_handed_json(folder / INDEX_FILE, dict)
    raw = data.get("points")
    if not isinstance(raw, list) or not 1 <= len(raw) <= 64:
        raise ImportedError(f"{INDEX_FILE} lists no points")
    points = []
    for point in raw:
        if not isinstance(point, dict) or not set(point) <= set(AXIS_SYMBOLS) or not all(
            is_int(v) and 0 < v < 2**31 for v in point.values()
        ):
            raise ImportedError(f"{INDEX_FILE}: {str(point)[:200]} is not a point of "
                                f"{' and '.join(AXIS_SYMBOLS)}")
        points.append(dict(point))
    errors = data.get("errors", {})
    if not isinstance(errors, dict) or not all(
        isinstance(k, str) and k.isdigit() and int(k) < len(points)
        and isinstance(v, str) and len(v) <= MAX_ERROR for k, v in errors.items()
    ):
        raise ImportedError(f"{INDEX_FILE}: errors is not a text by point")
    return points, {int(k): v for k, v in errors.items()}


def load(folder: Path, index: int, point: dict[str, int], *, name: str):
    """The deployment handed over for ``point`` (the ``index``-th), every field checked."""

    from planner.tvm.llm.decoders import (
        FUNCTIONS,
        DecoderConfig,
        LLMDeployment,
        LLMError,
        Reference,
    )

    where = folder / str(index)
    meta = read_handed_json(where / META_FILE, dict)
    try:
        config = _config(meta.get("config"), DecoderConfig)
    except (LLMError, TypeError) as exc:
        raise ImportedError(f"the deployment's config is refused: {exc}") from None
    for symbol, value in point.items():
        if getattr(config, symbol) != value:
            raise ImportedError(
                f"the deployment was built with {symbol} {getattr(config, symbol)}, "
                f"not the point's {value}"
            )
    mod = load_module(read_handed(where / MODULE_FILE))
    functions = meta.get("functions")
    declared = {gv.name_hint for gv in mod.get_global_vars()}
    if (
        not isinstance(functions, list) or not set(functions) <= set(FUNCTIONS)
        or not {"prefill", "decode", "create_paged_kv_cache"} <= set(functions)
        or not set(functions) <= declared
    ):
        raise ImportedError("the deployment's functions are not those of its module")
    try:
        params = list(npz_files.positional(npz_files.load_arrays(where / PARAMS_FILE)))
    except npz_files.UnsafeArrays as exc:
        raise ImportedError(str(exc)) from None
    _check_params(mod, params)
    names = meta.get("param_names")
    if not isinstance(names, list) or len(names) != len(params) or not all(
        isinstance(n, str) and len(n) <= 200 for n in names
    ):
        raise ImportedError("param_names does not name every parameter")
    assumptions = checked_assumptions(meta.get("assumptions", []))
    reference = _reference(where, meta.get("reference"), config, Reference)
    return LLMDeployment(
        name=name, config=config, mod=mod, param_names=names, params=params,
        reference=reference, assumptions=assumptions, functions=tuple(functions),
    )


def _config(raw: Any, kind):
    if not isinstance(raw, dict) or set(raw) != {f.name for f in fields(kind)}:
        raise ImportedError("the deployment's config does not have a decoder's fields")
    for key in ("rope_theta", "rms_eps"):
        if not isinstance(raw[key], (int, float)) or isinstance(raw[key], bool):
            raise ImportedError(f"the deployment's config: {key} is not a number")
    # Every other field is checked by the config itself (types, sizes, page size, dtype).
    return kind(**raw)


def _check_params(mod, params: list[np.ndarray]) -> None:
    """Each weight is what ``prefill``'s parameter tuple declares, in number, shape and type."""
    import tvm

    prefill = next(f for gv, f in mod.functions.items() if gv.name_hint == "prefill")
    declared = prefill.params[-1].ty if prefill.params else None
    if not isinstance(declared, tvm.ir.TupleType) or len(declared.fields) != len(params):
        raise ImportedError(f"{len(params)} weights for the parameters prefill declares")
    for index, (info, value) in enumerate(zip(declared.fields, params, strict=True)):
        shape = getattr(info, "shape", None)
        dims = getattr(shape, "values", None)
        if dims is None or tuple(int(d) for d in dims) != tuple(value.shape) or (
            str(info.dtype) != str(value.dtype)
        ):
            raise ImportedError(f"weight {index} does not match the parameter prefill declares")


def _reference(folder: Path, raw: Any, config, kind):
    """A framework whose ``run`` replays the logits handed over for the same tokens; None
    where the deployment named none."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not (
        0 < len(raw["name"]) <= 40
    ):
        raise ImportedError("the deployment's reference has no name")
    name = raw["name"]
    if "missing" in raw:
        reason = str(raw["missing"])[:500]

        def failed(prompt, steps):
            raise RuntimeError(reason)

        return kind(name, failed)
    runs = raw.get("runs")
    if not isinstance(runs, list) or not 1 <= len(runs) <= MAX_RUNS:
        raise ImportedError("the deployment's reference holds no runs")
    try:
        arrays = npz_files.load_arrays(folder / EXPECTED_FILE)
    except npz_files.UnsafeArrays as exc:
        raise ImportedError(str(exc)) from None
    replay: dict[tuple, list[np.ndarray]] = {}
    for index, run in enumerate(runs):
        tokens = (run.get("prompt"), run.get("steps")) if isinstance(run, dict) else (None, None)
        count = run.get("outputs") if isinstance(run, dict) else None
        if not all(
            isinstance(t, list) and len(t) <= MAX_TOKENS
            and all(is_int(v) and 0 <= v < config.vocab for v in t) for t in tokens
        ) or not is_int(count) or not 0 < count <= MAX_TOKENS:
            raise ImportedError(f"the deployment's reference run {index} is not token ids")
        outputs = []
        for k in range(count):
            value = arrays.get(f"run{index}.{k}")
            if value is None or value.dtype != np.float32 or value.size != config.vocab:
                raise ImportedError(
                    f"the deployment's reference run {index} has no logits {k} of the vocabulary"
                )
            outputs.append(value.reshape(-1))
        replay[(tuple(tokens[0]), tuple(tokens[1]))] = outputs

    def run(prompt, steps):
        key = (tuple(prompt), tuple(steps))
        if key not in replay:
            raise RuntimeError("the repository's process ran the framework on other tokens")
        return replay[key]

    return kind(name, run)
