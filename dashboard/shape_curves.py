"""Memory against input shape: a model measured at several points of its shape axis, as
curves over the points (one per strategy, or one per commit) and what TVM's upper-bound
planning reserves there.

TVM plans a symbolic model once, at the bound, and reserves that much whatever shape it is
run at. An engineer choosing a deployment size wants the other figure beside it: what each
point needs. Both are intermediates (the arena), so the over-allocation compares the
reservation with the best strategy's intermediates at each point, never with totals that
add outputs and workspace the reservation does not hold.

Each function reads a fixed number of queries, whatever the number of points, strategies
or commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Subquery
from django.urls import reverse

from dashboard.models import Commit, Model, Result, Toolchain
from planner.shapes import label_order

#: Commits a "one curve per commit" chart draws at most, newest last.
COMMITS = 8
#: The strategy whose own plan at each point is "TVM stock" in the over-allocation table.
STOCK_STRATEGY = "tvm-stock"
#: What the curves plot and the over-allocation compares (see the module docstring).
MEASURES = ("intermediate_bytes", "planned_bytes")


def ordered_points(labels: Iterable[str]) -> list[str]:
    return sorted(set(labels), key=label_order)


@dataclass(frozen=True)
class _Row:
    id: int
    commit_id: int
    model: str
    strategy: str
    board: str
    toolchain_id: int
    toolchain_spec: str
    tvm_version: str
    shape_label: str
    shape_point: dict
    planned_bytes: int | None
    intermediate_bytes: int | None
    reserved_at_bound_bytes: int | None
    peak_formula: dict

    @property
    def toolchain_label(self) -> str:
        return Toolchain(pk=self.toolchain_id, spec=self.toolchain_spec,
                         tvm_version=self.tvm_version).label


_ROW_COLUMNS = (
    "id", "commit_id", "model__name", "strategy__name", "board__name", "toolchain_id",
    "toolchain__spec", "toolchain__tvm_version", "shape_label", "shape_point", "planned_bytes",
    "intermediate_bytes", "reserved_at_bound_bytes", "peak_formula",
)


def _rows(results) -> list[_Row]:
    """``results`` (at shape points) as plain rows, one query; of one commit run twice, only
    the later run's row of each (model, strategy, board, toolchain, point): two models that
    share a point's label are two rows."""
    newest: dict[tuple, _Row] = {}
    for values in results.order_by("id").values_list(*_ROW_COLUMNS):
        row = _Row(*values)
        key = (row.commit_id, row.model, row.strategy, row.board, row.toolchain_id,
               row.shape_label)
        newest[key] = row
    return list(newest.values())


def _at_points(results, *, board: str = "", toolchain: Toolchain | None = None,
               branch: str = ""):
    results = results.succeeded().exclude(shape_label="")
    if board:
        results = results.on_board_named(board)
    if toolchain is not None:
        results = results.filter(toolchain=toolchain)
    if branch:
        results = results.filter(commit__branch=branch)
    return results


def _main_line(rows: list[_Row], commit_id: int) -> tuple[str, int]:
    """The (board, toolchain) curves are drawn for when the caller named none: the one with
    most results at ``commit_id`` (ties: by board name), so a second board measured once
    does not take the chart over."""
    counts: dict[tuple[str, int], int] = {}
    for row in rows:
        if row.commit_id == commit_id:
            key = (row.board, row.toolchain_id)
            counts[key] = counts.get(key, 0) + 1
    return min(counts, key=lambda key: (-counts[key], key))


def _empty_curve(points: int) -> dict:
    return {measure: [None] * points for measure in MEASURES} | {"plan_urls": [None] * points}


def _commit(commit: Commit) -> dict:
    return {
        "sha": commit.sha, "short": commit.short_sha, "title": commit.title,
        "committed_at": commit.committed_at.isoformat(),
    }


