"""Code a tracked repository brings: its model files, its compile pipeline, its own planner.

Everything here runs in whatever process calls it; the workers call it only inside the
sandboxed child of :mod:`planner.tvm.sandbox`, so repository code never runs in a worker.

Paths are resolved against the commit's checkout and nowhere else: an absolute path, or one
that leaves the tree (``..``, a symlink pointing out), is refused.

The pipeline contract (``[suite] pipeline = "compile/pipeline.py:passes"``)::

    def passes(target: tvm.target.Target) -> list[tvm.transform.Pass]

It is called once per model with the target being compiled for, and returns the passes (a
list, a single pass or a ``Sequential``) that run, in order and inside ``with target:``, on
the imported module, before Peakwatch lowers it to the point where it plans memory. The same
transformed module is what every strategy plans, ``tvm-stock`` included, so a pipeline
change moves every series of every model.

The planner contract (``strategies = ["repo:planning/mine.py:plan"]``)::

    def plan(problem: planner.Problem) -> Mapping[str, int]

It receives the plain problem (the tensors TVM's planner plans, with sizes, lifetimes and
alignments) and returns an offset per buffer id. The plan is validated (no overlap, every
buffer placed, aligned) before anything is built from it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner.tvm.torch_libraries import prepare_torch_libraries

#: Seconds a repository's planner may take for one model before its Result fails.
PLANNER_TIME_LIMIT = 60.0


class RepoCodeError(ValueError):
    """Repository code is missing, outside the tree, failed, or returned something unusable."""


def resolve_in_tree(root: Path, path: str) -> Path:
    """``path`` inside the checkout ``root``; a path that is absolute or leaves it is refused."""
    if not path or Path(path).is_absolute() or path.startswith("~"):
        raise RepoCodeError(f"{path!r}: paths in the manifest are relative to the repository")
    root = Path(root).resolve()
    candidate = (root / path).resolve()
    if not candidate.is_relative_to(root):
        raise RepoCodeError(f"{path!r} leaves the repository's tree")
    return candidate


def split_spec(spec: str, what: str) -> tuple[str, str]:
    """``path/to/file.py:function`` as (path, function)."""
    path, sep, function = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not function.isidentifier():
        raise RepoCodeError(f"{what} {spec!r}: expected path/to/file.py:function")
    return path, function


def import_file(path: Path):
    """Import the Python file ``path`` as a module of its own; ImportError says why not.

    torchvision, timm and transformers are prepared first, as the built-in sources prepare
    them (:mod:`planner.tvm.torch_libraries`), so the file may import them.
    """
    prepare_torch_libraries()
    # One module name per file, so two checkouts with a model.py each do not collide.
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"peakwatch_repo_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        why = f"{type(exc).__name__}: {exc}"
        if _peakwatchs_planner(exc):
            why += (
                " (in a job, `planner` is Peakwatch's own package, imported before the "
                "repository's code runs: a repository's planner/ cannot be imported under "
                "that name; rename it)"
            )
        raise ImportError(f"importing {path.name} failed: {why}") from exc
    return module


def _peakwatchs_planner(exc: Exception) -> bool:
    """Whether a failed import asked for a ``planner`` module: the job has imported
    Peakwatch's ``planner`` before the repository's code runs, so the name is Peakwatch's
    in a job (a checkout's ``workers/`` or ``dashboard/`` stays its own: a job imports
    neither)."""
    name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    return bool(name) and name.partition(".")[0] == "planner"


def load_function(root: Path | None, spec: str, what: str):
    """The function ``spec`` names in the checkout ``root``."""
    if root is None:
        raise RepoCodeError(f"{what} {spec!r} needs the repository's checkout")
    path, name = split_spec(spec, what)
    file = resolve_in_tree(root, path)
    if not file.is_file():
        raise RepoCodeError(f"{what} {spec!r}: no file {path} in the repository")
    try:
        module = import_file(file)
    except ImportError as exc:
        raise RepoCodeError(f"{what} {spec!r}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise RepoCodeError(f"{what} {spec!r}: {path} has no function {name!r}")
    return function


def run_pipeline(module, spec: str, root: Path | None, target):
    """``module`` after the repository's passes (see the module docstring)."""
    import tvm

    make_passes = load_function(root, spec, "pipeline")
    try:
        passes = make_passes(target)
    except Exception as exc:
        raise RepoCodeError(f"pipeline {spec!r} failed: {type(exc).__name__}: {exc}") from exc
    if isinstance(passes, tvm.transform.Pass):
        passes = [passes]
    try:
        passes = list(passes)
    except TypeError:
        raise RepoCodeError(
            f"pipeline {spec!r} returned {type(passes).__name__}; expected a list of passes"
        ) from None
    bad = [p for p in passes if not isinstance(p, tvm.transform.Pass)]
    if bad:
        raise RepoCodeError(
            f"pipeline {spec!r} returned {type(bad[0]).__name__} among its passes; "
            "expected tvm.transform.Pass objects"
        )
    try:
        with target:
            transformed = tvm.transform.Sequential(passes)(module)
    except Exception as exc:
        raise RepoCodeError(
            f"pipeline {spec!r}: a pass failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(transformed, tvm.IRModule):
        raise RepoCodeError(f"pipeline {spec!r} did not produce an IRModule")
    return transformed


class PlannerTimeout(RepoCodeError):
    pass


def run_planner(strategy, problem, root: Path | None, *, time_limit: float) -> dict[str, int]:
    """Offsets from the repository's planner, checked for shape (validation is the caller's)."""
    plan = load_function(root, f"{strategy.path}:{strategy.function}", "planner")
    result = _with_time_limit(lambda: plan(problem), time_limit, strategy.name)
    if not isinstance(result, Mapping):
        raise RepoCodeError(
            f"planner {strategy.name!r} returned {type(result).__name__}; expected a mapping "
            "from buffer id to offset"
        )
    offsets: dict[str, int] = {}
    for key, value in result.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise RepoCodeError(
                f"planner {strategy.name!r}: the offset of {key!r} is {value!r}, not an integer"
            )
        offsets[str(key)] = value
    return offsets


def _with_time_limit(call, seconds: float, name: str) -> Any:
    """``call()``, stopped after ``seconds`` (SIGALRM in the main thread, which is where the
    sandboxed child runs it; elsewhere the limit is the sandbox's wall clock)."""
    if threading.current_thread() is not threading.main_thread():
        return _call(call, name)

    def expire(signum, frame):
        raise PlannerTimeout(f"planner {name!r} ran past its time limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return _call(call, name)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _call(call, name: str):
    try:
        return call()
    except PlannerTimeout:
        raise
    except Exception as exc:
        raise RepoCodeError(f"planner {name!r} failed: {type(exc).__name__}: {exc}") from exc
