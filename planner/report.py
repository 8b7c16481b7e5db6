"""What compiling one model under one strategy found: the one record that crosses layers.

``planner.tvm.compile.compile_model`` fills a :class:`StrategyReport`, a board adds its own
figures in :attr:`StrategyReport.board`, and ``dashboard.actions.record_result`` stores it.
It is plain data (no TVM), so the dashboard can take it without importing the TVM wing, and
it survives a trip through JSON: a compile that ran in a sandboxed child process hands its
reports back as JSON.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from planner.checkout_reads import CheckoutReads
from planner.shapes import ShapeError, check_sizes

# Same kernels on the same inputs must agree to float rounding; a wrong offset shows up
# as differences of the size of the activations, far above these.
RTOL = 1e-5
ATOL = 1e-6


@dataclass
class BoardFigures:
    """What a board measured beyond the host's figures, and whether the model fits it."""

    kind: str
    memory_capacity: int | None = None
    over_capacity: bool = False
    #: Board-specific figures by name (a GPU's arch, a remote board's address, a micro
    #: board's RAM and flash), as the board page and the run page show them.
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        # Flat, as the pages read it: ``details.board.sram_bytes``.
        return {
            **self.figures,
            "kind": self.kind,
            "memory_capacity": self.memory_capacity,
            "over_capacity": self.over_capacity,
        }

    @classmethod
    def from_json(cls, data: dict) -> BoardFigures:
        data = dict(data)
        return cls(
            kind=data.pop("kind", ""),
            memory_capacity=data.pop("memory_capacity", None),
            over_capacity=bool(data.pop("over_capacity", False)),
            figures=data,
        )


