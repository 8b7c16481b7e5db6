"""Both forms of a mixture of experts on one model's page.

A manifest lists a model twice to see both forms (``moe = "dense"`` and ``moe = "grouped"``,
the same ``source``): each is a model of its own, with its own series and alerts, and each
Result says its form in its assumption line (:mod:`planner.tvm.sources.experts`). The page
of either shows the two side by side: the newest commit both were measured at, each
strategy, board and point's planned bytes in each form and grouped over dense.
"""

from __future__ import annotations

import re

from dashboard.models import Model, Result

#: How a Result's assumption line names its form.
FORM = re.compile(r"^mixture of experts in fixed shapes, (dense|grouped) form")

#: Results read per model: enough for the newest commits of any suite.
RECENT = 400


def form_of(result: Result) -> str | None:
    """``dense``, ``grouped``, or None for a Result with no mixture of experts."""
    for line in result.details.get("assumptions") or ():
        found = FORM.match(line) if isinstance(line, str) else None
        if found:
            return found.group(1)
    return None


def _newest(model: Model, board: str, branch: str, toolchain) -> dict[str, dict]:
    """Per commit sha, newest first: ``{(strategy, board, point): Result}`` and the form."""
    results = Result.objects.newest_ok_of(model, board=board, branch=branch, toolchain=toolchain)
    commits: dict[str, dict] = {}
    for result in results[:RECENT]:
        form = form_of(result)
        if form is None:
            continue
        entry = commits.setdefault(result.commit.sha, {"commit": result.commit, "rows": {}})
        entry.setdefault("form", form)
        # Of one commit run twice, the later run's.
        key = (result.strategy.name, result.board.name, result.shape_label)
        entry["rows"][key] = result
    return commits


def forms(model: Model, *, board: str = "", branch: str = "", toolchain=None) -> dict | None:
    """The page's table: None where the model's Results hold no mixture of experts or no
    model of its repository with the same source was measured in the other form."""
    if not model.source or getattr(model, "same_source", 2) < 2:
        return None
    mine = _newest(model, board, branch, toolchain)
    if not mine:
        return None
    form = next(iter(mine.values()))["form"]
    for other in Model.objects.filter(repository=model.repository, source=model.source) \
            .exclude(pk=model.pk).order_by("name"):
        theirs = _newest(other, board, branch, toolchain)
        common = [sha for sha in mine if sha in theirs and theirs[sha]["form"] != form]
        if common:
            return _table(model, other, mine[common[0]], theirs[common[0]], form)
    return None


def _table(model, other, mine: dict, theirs: dict, form: str) -> dict:
    dense, grouped = (mine, theirs) if form == "dense" else (theirs, mine)
    rows = []
    for key in sorted(set(dense["rows"]) & set(grouped["rows"])):
        strategy, board, point = key
        d, g = dense["rows"][key], grouped["rows"][key]
        ratio = g.planned_bytes / d.planned_bytes if d.planned_bytes and g.planned_bytes \
            else None
        rows.append({"strategy": strategy, "board": board, "point": point, "dense": d,
                     "grouped": g, "ratio": ratio})
    return {
        "commit": mine["commit"], "form": form, "other": other,
        "other_form": "grouped" if form == "dense" else "dense",
        "dense_model": model if form == "dense" else other,
        "grouped_model": other if form == "dense" else model,
        "rows": rows,
    }
