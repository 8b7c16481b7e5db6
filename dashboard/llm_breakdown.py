"""An LLM deployment's memory on the model page: the table of its newest commits' Results.

Apart from :mod:`dashboard.llm_memory`, which reads one Result's figures, because this
queries the Results, and the models read that module themselves (an alert's function note).
"""

from __future__ import annotations

from typing import Any

from dashboard.llm_memory import LLMMemory
from dashboard.models import Result
from planner.report import LLM_FUNCTIONS
from planner.shapes import label_order

#: How many commits the model page's breakdown lists, newest first.
BREAKDOWN_COMMITS = 8
MAX_ROWS_PER_COMMIT = 128


def breakdown(model, *, board: str = "", branch: str = "", toolchain=None) -> dict | None:
    """The model page's table: for its newest commits with LLM results, newest first, each
    point and strategy's parameters, KV cache, functions and total; None for a model with
    none."""
    results = Result.objects.newest_ok_of(
        model, board=board, branch=branch, toolchain=toolchain
    ).filter(details__has_key="llm")
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