@dataclass
class StrategyReport:
    model: str
    strategy: str
    planned_bytes: int | None = None
    intermediate_bytes: int | None = None
    output_bytes: int | None = None
    lower_bound_bytes: int | None = None
    #: The bound of the problem a ``+rewrites`` plan really solved: merged tensors (and
    #: lifted kernel temporaries) change the tensor set, so its plan can sit below
    #: ``lower_bound_bytes`` without breaking it.
    rewritten_lower_bound_bytes: int | None = None
    #: For ``+reorder``: the bound of the planned tensors in program order and in the
    #: operator order the search chose, and what the search found (``order``).
    program_order_lower_bound_bytes: int | None = None
    chosen_order_lower_bound_bytes: int | None = None
    order: dict = field(default_factory=dict)
    kernel_workspace_bytes: int = 0
    #: How kernel_workspace_bytes was had: "counted" from the built kernels' requests
    #: replayed through TVM's pool (planner.tvm.plan.workspace), "measured" on the device, or
    #: "estimate"d from the kernels before lowering.
    kernel_workspace_source: str = "estimate"
    kernel_stack_bytes: int = 0
    measured_peak_bytes: int | None = None
    measured: dict = field(default_factory=dict)
    peak: dict = field(default_factory=dict)
    #: For ``+rewrites``: ``inplace`` ([kernel, source, target]), ``concat`` ([kernel,
    #: output, inputs placed in their slices]), ``dropped_calls``, ``concat_copies_removed``
    #: and ``concat_bytes_saved`` (the bytes those copies would have written),
    #: ``concat_copies_left``, and ``skipped``: [{"rewrite", "reason"}] for each rewrite
    #: found but not made (``"all"`` when the rewritten module did not build), and
    #: ``noalias_dropped``: the kernels built without ``noalias`` (planner.tvm.plan.noalias).
    rewrites: dict = field(default_factory=dict)
    shape_bounds: dict = field(default_factory=dict)
    #: The concrete shape this report was planned, built and measured at, by symbol
    #: (``{"h": 256, "w": 256}``); empty for a model without a shape axis.
    shape_point: dict[str, int] = field(default_factory=dict)
    #: What TVM's own planner reserves when the model is built once for the whole range
    #: (symbols at their upper bound): the over-allocation of upper-bound planning is this
    #: against ``planned_bytes`` at ``shape_point``.
    reserved_at_bound_bytes: int | None = None
    #: This strategy's peak as a formula of the symbols (``"max(12*h*w + 4096, ...)"``) from
    #: a plan valid at every point of the range, and where it was checked against planned
    #: bytes; empty where the planner could not give one.
    peak_formula: dict = field(default_factory=dict)
    latency_ms: dict | None = None
    outputs_match: bool | None = None
    max_abs_diff: float | None = None
    #: What TVM's stock build, the reference of ``outputs_match``, was itself checked
    #: against on the same draws ("PyTorch", "onnxruntime"), or why it was not ("not
    #: checked: ..."); and its largest difference from it (None where not checked).
    reference_check: str = ""
    reference_max_abs_diff: float | None = None
    tolerance: dict = field(default_factory=lambda: {"rtol": RTOL, "atol": ATOL})
    compile_seconds: float | None = None
    plan_seconds: float | None = None
    proven_optimal: bool | None = None
    tvm_version: str = ""
    target: str = ""
    environment: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    #: The manifest's words for the model (``zoo:...``, a file in the repository).
    model_source: str = ""
    #: The function run and the inputs it was checked on (an ``.npz`` beside the artifacts),
    #: so a board can run the build again without importing the model's code.
    entry: str = "forward"
    inputs_file: str = ""
    input_bytes: int | None = None
    weights_bytes: int | None = None
    board: BoardFigures | None = None
    #: What went wrong without invalidating the build (a stock plan we could not read).
    warnings: list[str] = field(default_factory=list)
    #: What the figures assume of the model beyond its export (a mixture of experts' routing
    #: in fixed shapes); see planner.tvm.network.Network.assumptions.
    assumptions: list[str] = field(default_factory=list)
    #: Figures that only the repository's own process measured (a repository planner's
    #: time), so pages can say so; every other figure is Peakwatch's own.
    reported_by_repository: list[str] = field(default_factory=list)
    #: An LLM deployment's memory at this point (planner.tvm.llm.deployment.strategy_reports):
    #: ``params_bytes``, ``kv_cache`` (``formula_bytes``, ``allocated_bytes``),
    #: ``temporary_bytes`` (its worst function's planned bytes, which the report's figures
    #: are), ``worst_function``, ``total_bytes``, ``tvm_estimate_bytes`` and ``functions``:
    #: each function's figures by name. Empty for any other model.
    llm: dict = field(default_factory=dict)
    error: str | None = None
    #: What the compile's import looked at of the checkout, as the worker's view of it
    #: saw (``workers/sandbox/view.py``); None: not known. Never in a report's JSON: no
    #: child says it for the compile.
    checkout_reads: CheckoutReads | None = field(default=None, repr=False)
    #: Why it is not known, where the import saw the checkout: the Result is then keyed
    #: by the whole tree, and says why.
    whole_tree_because: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def over_capacity(self) -> bool:
        return bool(self.board and self.board.over_capacity)

    @classmethod
    def failed(cls, model: str, strategy: str, error: str, **fields) -> StrategyReport:
        """A report that says only why there are no figures."""
        return cls(model=model, strategy=strategy, error=error, **fields)

    @classmethod
    def failed_everywhere(
        cls,
        model: str,
        strategies: Sequence[str],
        error: str,
        *,
        points: Sequence[dict[str, int]] | None = None,
        source: str = "",
        errors: dict[str, str] | None = None,
    ) -> list[StrategyReport]:
        """One failed report per strategy at every shape point, point by point: an error
        for a whole model is a failed Result per (strategy, point), as its figures would
        have been, each saying why (``errors`` by strategy, where one has its own)."""
        errors = errors or {}
        return [
            cls.failed(
                model, strategy, errors.get(strategy, error), model_source=source,
                shape_point=dict(point),
            )
            for point in (points or [{}])
            for strategy in strategies
        ]

    def to_json(self) -> dict:
        data = asdict(self)
        for name in WORKER_FIELDS:
            data.pop(name)
        data["board"] = self.board.to_json() if self.board else None
        return data

    @classmethod
    def from_json(cls, data: dict) -> StrategyReport:
        known = {f.name for f in dataclasses.fields(cls)} - set(WORKER_FIELDS)
        values = {k: v for k, v in data.items() if k in known}
        if values.get("board") is not None:
            values["board"] = BoardFigures.from_json(values["board"])
        return cls(**values)


#: The files a compile leaves per strategy (``planner.tvm.compile``, the micro export): the
#: only artifact names a Result takes.
ARTIFACT_NAMES = (
    "model.so", "plan.json", "module.py", "timeline.svg", "problem.csv", "problem-merged.csv",
    "export.zip",
)


