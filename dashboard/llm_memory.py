"""An LLM deployment's memory as pages show it: parameters, KV cache and each function.

A Result of an LLM deployment (``planner.tvm.llm.strategy_reports``) carries the worst
function's figures in its columns and the whole breakdown in ``details["llm"]``: the
parameters, the KV cache (its pages' formula and, where measured, what it allocated), every
model function's planned bytes, measured peak and latency, and their total. This module
reads that breakdown back (checked: it is JSON) for the model page, the comparisons and
the alerts, which name the function that moved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from planner.report import LLM_FUNCTIONS
from planner.shapes import label_order

#: How many commits the model page's breakdown lists, newest first.
BREAKDOWN_COMMITS = 8
MAX_ROWS_PER_COMMIT = 128


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class LLMMemory:
    """One Result's breakdown; a figure it did not record is None."""

    params: int | None
    kv_cache: int | None
    #: Whether ``kv_cache`` is what the cache allocated (measured) or its pages' formula.
    kv_cache_measured: bool
    kv_formula: int | None
    temporary: int | None
    worst_function: str
    total: int | None
    tvm_estimate: int | None
    #: By function, in the deployment's order: planned bytes, measured peak, latency (ms).
    planned: dict[str, int | None] = field(default_factory=dict)
    measured: dict[str, int | None] = field(default_factory=dict)
    latency: dict[str, float | None] = field(default_factory=dict)

    @property
    def worst_measured(self) -> int | None:
        """The worst function's measured peak: what its temporary memory really held."""
        return self.measured.get(self.worst_function)

    @property
    def measured_over_estimate(self) -> float | None:
        """That peak over TVM's estimate of it (its planner's arena at the bounds)."""
        if not self.worst_measured or not self.tvm_estimate:
            return None
        return self.worst_measured / self.tvm_estimate

    @classmethod
    def of(cls, details: Any) -> LLMMemory | None:
        """The breakdown in a Result's ``details``; None for any other model."""
        raw = details.get("llm") if isinstance(details, dict) else None
        if not isinstance(raw, dict) or not raw:
            return None
        cache = raw.get("kv_cache") if isinstance(raw.get("kv_cache"), dict) else {}
        functions = raw.get("functions") if isinstance(raw.get("functions"), dict) else {}
        known = [f for f in LLM_FUNCTIONS if isinstance(functions.get(f), dict)]
        allocated = _count(cache.get("allocated_bytes"))
        worst = raw.get("worst_function")
        return cls(
            params=_count(raw.get("params_bytes")),
            kv_cache=allocated if allocated is not None else _count(cache.get("formula_bytes")),
            kv_cache_measured=allocated is not None,
            kv_formula=_count(cache.get("formula_bytes")),
            temporary=_count(raw.get("temporary_bytes")),
            worst_function=worst if worst in known else "",
            total=_count(raw.get("total_bytes")),
            tvm_estimate=_count(raw.get("tvm_estimate_bytes")),
            planned={f: _count(functions[f].get("planned_bytes")) for f in known},
            measured={f: _count(functions[f].get("measured_peak_bytes")) for f in known},
            latency={f: _ms(functions[f].get("latency_ms")) for f in known},
        )


def change_rows(before: LLMMemory | None, after: LLMMemory | None) -> list[dict]:
    """Parameters, KV cache, each function's planned bytes and the total on both sides,
    with each change (None where either side lacks the figure)."""
    sides = [s for s in (before, after) if s is not None]
    functions = [f for f in LLM_FUNCTIONS if any(f in s.planned for s in sides)]
    rows = [("params", "parameters", lambda s: s.params),
            ("kv_cache", "KV cache", lambda s: s.kv_cache)]
    rows += [(f"function:{f}", f, lambda s, f=f: s.planned.get(f)) for f in functions]
    rows.append(("total", "total", lambda s: s.total))
    out = []
    for key, label, read in rows:
        a = read(before) if before is not None else None
        b = read(after) if after is not None else None
        out.append({
            "key": key, "label": label, "before": a, "after": b,
            "change": b - a if a is not None and b is not None else None,
        })
    return out


