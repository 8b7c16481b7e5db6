"""An LLM deployment's memory as pages show it: parameters, KV cache and each function.

A Result of an LLM deployment (``planner.tvm.llm.deployment.strategy_reports``) carries the worst
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