def slug(text: str) -> str:
    """``text`` as a file name: strategy names such as ``best-fit+rewrites`` included."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def point_folder(out: Path, point: dict[str, int] | None) -> Path:
    """Where a compile at shape ``point`` leaves its files under ``out``: ``out`` itself
    without a point, else ``out/points/h-64-w-64`` (the compile writes ``<model>/<strategy>/``
    below it, and the worker looks for them there and nowhere else)."""
    if not point:
        return out
    return out / "points" / slug("-".join(f"{k}-{v}" for k, v in point.items()))


#: Fields only the worker sets, from what it checked itself: a child's report has none.
WORKER_FIELDS = ("checkout_reads", "whole_tree_because")


class InvalidReport(ValueError):
    """A report from a sandboxed process that breaks its contract; the message says how."""


_BYTES = (
    "planned_bytes", "intermediate_bytes", "output_bytes", "lower_bound_bytes",
    "rewritten_lower_bound_bytes", "program_order_lower_bound_bytes",
    "chosen_order_lower_bound_bytes", "measured_peak_bytes", "input_bytes", "weights_bytes",
    "reserved_at_bound_bytes",
)
_REQUIRED_BYTES = ("kernel_workspace_bytes", "kernel_stack_bytes")
_SECONDS = ("compile_seconds", "plan_seconds")
_FLAGS = ("outputs_match", "proven_optimal")
WORKSPACE_SOURCES = ("estimate", "counted", "measured")
_TEXTS = ("tvm_version", "target", "model_source", "entry", "inputs_file", "reference_check")
_OBJECTS = ("measured", "peak", "rewrites", "shape_bounds", "order", "environment",
            "tolerance", "artifacts", "shape_point", "peak_formula", "llm")
#: The most bytes a figure may claim (an exabyte): anything above is no measurement.
MAX_BYTES = 1 << 60
MAX_TEXT = 20_000
#: A report's nested objects (plans' peak lists, the environment) stay well below this.
MAX_OBJECT_CHARS = 2_000_000
MAX_DEPTH = 12
MAX_SAMPLES = 100_000


def parse_report(data: Any) -> StrategyReport:
    """The report in ``data`` (JSON from a sandboxed process), every field checked against
    its type and range; :class:`InvalidReport` names the first field that is not.

    Unknown fields are refused rather than dropped: a child that writes fields of its own
    is not the child Peakwatch wrote. A successful report must add up: planned bytes are
    the arena, the kernel workspace and the outputs.
    """
    if not isinstance(data, dict):
        raise InvalidReport(f"a report is a {type(data).__name__}, not an object")
    known = {f.name for f in dataclasses.fields(StrategyReport)} - set(WORKER_FIELDS)
    unknown = sorted(str(k)[:80] for k in data if k not in known)
    if unknown:
        raise InvalidReport(f"unknown fields: {', '.join(unknown)}")
    for name in ("model", "strategy"):
        _text(data, name, required=True)
    for name in _BYTES:
        _count(data, name)
    for name in _REQUIRED_BYTES:
        _count(data, name, required=True)
    for name in _SECONDS:
        _number(data, name)
    _number(data, "max_abs_diff")
    _number(data, "reference_max_abs_diff")
    for name in _FLAGS:
        if data.get(name) is not None and not isinstance(data[name], bool):
            raise InvalidReport(f"{name} is not true, false or null")
    for name in _TEXTS:
        _text(data, name)
    if data.get("kernel_workspace_source", "estimate") not in WORKSPACE_SOURCES:
        raise InvalidReport("kernel_workspace_source is not one of estimate, counted, measured")
    error = data.get("error")
    if error is not None and (not isinstance(error, str) or len(error) > MAX_TEXT):
        raise InvalidReport("error is not a text")
    for name in ("warnings", "reported_by_repository", "assumptions"):
        values = data.get(name, [])
        if not isinstance(values, list) or not all(
            isinstance(v, str) and len(v) <= MAX_TEXT for v in values
        ):
            raise InvalidReport(f"{name} is not a list of texts")
    for name in _OBJECTS:
        if data.get(name) is not None and not isinstance(data[name], dict):
            raise InvalidReport(f"{name} is not an object")
        _bounded(data.get(name), name)
    board = data.get("board")
    if board is not None:
        if not isinstance(board, dict):
            raise InvalidReport("board is not an object")
        _bounded(board, "board")
        _count(board, "memory_capacity")
    _shape_point(data.get("shape_point"))
    _latency(data.get("latency_ms"))
    _llm(data.get("llm"))
    report = StrategyReport.from_json(data)
    if report.ok:
        _adds_up(report)
    return report


def _count(data: dict, name: str, *, required: bool = False) -> None:
    value = data.get(name)
    if value is None and not required:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BYTES:
        raise InvalidReport(f"{name} is not a byte count: {str(value)[:80]}")


def _number(data: dict, name: str) -> None:
    value = data.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value >= 0
    ):
        raise InvalidReport(f"{name} is not a finite, non-negative number: {str(value)[:80]}")


def _text(data: dict, name: str, *, required: bool = False) -> None:
    value = data.get(name, "")
    if not isinstance(value, str) or len(value) > MAX_TEXT or (required and not value):
        raise InvalidReport(f"{name} is not a text")


def _shape_point(value: Any) -> None:
    if value:
        try:
            check_sizes(value, "a point")
        except ShapeError as exc:
            raise InvalidReport(f"shape_point is no shape: {exc}") from None


def _latency(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or set(value) - {"median", "p90", "samples", "repeat"}:
        raise InvalidReport("latency_ms is not median, p90 and samples")
    for key in ("median", "p90", "repeat"):
        _number(value, key)
    samples = value.get("samples", [])
    if not isinstance(samples, list) or len(samples) > MAX_SAMPLES:
        raise InvalidReport("latency_ms.samples is not a list of timings")
    for sample in samples:
        _number({"latency_ms.samples": sample}, "latency_ms.samples")


#: What an LLM report's ``functions`` may name: the deployment's model functions.
LLM_FUNCTIONS = ("prefill", "decode", "batch_prefill", "batch_decode")
_LLM_FUNCTION_BYTES = ("planned_bytes", "lower_bound_bytes", "measured_peak_bytes")


def _llm(value: Any) -> None:
    """An LLM breakdown's figures are byte counts that add up, by known function names."""
    if not value:
        return
    for name in ("params_bytes", "temporary_bytes", "total_bytes", "tvm_estimate_bytes"):
        _count(value, name, required=True)
    cache = value.get("kv_cache")
    if not isinstance(cache, dict):
        raise InvalidReport("llm.kv_cache is not an object")
    _count(cache, "formula_bytes", required=True)
    _count(cache, "allocated_bytes")
    functions = value.get("functions")
    if not isinstance(functions, dict) or not set(functions) <= set(LLM_FUNCTIONS):
        raise InvalidReport(f"llm.functions names functions other than {', '.join(LLM_FUNCTIONS)}")
    for name, figures in functions.items():
        if not isinstance(figures, dict):
            raise InvalidReport(f"llm.functions.{name} is not an object")
        for figure in _LLM_FUNCTION_BYTES:
            _count(figures, figure)
        _number(figures, "latency_ms")
    worst = value.get("worst_function")
    if worst not in functions:
        raise InvalidReport("llm.worst_function is not one of its functions")
    if functions[worst].get("planned_bytes") != value["temporary_bytes"]:
        raise InvalidReport("llm.temporary_bytes is not its worst function's planned bytes")
    cache_bytes = cache.get("allocated_bytes") or cache["formula_bytes"]
    if value["total_bytes"] != value["params_bytes"] + cache_bytes + value["temporary_bytes"]:
        raise InvalidReport("llm.total_bytes is not the parameters, KV cache and temporary memory")


def _bounded(value: Any, name: str) -> None:
    """``value`` is plain JSON, at most :data:`MAX_DEPTH` deep and not too large."""
    if value is None:
        return
    stack, chars = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidReport(f"{name} is nested deeper than {MAX_DEPTH}")
        if isinstance(item, dict):
            chars += sum(len(str(k)) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            chars += len(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidReport(f"{name} holds a number that is not finite")
        elif item is not None and not isinstance(item, (bool, int, float)):
            raise InvalidReport(f"{name} holds a {type(item).__name__}")
        chars += 1
        if chars > MAX_OBJECT_CHARS:
            raise InvalidReport(f"{name} is larger than {MAX_OBJECT_CHARS} characters")


def _adds_up(report: StrategyReport) -> None:
    if report.planned_bytes is None or report.intermediate_bytes is None:
        raise InvalidReport("a successful report has no planned bytes")
    parts = report.intermediate_bytes + report.kernel_workspace_bytes + (report.output_bytes or 0)
    if report.planned_bytes != parts:
        raise InvalidReport(
            f"planned_bytes {report.planned_bytes} is not the arena, the kernel workspace and "
            f"the outputs ({parts})"
        )
