"""The suite manifest a tracked repository commits: ``peakwatch.toml``.

    [suite]
    strategies = ["tvm-stock", "none", "greedy-by-size", "repo:planning/mine.py:plan"]
    boards = ["cpu"]
    pipeline = "compile/pipeline.py:passes"     # optional: Relax passes run before planning
    inputs = ["models/", "weights/"]            # accepted; the cache hashes the whole tree
    toolchains = ["apache-tvm==0.27.0.post1", "apache-tvm==0.26.0"]   # optional: TVMs to use
    branches = ["release/*"]                    # optional: pushes to these run too (read
                                                # on the default branch, whose always do)
    tolerance = { bytes = 4096, percent = 1.0, latency = 0.1 }   # optional: how much worse
                                                # a series may get before it alerts

    [[models]]
    name = "small-cnn"
    source = "zoo:small_cnn"
    params = { channels = 16, resolution = 32 }

    [[models]]
    name = "my-net"
    source = "models/net.py:build"              # a file of this repository, at this commit
    shapes = { h = [64, 256, 1024], w = "h" }   # optional: symbolic dimensions, measured
                                                # at each point (planner.shapes)

    [[models]]
    name = "encoder"
    source = "models/encoder.py:build"          # returns (module, example inputs)
    shapes = { seq = [64, 128, 512] }
    tolerance = { percent = 2 }                 # optional: this model's, over [suite]'s
    point_tolerance = { "seq=512" = { bytes = 65536 } }   # optional: one point's, over both
    moe = "grouped"                             # optional: mixtures of experts as a
                                                # grouped-GEMM deployment holds them
                                                # (default "dense": every expert, every token)
    dims = { seq = "input_ids:1" }              # optional: where each symbol is, for a
                                                # model that does not declare its own
                                                # torch.export.Dim or ONNX dim_param

Paths are relative to the repository: absolute paths and paths that leave the tree are
refused here, before anything runs. Toolchains (:mod:`planner.tvm.toolchain`) are exact
apache-tvm releases, wheels or source folders; ``""`` (the default) is the worker's own TVM.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from planner import shapes as shape_axis
from planner.job_spec import MOE_FORMS
from planner.shapes import ShapeAxis, ShapeError, parse_dims, parse_shapes
from planner.tvm.repo_code import RepoCodeError, split_spec
from planner.tvm.toolchain import ToolchainError, parse_spec

MANIFEST_PATH = "peakwatch.toml"
DEFAULT_STRATEGIES = ("tvm-stock", "none", "greedy-by-size")
DEFAULT_BOARDS = ("cpu",)
#: The worker's own environment.
DEFAULT_TOOLCHAINS = ("",)
#: Model names appear in URLs and file names: letters, digits, ``-``, ``_`` and ``.``.
MODEL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Tolerance:
    """How much worse a series may get before it alerts, as ``peakwatch.toml`` says it in
    ``[suite]``, a model's entry or one of its points: planned bytes may grow by ``bytes``
    or by ``percent`` of the baseline, whichever allows more, and a median latency must
    rise by at least ``latency`` (a fraction: 0.1 is 10%). A field left out is the next
    wider level's (point, then model, then suite, then the repository's settings)."""

    bytes: int | None = None
    percent: float | None = None
    latency: float | None = None

    FIELDS = ("bytes", "percent", "latency")

    def over(self, wider: Tolerance) -> Tolerance:
        """This tolerance, its gaps filled from ``wider``."""
        return Tolerance(**{
            name: getattr(self, name) if getattr(self, name) is not None
            else getattr(wider, name)
            for name in self.FIELDS
        })

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS
                if getattr(self, name) is not None}

    def __bool__(self) -> bool:
        return bool(self.to_json())


def _tolerance(raw: Any, where: str) -> Tolerance:
    if not isinstance(raw, dict):
        raise ManifestError(
            f"{where}: a tolerance is a table, e.g. {{ bytes = 4096, percent = 1.5, "
            "latency = 0.1 }"
        )
    unknown = sorted(set(raw) - set(Tolerance.FIELDS))
    if unknown:
        raise ManifestError(
            f"{where}: unknown tolerance {', '.join(map(str, unknown))}; a tolerance has "
            "bytes, percent and latency"
        )
    values = {}
    for name, value in raw.items():
        whole = name == "bytes"
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float) \
                or value < 0 or value != value or value == float("inf"):
            kind = "a whole number of bytes" if whole else "a number"
            raise ManifestError(f"{where}: tolerance {name} must be {kind}, 0 or more")
        values[name] = int(value) if whole else float(value)
    return Tolerance(**values)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    source: str
    params: dict[str, Any] = field(default_factory=dict)
    #: The model's shape axis, with its ``dims`` where the manifest gives them; None when
    #: its shapes are fixed (one compile, no point).
    shapes: ShapeAxis | None = None
    #: Its alert tolerance, and each point's (by label), as the manifest gives them.
    tolerance: Tolerance = Tolerance()
    point_tolerance: tuple[tuple[str, Tolerance], ...] = ()
    #: How its mixtures of experts are computed: ``dense`` (every expert on every token)
    #: or ``grouped`` (as a grouped-GEMM deployment holds them).
    moe: str = "dense"

    @property
    def points(self) -> tuple[dict[str, int], ...]:
        """The shape points measured: ``({},)`` for a model without an axis, so every
        model is a list of points and one without an axis has the one, empty, point."""
        return self.shapes.points if self.shapes else ({},)

    @property
    def labels(self) -> list[str]:
        return [shape_axis.label(point) for point in self.points]

    @property
    def is_zoo(self) -> bool:
        return self.source.startswith("zoo:")

    @property
    def path(self) -> str | None:
        """The repository file the model is read from; None for zoo models."""
        if self.is_zoo:
            return None
        file_part, sep, factory = self.source.rpartition(":")
        if sep and file_part.endswith(".py") and factory.isidentifier():
            return file_part
        return self.source


@dataclass(frozen=True)
class Suite:
    models: tuple[ModelEntry, ...]
    strategies: tuple[str, ...]
    boards: tuple[str, ...]
    pipeline: str = ""
    #: Paths the repository says its models read. Not used for the cache key: the sandbox
    #: hands the compile the whole tree, so what it may read is all of it.
    inputs: tuple[str, ...] = ()
    #: Toolchain specs, each compiling every model x strategy x board.
    toolchains: tuple[str, ...] = DEFAULT_TOOLCHAINS
    #: The alert tolerance of every series, where a model or point says none of its own.
    tolerance: Tolerance = Tolerance()

    def tolerance_for(self, entry: ModelEntry, point_label: str = "") -> dict:
        """The tolerance of ``entry``'s series at ``point_label`` as the manifest sets it,
        with ``from``: which of its levels did; {} where it sets none."""
        levels = [("the point's", dict(entry.point_tolerance).get(point_label, Tolerance())),
                  ("the model's", entry.tolerance), ("[suite]'s", self.tolerance)]
        found, said = Tolerance(), []
        for name, tolerance in levels:
            if tolerance:
                found, said = found.over(tolerance), [*said, name]
        if not found:
            return {}
        return {**found.to_json(), "from": f"{MANIFEST_PATH}: {', '.join(said)}"}

    @property
    def size(self) -> int:
        points = sum(len(m.points) for m in self.models)
        return points * len(self.strategies) * len(self.boards) * len(self.toolchains)

    @property
    def reads_repository(self) -> bool:
        """Whether any model, the pipeline or a planner comes from the repository's files."""
        return bool(
            self.pipeline
            or any(not m.is_zoo for m in self.models)
            or any(s.startswith("repo:") for s in self.strategies)
        )


