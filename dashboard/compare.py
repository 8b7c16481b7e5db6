"""Comparisons: two commits, a pull request and its merge base, a branch and the default
branch, two strategies or two toolchains on one commit, and the plans of two Results tensor
by tensor.

Plain functions over rows: the pages, the JSON and the pull request comment share them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from dashboard.artifact_storage import ArtifactMissing
from dashboard.llm_memory import LLMMemory, change_rows, function_note
from dashboard.models import Commit, Repository, Result, Toolchain
from dashboard.served_artifacts import artifact_of, missing_text, open_served
from planner.plan_diff import parse_plan
from planner.shapes import label_order

log = logging.getLogger(__name__)


def _delta(base, head) -> tuple[float | None, float | None]:
    if base is None or head is None:
        return None, None
    delta = head - base
    return delta, (delta / base if base else None)


@dataclass
class ComparisonRow:
    """One series (model x strategy x board x toolchain, or without the strategy or the
    toolchain when those are what is compared) side by side."""

    model: str
    strategy: str
    board: str
    base: Figures | None
    head: Figures | None
    #: The toolchain spec of both sides ("" the worker's own); what toolchains compare.
    toolchain: str = ""
    #: The shape point of both sides ("h=256,w=256"); "" for a model without an axis.
    shape_label: str = ""

    @property
    def series_ids(self) -> tuple[int, int, int, int, str] | None:
        result = self.head or self.base
        return result.series_ids if result is not None else None

    @property
    def base_bytes(self):
        return self.base.planned_bytes if self.base else None

    @property
    def head_bytes(self):
        return self.head.planned_bytes if self.head else None

    @property
    def bytes_delta(self):
        return _delta(self.base_bytes, self.head_bytes)[0]

    @property
    def bytes_relative(self):
        return _delta(self.base_bytes, self.head_bytes)[1]

    @property
    def parts(self) -> list[dict]:
        """Planned bytes in their parts on both sides (``breakdown_change``)."""
        return breakdown_change(
            self.base.breakdown if self.base else None,
            self.head.breakdown if self.head else None,
        )

    @property
    def llm_parts(self) -> list[dict]:
        """An LLM deployment's parameters, KV cache, functions and total on both sides;
        empty for any other model."""
        before = self.base.llm if self.base else None
        after = self.head.llm if self.head else None
        return change_rows(before, after) if before or after else []

    @property
    def llm_note(self) -> str:
        """Which function moved, in words (``llm_memory.function_note``)."""
        return function_note(self.base.llm if self.base else None,
                             self.head.llm if self.head else None)

    @property
    def base_latency(self):
        return self.base.latency_median_ms if self.base else None

    @property
    def head_latency(self):
        return self.head.latency_median_ms if self.head else None

    @property
    def latency_delta(self):
        return _delta(self.base_latency, self.head_latency)[0]

    @property
    def latency_relative(self):
        return _delta(self.base_latency, self.head_latency)[1]

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "strategy": self.strategy,
            "board": self.board,
            "toolchain": self.toolchain,
            "shape_label": self.shape_label,
            "base_result": self.base.pk if self.base else None,
            "head_result": self.head.pk if self.head else None,
            "base_bytes": self.base_bytes,
            "head_bytes": self.head_bytes,
            "bytes_delta": self.bytes_delta,
            "bytes_relative": self.bytes_relative,
            "base_latency_ms": self.base_latency,
            "head_latency_ms": self.head_latency,
            "latency_delta_ms": self.latency_delta,
            "latency_relative": self.latency_relative,
            "base_parts": self.base.breakdown.to_json() if self.base and self.base.breakdown
            else None,
            "head_parts": self.head.breakdown.to_json() if self.head and self.head.breakdown
            else None,
            # An LLM deployment's parameters, KV cache and functions, each side and change.
            "llm_parts": self.llm_parts or None,
        }


#: How each part of planned bytes is named on the pages.
PARTS = (
    ("arena", "Arena (intermediates)"),
    ("workspace", "Kernel workspace"),
    ("outputs", "Outputs"),
)
_SOURCES = {"measured": "measured", "counted": "counted", "estimate": "estimated"}


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Planned bytes in their parts: the arena holding the intermediates, the workspace
    TVM's pool holds for kernel temporaries (outside the plan), and the outputs handed to
    the caller. A part a result did not record is None, never worked out from the others."""

    planned: int | None = None
    arena: int | None = None
    workspace: int | None = None
    #: "measured" or "estimate"; "" where the result did not say.
    workspace_source: str = ""
    outputs: int | None = None

    @classmethod
    def of(cls, result) -> Breakdown:
        details = result.details if isinstance(result.details, dict) else {}
        return cls.from_columns(
            result.planned_bytes, result.intermediate_bytes, result.output_bytes,
            details.get("kernel_workspace_bytes"), details.get("kernel_workspace_source"),
        )

    @classmethod
    def from_columns(cls, planned, arena, outputs, workspace, source) -> Breakdown:
        # Read from a JSON field, so checked: anything but a count is not a measurement.
        if isinstance(workspace, bool) or not isinstance(workspace, int) or workspace < 0:
            workspace = None
        source = source if source in _SOURCES and workspace is not None else ""
        return cls(planned, arena, workspace, source, outputs)

    @property
    def known(self) -> bool:
        return any(v is not None for v in (self.arena, self.workspace, self.outputs))

    @property
    def workspace_how(self) -> str:
        """"measured", "estimated" or "" (not recorded)."""
        return _SOURCES.get(self.workspace_source, "")

    def part(self, key: str) -> int | None:
        return getattr(self, key)

    def to_json(self) -> dict:
        return {
            "arena_bytes": self.arena,
            "kernel_workspace_bytes": self.workspace,
            "kernel_workspace_source": self.workspace_source or None,
            "output_bytes": self.outputs,
        }