def function_note(before: LLMMemory | None, after: LLMMemory | None) -> str:
    """The function that moved an LLM deployment's figure, in words: the one whose planned
    bytes grew most, and the worst function on each side where it changed; "" for any
    other model."""
    if after is None:
        return ""
    if before is None:
        return f"worst function {after.worst_function}" if after.worst_function else ""
    grown = [
        (after.planned[f] - before.planned[f], f) for f in after.planned
        if after.planned.get(f) is not None and before.planned.get(f) is not None
        and after.planned[f] != before.planned[f]
    ]
    words = []
    if grown:
        change, function = max(grown)
        verb = "grew" if change > 0 else "shrank"
        words.append(
            f"{function} {verb} most: {before.planned[function]:,} B → "
            f"{after.planned[function]:,} B"
        )
    if before.worst_function != after.worst_function:
        words.append(f"worst function {before.worst_function} → {after.worst_function}")
    elif after.worst_function:
        words.append(f"worst function {after.worst_function}")
    return "; ".join(words)


def breakdown(model, *, board: str = "", branch: str = "", toolchain=None) -> dict | None:
    """The model page's table: for its newest commits with LLM results, newest first, each
    point and strategy's parameters, KV cache, functions and total; None for a model with
    none."""
    from dashboard.models import Result

    results = (
        Result.objects.filter(model=model, status=Result.Status.OK, details__has_key="llm")
        .select_related("commit", "strategy", "board", "run")
        .order_by("-commit__committed_at", "-commit_id", "id")
    )
    if board:
        results = results.filter(board__name=board)
    if branch:
        results = results.filter(commit__branch=branch)
    if toolchain is not None:
        results = results.filter(toolchain=toolchain)
    commits: list = []
    rows: dict[int, dict[tuple, dict]] = {}
    # Enough rows for the newest commits of any suite (strategies x points x boards).
    for result in results[:BREAKDOWN_COMMITS * MAX_ROWS_PER_COMMIT]:
        if result.commit_id not in rows:
            if len(commits) == BREAKDOWN_COMMITS:
                break
            commits.append(result.commit)
            rows[result.commit_id] = {}
        memory = LLMMemory.of(result.details)
        if memory is None:
            continue
        # Of one commit run twice, the later run's.
        rows[result.commit_id][(result.board.name, result.shape_label, result.strategy.name)] = {
            "result": result, "memory": memory,
        }
    if not commits:
        return None
    functions = [f for f in LLM_FUNCTIONS if any(
        f in row["memory"].planned for by_key in rows.values() for row in by_key.values()
    )]
    return {
        "functions": functions,
        "any_measured": any(
            row["memory"].kv_cache_measured for by_key in rows.values() for row in by_key.values()
        ),
        "commits": [
            {
                "commit": commit,
                "rows": [
                    {**row, "board": key[0], "point": key[1], "strategy": key[2],
                     "point_words": _point_words(row["result"].shape_point),
                     "cells": [
                         {"function": f, "planned": row["memory"].planned.get(f),
                          "worst": f == row["memory"].worst_function}
                         for f in functions
                     ]}
                    for key, row in sorted(
                        rows[commit.pk].items(),
                        key=lambda item: (item[0][0], label_order(item[0][1]), item[0][2]),
                    )
                ],
            }
            for commit in commits
        ],
    }


#: An LLM's shape symbols as the table's point column names them.
_SHORT = {"context_window": "context", "prefill_chunk": "chunk"}


def _point_words(point: Any) -> str:
    """``{"context_window": 512, "prefill_chunk": 64}`` as "context 512, chunk 64"."""
    if not isinstance(point, dict):
        return ""
    # The context first, whatever order the database keeps the keys in.
    ordered = sorted(point, key=lambda k: (k not in _SHORT, list(_SHORT).index(k)
                                           if k in _SHORT else 0, k))
    return ", ".join(
        f"{_SHORT.get(k, k)} {point[k]:,}" if isinstance(point[k], int) else f"{k} {point[k]}"
        for k in ordered
    )