def check_relative(path: str, what: str) -> str:
    """``path`` if it stays inside the repository; ManifestError otherwise."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or path.startswith("~") or ".." in pure.parts:
        raise ManifestError(
            f"{what} {path!r}: paths are relative to the repository and stay inside it"
        )
    return path


def _spec(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{what} must be path/to/file.py:function")
    try:
        path, _ = split_spec(value, what)
    except RepoCodeError as exc:
        raise ManifestError(str(exc)) from None
    check_relative(path, what)
    return value


def parse(text: str, known_strategies: list[str] | None = None) -> Suite:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{MANIFEST_PATH} is not valid TOML: {exc}") from None
    suite = data.get("suite", {})
    if not isinstance(suite, dict):
        raise ManifestError("[suite] must be a table")
    strategies = suite.get("strategies", DEFAULT_STRATEGIES)
    boards = suite.get("boards", DEFAULT_BOARDS)
    for label, values in (("strategies", strategies), ("boards", boards)):
        if (
            not isinstance(values, list | tuple) or not values
            or not all(isinstance(v, str) and v for v in values)
        ):
            raise ManifestError(f"suite.{label} must be a non-empty list of names")
    strategies, boards = tuple(strategies), tuple(boards)
    for strategy in strategies:
        if strategy.startswith("repo:"):
            _spec(strategy.removeprefix("repo:"), f"strategy {strategy!r}:")
    if known_strategies is not None:
        unknown = [
            s for s in strategies if not s.startswith("repo:") and s not in known_strategies
        ]
        if unknown:
            raise ManifestError(
                f"unknown strategy {', '.join(unknown)}; known: {', '.join(known_strategies)}"
                ", or repo:path/to/file.py:function"
            )
    pipeline = suite.get("pipeline", "")
    if pipeline:
        _spec(pipeline, "suite.pipeline")
    inputs = suite.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(p, str) and p for p in inputs):
        raise ManifestError("suite.inputs must be a list of paths in the repository")
    for path in inputs:
        check_relative(path, "suite.inputs entry")
    branches = suite.get("branches", [])
    if not isinstance(branches, list) or not all(isinstance(b, str) and b for b in branches):
        # Read on the default branch when a push arrives (dashboard/tracking.py).
        raise ManifestError(
            'suite.branches must be a list of branch names or patterns, e.g. ["release/*"]'
        )
    models = _models(data.get("models"))
    toolchains = _toolchains(suite.get("toolchains", list(DEFAULT_TOOLCHAINS)))
    tolerance = _tolerance(suite["tolerance"], "suite") if "tolerance" in suite \
        else Tolerance()
    return Suite(
        tuple(models), strategies, boards, pipeline, tuple(inputs), toolchains, tolerance
    )


def _toolchains(values: Any) -> tuple[str, ...]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ManifestError(
            'suite.toolchains must be a non-empty list such as ["apache-tvm==0.27.0.post1", '
            '"apache-tvm==0.26.0"] ("" is the worker\'s own TVM)'
        )
    specs = []
    for value in values:
        try:
            spec = parse_spec(value).text
        except ToolchainError as exc:
            raise ManifestError(f"suite.toolchains: {exc}") from None
        if spec in specs:
            what = spec or "the worker environment"
            raise ManifestError(f"suite.toolchains: {what!r} is listed twice")
        specs.append(spec)
    return tuple(specs)


def _models(raw_models: Any) -> list[ModelEntry]:
    if not isinstance(raw_models, list) or not raw_models:
        raise ManifestError("the manifest must list at least one [[models]] entry")
    models, names = [], set()
    for index, raw in enumerate(raw_models, start=1):
        if not isinstance(raw, dict):
            raise ManifestError(f"models entry {index} must be a table")
        name, source = raw.get("name"), raw.get("source")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"models entry {index} needs a name")
        if not MODEL_NAME.match(name):
            raise ManifestError(
                f"model name {name!r} (entry {index}): use at most 64 letters, digits, "
                "'-', '_' or '.'"
            )
        if not isinstance(source, str) or not source:
            raise ManifestError(f"model {name!r} needs a source such as zoo:small_cnn")
        if name in names:
            raise ManifestError(f"model {name!r} is listed twice")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            raise ManifestError(f"model {name!r}: params must be a table")
        shapes = None
        if "shapes" in raw:
            try:
                shapes = parse_shapes(raw["shapes"])
            except ShapeError as exc:
                raise ManifestError(f"model {name!r}: {exc}") from None
        if "dims" in raw:
            shapes = _dims(raw["dims"], shapes, name, source)
        tolerance = _tolerance(raw["tolerance"], f"model {name!r}") if "tolerance" in raw \
            else Tolerance()
        moe = raw.get("moe", "dense")
        if moe not in MOE_FORMS:
            raise ManifestError(
                f"model {name!r}: moe must be one of {', '.join(map(repr, MOE_FORMS))}"
            )
        entry = ModelEntry(name, source, dict(params), shapes, tolerance,
                           _point_tolerance(raw.get("point_tolerance"), name, shapes), moe)
        if entry.path is not None:
            check_relative(entry.path, f"model {name!r}: source")
        names.add(name)
        models.append(entry)
    return models


def _point_tolerance(
    raw: Any, name: str, shapes: ShapeAxis | None
) -> tuple[tuple[str, Tolerance], ...]:
    """``point_tolerance = { "seq=512" = { percent = 5 } }``: each key one of the model's
    points, as pages label it."""
    if raw is None:
        return ()
    where = f"model {name!r}: point_tolerance"
    if shapes is None:
        raise ManifestError(f"{where} needs a shape axis (shapes) to name points of")
    if not isinstance(raw, dict):
        raise ManifestError(
            f'{where} is a table by point, e.g. {{ "seq=512" = {{ percent = 5 }} }}'
        )
    labels = [shape_axis.label(point) for point in shapes.points]
    found = []
    for point, value in raw.items():
        if point not in labels:
            raise ManifestError(f"{where}: {point!r} is not one of its points "
                                f"({', '.join(labels)})")
        found.append((point, _tolerance(value, f"{where} {point!r}")))
    return tuple(sorted(found))


def _dims(spec: Any, shapes: ShapeAxis | None, name: str, source: str) -> ShapeAxis:
    """The model's axis with the places ``dims`` gives its symbols."""
    if shapes is None:
        raise ManifestError(
            f"model {name!r}: dims says where the symbols of a shape axis are; give their "
            "points too, e.g. shapes = { seq = [64, 128] }"
        )
    file_part, sep, factory = source.rpartition(":")
    from_file = source.endswith(".onnx") or (
        bool(sep) and file_part.endswith(".py") and factory.isidentifier()
    )
    if not from_file:
        # Library sources size their own symbols by a parameter (planner.tvm.sources).
        raise ManifestError(
            f"model {name!r}: dims is for a model file (path.py:function) or an .onnx file, "
            f"not {source}, whose symbols are its own"
        )
    try:
        return parse_dims(spec, shapes)
    except ShapeError as exc:
        raise ManifestError(f"model {name!r}: {exc}") from None