def breakdown_change(before: Breakdown | None, after: Breakdown | None) -> list[dict]:
    """Planned bytes, then each of its parts, on both sides with its change (None where
    either side lacks it), and how the kernel workspace was had on each side."""
    a = before.planned if before else None
    b = after.planned if after else None
    rows = [{"key": "planned", "label": "Planned", "before": a, "after": b,
             "change": _delta(a, b)[0]}]
    for key, label in PARTS:
        a = before.part(key) if before else None
        b = after.part(key) if after else None
        row = {"key": key, "label": label, "before": a, "after": b,
               "change": _delta(a, b)[0]}
        if key == "workspace":
            row["how"] = [before.workspace_how if before else "",
                          after.workspace_how if after else ""]
        rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class Figures:
    """What a comparison shows of one Result. Read as plain columns: a commit has hundreds
    of Results, and building each as a model instance with its JSON fields was most of a
    compare page's time."""

    pk: int
    planned_bytes: int | None
    latency_median_ms: float | None
    reused_from_id: int | None = None
    #: (model, strategy, board, toolchain) ids and the shape label, as ``Alert``s name a
    #: series.
    series_ids: tuple[int, int, int, int, str] | None = None
    breakdown: Breakdown | None = None
    #: An LLM deployment's parameters, KV cache and functions; None for any other model.
    llm: LLMMemory | None = None

    @property
    def is_reused(self) -> bool:
        return self.reused_from_id is not None


def results_of(commit: Commit) -> dict[tuple[str, str, str, str, str], Figures]:
    """The newest successful Result of every series at ``commit``, by (model, strategy,
    board, toolchain spec) names and shape label; of one commit run twice, the later
    run's."""
    rows = (
        Result.objects.for_commit(commit)
        .succeeded()
        .order_by("id")
        .values_list(
            "model__name", "strategy__name", "board__name", "toolchain__spec", "shape_label",
            "id", "planned_bytes", "latency_median_ms", "reused_from_id",
            "model_id", "strategy_id", "board_id", "toolchain_id", "shape_label",
            "intermediate_bytes", "output_bytes",
            "details__kernel_workspace_bytes", "details__kernel_workspace_source",
            "details__llm",
        )
    )
    # Ascending ids: a later run's Result replaces the earlier one of its series.
    return {
        tuple(row[:5]): Figures(
            *row[5:9], series_ids=row[9:14],
            breakdown=Breakdown.from_columns(row[6], *row[14:18]),
            llm=LLMMemory.of({"llm": row[18]}),
        )
        for row in rows
    }


