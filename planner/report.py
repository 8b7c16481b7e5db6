"""What compiling one model under one strategy found: the one record that crosses layers.

``planner.tvm.compile.compile_model`` fills a :class:`StrategyReport`, a board adds its own
figures in :attr:`StrategyReport.board`, and ``dashboard.actions.record_result`` stores it.
It is plain data (no TVM), so the dashboard can take it without importing the TVM wing, and
it survives a trip through JSON: a compile that ran in a sandboxed child process hands its
reports back as JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

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
    kernel_workspace_source: str = "estimate"
    kernel_stack_bytes: int = 0
    measured_peak_bytes: int | None = None
    measured: dict = field(default_factory=dict)
    peak: dict = field(default_factory=dict)
    #: For ``+rewrites``: ``inplace`` ([kernel, source, target]), ``concat`` ([kernel,
    #: output, inputs placed in their slices]), ``dropped_calls``, ``concat_copies_removed``
    #: and ``concat_bytes_saved`` (the bytes those copies would have written),
    #: ``concat_copies_left``, and ``skipped``: [{"rewrite", "reason"}] for each rewrite
    #: found but not made (``"all"`` when the rewritten module did not build).
    rewrites: dict = field(default_factory=dict)
    shape_bounds: dict = field(default_factory=dict)
    latency_ms: dict | None = None
    outputs_match: bool | None = None
    max_abs_diff: float | None = None
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
    error: str | None = None

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

    def to_json(self) -> dict:
        data = asdict(self)
        data["board"] = self.board.to_json() if self.board else None
        return data

    @classmethod
    def from_json(cls, data: dict) -> StrategyReport:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("board") is not None:
            values["board"] = BoardFigures.from_json(values["board"])
        return cls(**values)