def shape_curves(
    model: Model, *, board: str = "", toolchain: Toolchain | None = None, branch: str = "",
    commits: int = COMMITS, prefer: tuple[str, int] | None = None,
) -> dict | None:
    """``model``'s planned memory against its shape points at the newest ``commits``
    commits with results at shape points (two queries); None when it has none (one query).

    One board and toolchain: ``board``/``toolchain`` where given, else ``prefer`` (a
    (board name, toolchain id) the page opens on) where it has results here, else the one
    most measured at the newest commit. The payload:

    - ``points``: [{label, point}] ordered by the point's values; every list of per-point
      values below is in this order (null where a point was not measured);
    - ``commits``: the commits drawn, oldest first; ``curves``: one per strategy at the
      newest commit ({strategy, intermediate_bytes, planned_bytes, plan_urls});
      ``commit_curves``: per strategy, one such curve per commit (``commit`` indexes
      ``commits``);
    - ``reserved_at_bound``: TVM's reservation for the symbolic build at the newest commit;
      ``overallocation``: per point, the need against stock and that reservation;
    - ``formulas``: each strategy's peak as a formula of the symbols, where it has one, and
      why not where it has none.
    """
    results = _at_points(Result.objects.for_model(model), board=board, toolchain=toolchain,
                         branch=branch)
    recent = list(
        Commit.objects.filter(id__in=Subquery(results.order_by().values("commit_id")))
        .order_by("-committed_at", "-id")[:commits]
    )
    if not recent:
        return None
    rows = _rows(results.filter(commit__in=recent))
    boards = sorted({row.board for row in rows})
    if prefer in {(row.board, row.toolchain_id) for row in rows}:
        line = prefer
    else:
        line = _main_line(rows, recent[0].pk)
    rows = [r for r in rows if (r.board, r.toolchain_id) == line]
    drawn = [c for c in reversed(recent) if any(r.commit_id == c.pk for r in rows)]
    index = {commit.pk: i for i, commit in enumerate(drawn)}
    points = ordered_points(row.shape_label for row in rows)
    at = {label: i for i, label in enumerate(points)}
    latest = drawn[-1].pk
    strategies = sorted({row.strategy for row in rows})
    by_commit: dict[str, dict[int, dict]] = {}
    for row in rows:
        curve = by_commit.setdefault(row.strategy, {}).setdefault(
            row.commit_id, _empty_curve(len(points))
        )
        for measure in MEASURES:
            curve[measure][at[row.shape_label]] = getattr(row, measure)
        curve["plan_urls"][at[row.shape_label]] = reverse("result-plan", args=[row.id])
    newest = [row for row in rows if row.commit_id == latest]
    table = overallocation(newest, points)
    shape_points = {row.shape_label: row.shape_point for row in rows}
    return {
        "model": {"id": model.pk, "name": model.name},
        "board": line[0],
        "boards": boards,
        "toolchain": next(r.toolchain_label for r in rows),
        "measures": list(MEASURES),
        "points": [{"label": label, "point": shape_points[label]} for label in points],
        "commits": [_commit(commit) for commit in drawn],
        "strategies": strategies,
        "best_strategy": _best(newest, points),
        "curves": [
            {"strategy": name, **by_commit[name][latest]}
            for name in strategies if latest in by_commit[name]
        ],
        "commit_curves": {
            name: [
                {"commit": index[commit_id], **curve}
                for commit_id, curve in sorted(by_commit[name].items(),
                                               key=lambda item: index[item[0]])
            ]
            for name in strategies
        },
        "reserved_at_bound": [row["reserved_bytes"] for row in table],
        "overallocation": table,
        "formulas": formulas(newest, points),
    }


def overallocation(rows: list[_Row], points: list[str]) -> list[dict]:
    """Per point of ``rows`` (one commit, board and toolchain): the need (the smallest
    intermediates any strategy planned), TVM stock's own plan there, what TVM reserves for
    the symbolic build at the bound, and that reservation over the need."""
    table = []
    for label in points:
        here = [row for row in rows if row.shape_label == label]
        planned = [row for row in here if row.intermediate_bytes is not None]
        best = min(planned, key=lambda row: (row.intermediate_bytes, row.strategy), default=None)
        stock = next((row for row in here if row.strategy == STOCK_STRATEGY), None)
        # The same on every strategy's report of a point (one symbolic build): take any.
        reserved = max(
            (row.reserved_at_bound_bytes for row in here
             if row.reserved_at_bound_bytes is not None),
            default=None,
        )
        need = best.intermediate_bytes if best else None
        table.append({
            "point": label,
            "need_bytes": need,
            "need_strategy": best.strategy if best else None,
            "stock_bytes": stock.intermediate_bytes if stock else None,
            "reserved_bytes": reserved,
            "ratio": round(reserved / need, 2) if reserved is not None and need else None,
        })
    return table


def _best(rows: list[_Row], points: list[str]) -> str | None:
    """The strategy with the smallest intermediates at the largest point it was measured
    at: the one worth following over commits by default."""
    for label in reversed(points):
        here = [r for r in rows if r.shape_label == label and r.intermediate_bytes is not None]
        if here:
            return min(here, key=lambda row: (row.intermediate_bytes, row.strategy)).strategy
    return None


