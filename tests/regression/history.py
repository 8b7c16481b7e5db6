"""Recording made-up runs quickly, through the same actions the workers call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard import actions
from dashboard.models import Run
from planner.report import StrategyReport
from tests.conftest import fake_report

START = datetime(2026, 11, 1, tzinfo=UTC)


def record_run(repository, index: int, figures: dict, *, parent: str = "", branch: str = "main",
               pull_request=None, sha: str | None = None, tolerances: dict | None = None,
               board: str = "cpu") -> Run:
    """A finished run of commit ``index`` on ``board`` with ``figures``: {(model, strategy):
    report}; ``tolerances`` the alert tolerance its manifest set, by the same keys."""
    commit = actions.record_commit(
        repository, sha=sha or f"{index:02d}" + "c" * 38, parent_sha=parent, branch=branch,
        author="Ada Planner", message=f"Commit {index}",
        committed_at=START + timedelta(hours=index),
    )
    run = Run.objects.create(
        repository=repository, commit=commit, trigger="test", pull_request=pull_request
    )
    actions.begin_run(
        run, models=[(m, "zoo:small_cnn") for m, _ in figures],
        strategies=sorted({s for _, s in figures}), boards=[board], total=len(figures),
    )
    for (model, strategy), report in figures.items():
        actions.record_result(run, model=model, strategy=strategy, board=board, report=report,
                              tolerance=(tolerances or {}).get((model, strategy)))
    actions.finish_run(run)
    run.refresh_from_db()
    return run


def bytes_only(planned: int, latency: float = 1.0, samples=None, **extra) -> StrategyReport:
    report = fake_report(planned, latency, **extra)
    if samples is not None:
        report.latency_ms["samples"] = list(samples)
    return report


def micro_report(planned: int, ram, *, static: int = 9000, over: bool = False):
    """A report of a micro board that used ``ram`` bytes of RAM (static and stack)."""
    stack = ram - static if isinstance(ram, int) and not isinstance(ram, bool) else 0
    return bytes_only(planned, board={
        "kind": "micro", "machine": "mps2-an386", "memory_capacity": 262144,
        "over_capacity": over, "ram_bytes": ram, "static_ram_bytes": static,
        "stack_bytes": stack, "arena_bytes": planned, "flash_bytes": 40_000,
        "flash_capacity": 4_194_304, "instructions": 123_456,
    })