def _by_point_value(key: tuple) -> tuple:
    """A comparison key (names, then the shape label last) as rows are listed: the shape
    point by its values, so seq=64 comes before seq=512 (as text it would not)."""
    return (*key[:-1], label_order(key[-1]))


def compare_commits(
    base: Commit, head: Commit, *, results: tuple[dict, dict] | None = None
) -> list[ComparisonRow]:
    """``results``: both commits' ``results_of``, when the caller has read them already."""
    before, after = results or (results_of(base), results_of(head))
    return [
        ComparisonRow(
            *key[:3], before.get(key), after.get(key), toolchain=key[3], shape_label=key[4]
        )
        for key in sorted(set(before) | set(after), key=_by_point_value)
    ]


def toolchains_of(commit: Commit) -> list[Toolchain]:
    """The toolchains ``commit`` has successful results with, oldest TVM first."""
    found = Toolchain.objects.filter(results__commit=commit, results__status="ok").distinct()
    return sorted(found, key=toolchain_order)


def toolchain_order(toolchain: Toolchain) -> tuple:
    """Oldest TVM release first; the worker's environment, whose TVM varies, by its version."""
    parts = []
    for piece in re.split(r"[.+-]", toolchain.tvm_version or ""):
        parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return (parts, toolchain.spec)


def compare_toolchains(commit: Commit, base: str, head: str) -> list[ComparisonRow]:
    """Toolchain ``head`` against toolchain ``base`` (specs) on every model, strategy and
    board of ``commit``."""
    pairs: dict[tuple[str, str, str, str], dict[str, Figures]] = {}
    for (model, strategy, board, spec, shape), result in results_of(commit).items():
        pairs.setdefault((model, strategy, board, shape), {})[spec] = result
    return [
        ComparisonRow(model, strategy, board, by.get(base), by.get(head),
                      toolchain=f"{base or 'worker'} → {head or 'worker'}", shape_label=shape)
        for (model, strategy, board, shape), by in sorted(
            pairs.items(), key=lambda pair: _by_point_value(pair[0])
        )
        if base in by or head in by
    ]


def compare_strategies(commit: Commit, base: str, head: str) -> list[ComparisonRow]:
    """Strategy ``head`` against strategy ``base`` on every model and board of ``commit``."""
    results = results_of(commit)
    pairs: dict[tuple[str, str, str, str], dict[str, Figures]] = {}
    for (model, strategy, board, toolchain, shape), result in results.items():
        pairs.setdefault((model, board, toolchain, shape), {})[strategy] = result
    return [
        ComparisonRow(model, f"{base} → {head}", board, by.get(base), by.get(head),
                      toolchain=toolchain, shape_label=shape)
        for (model, board, toolchain, shape), by in sorted(
            pairs.items(), key=lambda pair: _by_point_value(pair[0])
        )
        if base in by or head in by
    ]


@dataclass(frozen=True)
class ModelRows:
    """One model's rows of a comparison, in the order they are listed."""

    model: str
    rows: list[ComparisonRow]

    @property
    def has_points(self) -> bool:
        """Whether the model was measured at shape points: its table then has a column
        naming the point of each row."""
        return any(row.shape_label for row in self.rows)


def group_by_model(rows: list[ComparisonRow]) -> list[ModelRows]:
    groups: dict[str, list[ComparisonRow]] = {}
    for row in rows:
        groups.setdefault(row.model, []).append(row)
    return [ModelRows(model, of_model) for model, of_model in sorted(groups.items())]


