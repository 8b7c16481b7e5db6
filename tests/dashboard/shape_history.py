"""A model with a shape axis, recorded through the actions a worker calls: what the pages
that draw memory against shape are tested with."""

from __future__ import annotations

from datetime import timedelta

from dashboard import actions
from dashboard.models import Run
from planner.shapes import label
from tests.regression.history import START, bytes_only

SIDES = (64, 256, 1024)
#: The points' labels in the order every page must list them.
POINTS = ["h=64,w=64", "h=256,w=256", "h=1024,w=1024"]
#: Recorded in this order, so a page that keeps it (or sorts labels as text) shows it.
RECORDED = (256, 1024, 64)
#: Intermediates per pixel under each strategy; best-fit is the need.
FACTORS = {"tvm-stock": 96, "greedy-by-size": 80, "best-fit": 64}
#: What TVM reserves for the symbolic build at the bound (h = w = 1024), the same for all.
RESERVED = 96 * 1024 * 1024
COMMITS = 3
#: What best-fit's intermediates grow by at h=1024 with each commit.
GROWTH = 4096


def point(side: int) -> dict[str, int]:
    return {"h": side, "w": side}


def intermediates(strategy: str, side: int, commit: int) -> int:
    grown = GROWTH * commit if strategy == "best-fit" and side == 1024 else 0
    return FACTORS[strategy] * side * side + grown


def _formula(held: tuple[int, ...]) -> dict:
    return {
        "of": "intermediate_bytes",
        "expression": "64*h^2",
        "terms": ["64*h^2"],
        "symbols": ["h"],
        "ties": {"w": "h"},
        "strategy": "best-fit",
        "range": {"h": [64, 1024]},
        "at_bound": 64 << 20,
        "checked": {
            label(point(side)): {"valid_plan": side in held, "formula_at_least_planned": True}
            for side in SIDES
        },
    }


#: Why tvm-stock has no formula, as the compile says it.
STOCK_MISSING = "TVM's planner plans the symbolic build once, at the bound"
#: best-fit's formula held at every point; greedy-by-size's plan broke at the largest.
FORMULAS = {
    "best-fit": _formula(SIDES),
    "greedy-by-size": _formula(SIDES[:2]),
    "tvm-stock": {"missing": STOCK_MISSING},
}


def record_shape_history(repository, model: str = "pool", *, first: int = 0) -> list[Run]:
    """``COMMITS`` finished runs of ``model`` on main (commits ``first`` on), each at every
    point under every strategy of ``FACTORS`` on cpu."""
    runs, parent = [], ""
    for i in range(COMMITS):
        run = _record_run(
            repository, model, number=first + i, parent_sha=parent,
            committed_at=START + timedelta(days=30, hours=first + i),
            need=lambda strategy, side, i=i: intermediates(strategy, side, i),
        )
        parent = run.commit.sha
        runs.append(run)
    return runs


def record_growth(
    repository, grown: dict[tuple[str, int], int], *, model: str = "pool"
) -> Run:
    """One more finished run of ``model`` on main, after ``record_shape_history``'s: every
    point under every strategy as at its last commit, but each (strategy, side) of
    ``grown`` larger by its bytes, so each of those alerts (and nothing else does)."""
    last = (
        Run.objects.filter(repository=repository, commit__branch="main")
        .latest("commit__committed_at").commit
    )
    return _record_run(
        repository, model, number=int(last.sha[:2]) + 1, parent_sha=last.sha,
        committed_at=last.committed_at + timedelta(hours=1),
        need=lambda strategy, side: (
            intermediates(strategy, side, COMMITS - 1) + grown.get((strategy, side), 0)
        ),
    )


def _record_run(
    repository, model: str, *, number: int, parent_sha: str, committed_at, need
) -> Run:
    """Commit ``number`` on main and its finished run: every recorded point under every
    strategy, planning ``need(strategy, side)`` bytes of intermediates."""
    commit = actions.record_commit(
        repository, sha=f"{number:02d}" + "e" * 38, parent_sha=parent_sha, branch="main",
        author="Ada Planner", message=f"Shape commit {number}", committed_at=committed_at,
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(
        run, models=[(model, "zoo:pool_reuse")], strategies=sorted(FACTORS),
        boards=["cpu"], total=len(FACTORS) * len(SIDES),
    )
    for side in RECORDED:
        for strategy in FACTORS:
            report = bytes_only(
                need(strategy, side) + 1024, shape_point=point(side),
                reserved_at_bound_bytes=RESERVED, peak_formula=FORMULAS.get(strategy, {}),
            )
            actions.record_result(run, model=model, strategy=strategy, board="cpu", report=report)
    actions.finish_run(run)
    run.refresh_from_db()
    return run
