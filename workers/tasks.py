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
from workers import boards, compile_cache, gitrepo, manifest

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
        runner = boards.runner_for(board, settings.PEAKWATCH_BOARDS)
    except (gitrepo.GitError, manifest.ManifestError, boards.UnknownBoard) as exc:
        actions.finish_run(run, error=str(exc))
        return
    health = runner.health()
    info = {**runner.describe(), **health.to_json(), "current_run": run.pk}
    actions.mark_board_seen(
        board, info, kind=runner.kind, target=runner.target,
        memory_capacity=runner.memory_capacity,
    )
    if not health.online:
        _record_offline(run, suite, board, health.reason)
        actions.mark_board_seen(board, {**info, "current_run": None})
        return
    try:
        _run_suite(run, suite, board, runner)
    finally:
        actions.mark_board_seen(board, {**info, "current_run": None})


def _run_suite(run: Run, suite: manifest.Suite, board: str, runner) -> None:
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
            keys = _cache_keys(run, entry, runner, todo)
            todo = _reuse_cached(run, entry, board, todo, keys)
            if not todo:
                continue
            actions.append_log(run, f"{entry.name} on {board}: {', '.join(todo)}")
            with tempfile.TemporaryDirectory(prefix="peakwatch-") as tmp:
                for strategy, report in zip(
                    todo, _measure(runner, entry, todo, Path(tmp), repeat), strict=True
                ):
                    actions.record_result(
                        run, model=entry.name, strategy=strategy, board=board, report=report,
                        cache_key=keys.get(strategy, ""),
                    )
    except SoftTimeLimitExceeded:
        actions.finish_run(run, error=f"board {board}: the run exceeded its time limit")
        return
    actions.append_log(run, f"board {board} done")
    actions.finish_run(run)


def _record_offline(run: Run, suite: manifest.Suite, board: str, reason: str) -> None:
    """Fail what the board cannot run, loudly: every Result says why, and so does the run.

    An offline board (no GPU on the worker's host, an unreachable RPC device) must not look
    like a board whose models all broke, nor leave the run waiting forever.
    """
    error = f"board offline: {reason}"
    for entry in suite.models:
        done = set(
            Result.objects.filter(
                run=run, model__name=entry.name, board__name=board
            ).values_list("strategy__name", flat=True)
        )
        for strategy in suite.strategies:
            if strategy not in done:
                actions.record_result(
                    run, model=entry.name, strategy=strategy, board=board,
                    report={"error": error, "model_source": entry.source},
                )
    actions.append_log(run, f"board {board} is offline: {reason}")
    actions.finish_run(run, error=f"board {board} is offline: {reason}")


def _cache_keys(run: Run, entry: manifest.ModelEntry, runner, strategies) -> dict[str, str]:
    """The compile-cache key of each strategy; empty when the model's content is unknown."""
    repo = None
    if not entry.source.startswith("zoo:"):
        repo = gitrepo.mirror(run.repository.clone_url, settings.PEAKWATCH["WORK_DIR"])
    content = compile_cache.model_content_hash(entry, repo, run.commit.sha)
    if content is None:
        return {}
    version = compile_cache.tvm_version()
    return {s: compile_cache.cache_key(content, s, version, runner.target) for s in strategies}


def _reuse_cached(run: Run, entry, board: str, strategies, keys: dict[str, str]) -> list[str]:
    """Record cached figures for what was compiled before; return what still needs a compile."""
    todo, reused = [], []
    for strategy in strategies:
        source = None
        if strategy in keys:
            source = Result.objects.cached(keys[strategy], board).exclude(run=run).first()
        if source is None:
            todo.append(strategy)
            continue
        actions.reuse_result(run, model=entry.name, strategy=strategy, board=board, source=source)
        reused.append(f"{strategy} (from run {source.run_id})")
    if reused:
        actions.append_log(run, f"{entry.name} on {board}: unchanged, reused {', '.join(reused)}")
    return todo


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