def pareto_points(commits: dict[str, Commit], results: dict[str, dict] | None = None) -> dict:
    """Per model, planned bytes against latency of every strategy, for each labelled commit
    (``results``: the commits' ``results_of`` by label, when the caller has them).

    The chart script (frontend/src/compare.js) draws one scatter per model and marks the
    Pareto front: the strategies no other beats on both memory and latency.
    """
    models: dict[str, dict[str, list]] = {}
    for label, commit in commits.items():
        of_commit = results[label] if results else results_of(commit)
        # Listed (in the JSON, the legend's tooltips) by strategy, then point by its value.
        for (model, strategy, board, toolchain, shape), result in sorted(
            of_commit.items(), key=lambda item: _by_point_value(item[0])
        ):
            if result.planned_bytes is None or result.latency_median_ms is None:
                continue
            name = f"{strategy} ({toolchain})" if toolchain else strategy
            models.setdefault(model, {}).setdefault(label, []).append(
                {
                    # Points of one strategy are different memory needs, not rivals.
                    "strategy": f"{name} at {shape}" if shape else name,
                    "board": board,
                    "planned_bytes": result.planned_bytes,
                    "latency_ms": result.latency_median_ms,
                    "result": result.pk,
                }
            )
    return {
        "labels": list(commits),
        "models": [
            {"model": model, "sets": [{"label": k, "points": v} for k, v in sets.items()]}
            for model, sets in sorted(models.items())
        ],
    }


def pareto_front(points: list[dict]) -> list[dict]:
    """The points no other point beats on both planned bytes and latency (ties kept)."""
    return [
        p
        for p in points
        if not any(
            q["planned_bytes"] <= p["planned_bytes"]
            and q["latency_ms"] <= p["latency_ms"]
            and (q["planned_bytes"], q["latency_ms"]) != (p["planned_bytes"], p["latency_ms"])
            for q in points
        )
    ]


# --- which commits to compare ------------------------------------------------------------


def find_commit(repository: Repository, sha: str) -> Commit | None:
    """The one commit ``sha`` (or a unique prefix of it) names, else None."""
    matches = list(Commit.objects.for_repository(repository).matching_sha(sha)[:2])
    return matches[0] if len(matches) == 1 else None


def branch_head(repository: Repository, branch: str) -> Commit | None:
    """The newest commit on ``branch`` with successful results."""
    return (
        Commit.objects.for_repository(repository)
        .on_branch(branch)
        .filter(results__status="ok")
        .order_by("-committed_at", "-id")
        .first()
    )


def branch_base(repository: Repository, head: Commit, limit: int = 500) -> Commit | None:
    """Where ``head``'s branch left the default branch: its nearest first-parent ancestor on
    the default branch that has results; the default branch's newest results otherwise."""
    commits = {c.sha: c for c in Commit.objects.for_repository(repository)}
    with_results = set(
        Result.objects.filter(commit__repository=repository)
        .succeeded()
        .values_list("commit_id", flat=True)
    )
    sha, steps = head.parent_sha, 0
    while sha in commits and steps < limit:
        commit = commits[sha]
        if commit.branch == repository.default_branch and commit.pk in with_results:
            return commit
        sha, steps = commit.parent_sha, steps + 1
    return branch_head(repository, repository.default_branch)


# --- plan diffs: the diff itself is planner.plan_diff ----------------------------------------


def read_plan(result: Result) -> tuple[dict | None, str]:
    """The ``plan.json`` artifact of ``result`` (its source's, for a result reused from
    cache), parsed; else None and why, in words a page shows ("" when it has none)."""
    artifact = artifact_of(result, "plan.json")
    if artifact is None:
        return None, ""
    try:
        with open_served(artifact) as handle:
            data = handle.read()
    except ArtifactMissing as missing:
        log.warning("cannot read %s of result %s: %s", artifact.name, result.pk, missing.why)
        return None, missing_text(artifact, missing)
    except OSError as exc:
        log.warning("cannot read %s of result %s: %s", artifact.name, result.pk, exc)
        return None, f"plan.json of result {result.pk} could not be read"
    plan = parse_plan(data)
    if plan is None:
        log.warning("%s of result %s is not a plan: not a JSON object", artifact.name, result.pk)
        return None, f"plan.json of result {result.pk} is not a plan: not a JSON object"
    return plan, ""
