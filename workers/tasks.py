"""Celery tasks: take IDs, re-read the rows, call one function, record state in our tables."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from dashboard import actions
from dashboard.models import Result, Run
from workers import boards, gitrepo, manifest

log = logging.getLogger(__name__)


def _load_run(run_id: int) -> Run | None:
    run = Run.objects.select_related("repository", "commit").filter(pk=run_id).first()
    if run is None:
        # Deleted while queued (or a message from another database): nothing to do.
        log.warning("run %s does not exist; dropping the task", run_id)
    return run


def _suite_for(run: Run) -> manifest.Suite:
    from planner.compile import strategy_names

    repo = gitrepo.mirror(run.repository.clone_url, settings.PEAKWATCH["WORK_DIR"])
    text = gitrepo.read_file(repo, run.commit.sha, manifest.MANIFEST_PATH)
    return manifest.parse(text, known_strategies=strategy_names())


@shared_task(name="workers.tasks.plan_run")
def plan_run(run_id: int) -> None:
    """Read the manifest at the run's commit and fan the work out to the boards' queues."""
    run = _load_run(run_id)
    if run is None or run.is_finished:
        return
    try:
        suite = _suite_for(run)
    except (gitrepo.GitError, manifest.ManifestError) as exc:
        actions.finish_run(run, error=str(exc))
        return
    actions.begin_run(
        run,
        models=[(m.name, m.source) for m in suite.models],
        strategies=suite.strategies,
        boards=suite.boards,
        total=suite.size,
    )
    actions.append_log(
        run,
        f"{len(suite.models)} models x {len(suite.strategies)} strategies "
        f"x {len(suite.boards)} boards",
    )
    for board in suite.boards:
        run_on_board.apply_async(args=[run_id, board], queue=boards.queue_for(board))


@shared_task(name="workers.tasks.run_on_board")
def run_on_board(run_id: int, board: str) -> None:
    """Compile and measure every model x strategy of the run on ``board``.

    A redelivered task (its worker died) skips what is already recorded, so the run
    resumes instead of starting over.
    """
    run = _load_run(run_id)
    if run is None or run.is_finished:
        return
    try:
        suite = _suite_for(run)
        runner = boards.runner_for(board)
    except (gitrepo.GitError, manifest.ManifestError, boards.UnknownBoard) as exc:
        actions.finish_run(run, error=str(exc))
        return
    actions.mark_board_seen(board, runner.describe())
    repeat = settings.PEAKWATCH["LATENCY_REPEAT"]
    try:
        for entry in suite.models:
            done = set(
                Result.objects.filter(
                    run=run, model__name=entry.name, board__name=board
                ).values_list("strategy__name", flat=True)
            )
            todo = [s for s in suite.strategies if s not in done]
            if not todo:
                continue
            actions.append_log(run, f"{entry.name} on {board}: {', '.join(todo)}")
            with tempfile.TemporaryDirectory(prefix="peakwatch-") as tmp:
                for strategy, report in zip(
                    todo, _measure(runner, entry, todo, Path(tmp), repeat), strict=True
                ):
                    actions.record_result(
                        run, model=entry.name, strategy=strategy, board=board, report=report
                    )
    except SoftTimeLimitExceeded:
        actions.finish_run(run, error=f"board {board}: the run exceeded its time limit")
        return
    actions.append_log(run, f"board {board} done")
    actions.finish_run(run)


def _measure(runner, entry: manifest.ModelEntry, strategies, tmp: Path, repeat: int):
    try:
        return runner.measure(
            model_name=entry.name,
            source=entry.source,
            params=entry.params,
            strategies=strategies,
            artifacts_dir=tmp,
            repeat=repeat,
        )
    except SoftTimeLimitExceeded:
        raise
    except Exception as exc:
        # A model that does not build is a failed Result per strategy, not a lost run.
        log.exception("model %s failed to build", entry.name)
        return [
            {"error": f"{type(exc).__name__}: {exc}", "model_source": entry.source}
            for _ in strategies
        ]