def formulas(rows: list[_Row], points: list[str]) -> list[dict]:
    """Each strategy's peak formula among ``rows`` (one commit), with whether its plan held
    at every point of the axis (a plan valid there, never below the planned bytes); or,
    where the compile said why it has none, ``{"strategy", "missing": why}``."""
    found = []
    for strategy in sorted({row.strategy for row in rows}):
        formula = next(
            (row.peak_formula for row in rows if row.strategy == strategy and row.peak_formula),
            None,
        )
        if formula and not formula.get("expression") and formula.get("missing"):
            found.append({"strategy": strategy, "missing": str(formula["missing"])})
            continue
        if not formula or not formula.get("expression"):
            continue
        checked = formula.get("checked") or {}
        # A point whose own compile failed is no evidence either way: left out, and named.
        left_out = [label for label in points if (checked.get(label) or {}).get("point_failed")]
        points = [label for label in points if label not in left_out]
        held = [
            label for label in points
            if (checked.get(label) or {}).get("valid_plan")
            and (checked[label].get("formula_at_least_planned") is not False)
        ]
        found.append({
            "strategy": strategy,
            "of": formula.get("of", "intermediate_bytes"),
            "expression": formula["expression"],
            "range": formula.get("range") or {},
            "ties": formula.get("ties") or {},
            "points_checked": len(held),
            "points": len(points),
            "checked_everywhere": bool(points) and len(held) == len(points),
            "left_out": left_out,
        })
    return found


def shape_comparison(base: Commit, head: Commit) -> dict:
    """Planned bytes at each shape point at ``base`` and at ``head``, per model with a shape
    axis (one query): ``{"models": [{model, board, toolchain, points, strategies,
    default_strategy, curves: {strategy: {base: [...], head: [...], base_urls, head_urls}},
    rows: [{strategy, point, base_bytes, head_bytes, change, relative_change}]}]}``, the
    curves' lists in the order of ``points``. Planned bytes, as the rest of the comparison
    and the alerts compare."""
    rows = _rows(_at_points(Result.objects.filter(commit__in=[base, head])))
    models = []
    for name in sorted({row.model for row in rows}):
        of_model = [row for row in rows if row.model == name]
        side = head.pk if any(r.commit_id == head.pk for r in of_model) else base.pk
        line = _main_line(of_model, side)
        of_model = [r for r in of_model if (r.board, r.toolchain_id) == line]
        points = ordered_points(row.shape_label for row in of_model)
        at = {label: i for i, label in enumerate(points)}
        strategies = sorted({row.strategy for row in of_model})
        curves = {
            strategy: {key: [None] * len(points)
                       for key in ("base", "head", "base_urls", "head_urls")}
            for strategy in strategies
        }
        for row in of_model:
            sides = ("base",) if row.commit_id == base.pk else ()
            sides += ("head",) if row.commit_id == head.pk else ()
            for key in sides:
                curves[row.strategy][key][at[row.shape_label]] = row.planned_bytes
                curves[row.strategy][f"{key}_urls"][at[row.shape_label]] = reverse(
                    "result-plan", args=[row.id]
                )
        table = []
        for strategy in strategies:
            curve = curves[strategy]
            for i, label in enumerate(points):
                before, after = curve["base"][i], curve["head"][i]
                both = before is not None and after is not None
                table.append({
                    "strategy": strategy, "point": label,
                    "base_bytes": before, "head_bytes": after,
                    "change": after - before if both else None,
                    "relative_change": (after - before) / before if both and before else None,
                })
        models.append({
            "model": name,
            "board": line[0],
            "toolchain": next(r.toolchain_label for r in of_model),
            "points": points,
            "strategies": strategies,
            "default_strategy": _best([r for r in of_model if r.commit_id == side], points),
            "curves": curves,
            "rows": table,
        })
    return {"models": models}


def other_points(result: Result) -> list[dict]:
    """The same model, strategy, board, toolchain and commit at each shape point measured,
    ordered by the point (``result``'s own marked ``current``): what the plan page offers to
    switch to. No query for a result without a shape axis."""
    if not result.shape_label:
        return []
    newest = dict(
        Result.objects.filter(
            commit_id=result.commit_id, model_id=result.model_id,
            strategy_id=result.strategy_id, board_id=result.board_id,
            toolchain_id=result.toolchain_id,
        )
        .exclude(shape_label="")
        .order_by("id")
        .values_list("shape_label", "id")
    )
    newest[result.shape_label] = result.pk
    return [
        {"label": label, "url": reverse("result-plan", args=[newest[label]]),
         "current": label == result.shape_label}
        for label in ordered_points(newest)
    ]
