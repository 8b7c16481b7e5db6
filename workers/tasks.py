"""Celery tasks of a run: take IDs, re-read the rows, call one function, record state.

``plan_run`` reads the manifest at the run's commit and fans out one ``run_on_board`` per
board to the board's own queue. ``run_on_board`` materialises the commit's tree, and for
each model compiles every strategy in the sandbox (:mod:`workers.sandbox`), so the
repository's code never runs in the worker, then records each Result as it comes.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from dashboard import actions, gitrepo, queue
from dashboard.models import Result, Run
from planner.checkout_reads import CheckoutReads, InvalidReads, parse_reads
from planner.report import StrategyReport
from planner.shapes import label
from workers import boards, compile_cache, manifest, sandbox, toolchains

log = logging.getLogger(__name__)


class RunTask(Task):
    """A task that works on one run and closes it, failed, whenever the task fails.

    Expected errors (``throws``) are a bad manifest, an unreachable repository, an unknown
    board: the run says so. Anything else is a bug, logged with its traceback, and the run
    says that too rather than waiting forever. A worker killed mid-task is not a failure:
    the message is redelivered (``acks_late``) and the task resumes.
    """

    throws = (
        gitrepo.GitError, manifest.ManifestError, boards.UnknownBoard, SoftTimeLimitExceeded
    )

    def __call__(self, *args, **kwargs):
        # Expected failures close the run here, however the task was called (by a worker,
        # eagerly in process, or directly), and are not errors of the task itself.
        try:
            return super().__call__(*args, **kwargs)
        except self.throws as exc:
            self._close(args, kwargs, exc)
            return None

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        self._close(args, kwargs, exc)

    def _close(self, args, kwargs, exc) -> None:
        run = Run.objects.filter(pk=args[0] if args else kwargs.get("run_id")).first()
        if run is None:
            return
        if isinstance(exc, SoftTimeLimitExceeded):
            error = "the run exceeded its time limit"
        elif isinstance(exc, self.throws):
            error = str(exc)
        else:
            log.error("%s failed on run %s", self.name, run.pk, exc_info=exc)
            error = f"internal error in {self.name}: {type(exc).__name__}: {exc}"
        board = args[1] if len(args) > 1 else kwargs.get("board")
        if board:
            error = f"board {board}: {error}"
        actions.append_log(run, error)
        actions.finish_run(run, error=error)


def _load_run(run_id: int) -> Run | None:
    run = Run.objects.select_related("repository", "commit").filter(pk=run_id).first()
    if run is None:
        # Deleted while queued (or a message from another database): nothing to do.
        log.warning("run %s does not exist; dropping the task", run_id)
    return run


def _mirror(run: Run) -> Path:
    return gitrepo.mirror(run.repository.clone_url, settings.PEAKWATCH["WORK_DIR"])


def _suite_for(run: Run, mirror: Path) -> manifest.Suite:
    from planner.tvm.strategies import strategy_names

    text = gitrepo.read_file(mirror, run.commit.sha, manifest.MANIFEST_PATH)
    return manifest.parse(text, known_strategies=strategy_names())


@shared_task(name=queue.PLAN_RUN, base=RunTask, bind=True)
def plan_run(self, run_id: int) -> None:
    """Read the manifest at the run's commit and fan the work out to the boards' queues."""
    run = _load_run(run_id)
    if run is None or run.is_finished or run.awaits_approval:
        return
    suite = _suite_for(run, _mirror(run))
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
        f"x {len(suite.boards)} boards"
        + (f" x {len(suite.toolchains)} toolchains" if len(suite.toolchains) > 1 else ""),
    )
    for board in suite.boards:
        run_on_board.apply_async(args=[run_id, board], queue=queue.board_queue(board))


@shared_task(name=queue.RUN_ON_BOARD, base=RunTask, bind=True)
def run_on_board(self, run_id: int, board: str) -> None:
    """Compile and measure every model x strategy of the run on ``board``.

    A redelivered task (its worker died) skips what is already recorded, so the run
    resumes instead of starting over.
    """
    run = _load_run(run_id)
    if run is None or run.is_finished or run.awaits_approval:
        return
    mirror = _mirror(run)
    suite = _suite_for(run, mirror)
    runner = boards.runner_for(
        board, settings.PEAKWATCH_BOARDS,
        limits=sandbox.Limits.from_settings(settings.PEAKWATCH.get("SANDBOX")),
    )
    health = runner.health()
    info = {**runner.describe(), **health.to_json(), "current_run": run.pk}
    actions.mark_board_seen(
        board, info, kind=runner.kind, target=runner.target,
        memory_capacity=runner.memory_capacity,
    )
    try:
        if not health.online:
            _record_offline(run, suite, board, health.reason)
            return
        _run_suite(run, suite, board, runner, mirror)
    finally:
        actions.mark_board_seen(board, {**info, "current_run": None})


def _missing(
    run: Run, suite: manifest.Suite, entry: manifest.ModelEntry, board: str, toolchain: str
) -> list[tuple[str, dict[str, int]]]:
    """The (strategy, shape point) pairs of ``entry`` not recorded yet, point by point."""
    done = set(
        Result.objects.filter(
            run=run, model__name=entry.name, board__name=board, toolchain__spec=toolchain
        ).values_list("strategy__name", "shape_label")
    )
    return [
        (strategy, point)
        for point, at in zip(entry.points, entry.labels, strict=True)
        for strategy in suite.strategies
        if (strategy, at) not in done
    ]


def _at(point: dict[str, int]) -> str:
    return f" at {label(point)}" if point else ""


def _run_suite(run: Run, suite: manifest.Suite, board: str, runner, mirror: Path) -> None:
    repeat = settings.PEAKWATCH["LATENCY_REPEAT"]
    with tempfile.TemporaryDirectory(prefix="peakwatch-run-") as scratch:
        tree = None
        if suite.reads_repository:
            tree = gitrepo.checkout(mirror, run.commit.sha, Path(scratch) / "tree")
        for number, spec in enumerate(suite.toolchains):
            if not any(_missing(run, suite, entry, board, spec) for entry in suite.models):
                continue
            try:
                toolchain = toolchains.acquire(spec, lambda line: actions.append_log(run, line))
            except toolchains.ToolchainError as exc:
                _record_refused(run, suite, board, spec, str(exc))
                continue
            actions.record_toolchain(
                spec, tvm_version=toolchain.tvm_version, tvm_git_hash=toolchain.tvm_git_hash
            )
            for index, entry in enumerate(suite.models):
                _run_model(
                    run, suite, entry, board, runner, mirror, toolchain, tree=tree,
                    artifacts=Path(scratch) / f"model-{number}-{index}", repeat=repeat,
                )
    actions.append_log(run, f"board {board} done")
    actions.finish_run(run)


def _run_model(
    run: Run, suite: manifest.Suite, entry: manifest.ModelEntry, board: str, runner,
    mirror: Path, toolchain: toolchains.Toolchain, *, tree: Path | None, artifacts: Path,
    repeat: int,
) -> None:
    """Compile and record what is missing of one model under one toolchain."""
    spec = toolchain.spec
    todo = _missing(run, suite, entry, board, spec)
    if not todo:
        return
    cache = _CacheLookup(run, suite, entry, runner, mirror, toolchain)
    keys = cache.whole_tree_keys(todo)
    with actions.snapshots_deferred():
        todo = _reuse_cached(run, entry, board, todo, keys, _label(toolchain), cache=cache)
    if not todo:
        return
    where = f"{entry.name} on {board} with {_label(toolchain)}"
    # One compile covers every point of the strategies left: the points share its import,
    # and TVM's reservation at the bound is one build for all of them.
    strategies = list(dict.fromkeys(strategy for strategy, _ in todo))
    points = list({label(point): point for _, point in todo}.values())
    axis = None
    if entry.shapes is not None:
        axis = entry.shapes.at(points).to_json()
    actions.append_log(
        run, f"{where}: {', '.join(strategies)}"
        + (f" at {'; '.join(label(p) for p in points)}" if axis else "")
    )
    artifacts.mkdir()
    reports = runner.measure(
        model_name=entry.name, source=entry.source, params=entry.params,
        strategies=strategies, artifacts_dir=artifacts, repeat=repeat, tree=tree,
        pipeline=suite.pipeline, toolchain=toolchain if spec else None, shapes=axis,
        moe=entry.moe,
    )
    wanted = {(strategy, label(point)) for strategy, point in todo}
    # One trend snapshot for the model's results, once they are all in.
    with actions.snapshots_deferred():
        for report in reports:
            key = (report.strategy, label(report.shape_point))
            if key not in wanted:
                # Recorded already: a point the compile had to cover for another strategy.
                continue
            if not report.ok:
                actions.append_log(
                    run, f"{where} / {report.strategy}{_at(report.shape_point)}: {report.error}"
                )
            actions.record_result(
                run, model=entry.name, strategy=report.strategy, board=board, report=report,
                cache_key=keys.get(key, "") if report.ok else "", toolchain=spec,
                reads=cache.recorded(report) if report.ok else None,
                tolerance=suite.tolerance_for(entry, key[1]),
            )


def _label(toolchain: toolchains.Toolchain) -> str:
    """The toolchain as the run log names it: two toolchains of a suite must read apart."""
    if toolchain.spec:
        return toolchain.spec
    return f"the worker's TVM {toolchain.tvm_version}".rstrip()


def _record_refused(
    run: Run, suite: manifest.Suite, board: str, spec: str, reason: str
) -> None:
    """A toolchain that cannot be made or cannot work fails its own Results, with the
    reason; the suite's other toolchains still run."""
    actions.append_log(run, reason)
    for entry in suite.models:
        _record_failed(run, suite, entry, board, spec, reason)


def _record_failed(
    run: Run, suite: manifest.Suite, entry: manifest.ModelEntry, board: str, spec: str,
    error: str,
) -> None:
    """Fail every (strategy, point) of ``entry`` not recorded yet with ``error``: an error
    for a whole model is one failed Result per point, as its figures would have been."""
    for strategy, point in _missing(run, suite, entry, board, spec):
        actions.record_result(
            run, model=entry.name, strategy=strategy, board=board, toolchain=spec,
            report=StrategyReport.failed(
                entry.name, strategy, error, model_source=entry.source, shape_point=dict(point)
            ),
        )


def _record_offline(run: Run, suite: manifest.Suite, board: str, reason: str) -> None:
    """Fail what the board cannot run, loudly: every Result says why, and so does the run.

    An offline board (no GPU on the worker's host, an unreachable RPC device) must not look
    like a board whose models all broke, nor leave the run waiting forever.
    """
    error = f"board offline: {reason}"
    for spec in suite.toolchains:
        for entry in suite.models:
            _record_failed(run, suite, entry, board, spec, error)
    actions.append_log(run, f"board {board} is offline: {reason}")
    actions.finish_run(run, error=f"board {board} is offline: {reason}")


#: Earlier compiles of a model x strategy x point whose records are tried at a commit.
RECORDED_CANDIDATES = 20
#: ``Result.reads["observed_by"]`` of a record the worker's view of the checkout made
#: (workers/sandbox/view.py): the only records a later commit's key is narrowed by. Records
#: from before it, which the repository's own process wrote, are not.
OBSERVED_BY_VIEW = "the worker's view of the checkout"


class _CacheLookup:
    """The compile-cache keys of one model under one toolchain at the run's commit, by the
    whole tree and by what earlier compiles read (workers/compile_cache.py)."""

    def __init__(self, run: Run, suite, entry, runner, mirror: Path, toolchain):
        self.run, self.suite, self.entry, self.mirror = run, suite, entry, mirror
        self.toolchain = toolchain.spec
        self.identity = runner.cache_identity
        if toolchain.spec:
            self.version, self.extra = toolchain.tvm_version, {
                "toolchain": toolchain.identity,
                "environment": compile_cache.environment_fingerprint(
                    compile_cache.toolchain_folders(tuple(toolchain.folders))
                ),
            }
        else:
            self.version, self.extra = compile_cache.tvm_version(), {}
        self._by_reads: dict[CheckoutReads, str | None] = {}

    def key(self, content: str, strategy: str, point: dict[str, int]) -> str:
        return compile_cache.cache_key(
            content, strategy, self.version, self.identity,
            repository=self.run.repository_id, shape=label(point), **self.extra,
        )

    def whole_tree_keys(self, todo) -> dict[tuple[str, str], str]:
        """The whole-tree key of each (strategy, shape label) of ``todo``; empty when the
        model's content is unknown."""
        content = compile_cache.model_content_hash(
            self.entry, self.suite, self.mirror, self.run.commit.sha
        )
        if content is None:
            return {}
        return {
            (strategy, label(point)): self.key(content, strategy, point)
            for strategy, point in todo
        }

    def _read_key(self, reads: CheckoutReads, strategy: str, point) -> str | None:
        if reads not in self._by_reads:
            self._by_reads[reads] = compile_cache.reads_content_hash(
                self.entry, self.suite, reads, self.mirror, self.run.commit.sha
            )
        content = self._by_reads[reads]
        return self.key(content, strategy, point) if content is not None else None

    def recorded(self, report: StrategyReport) -> dict | None:
        """What ``report``'s compile looked at and the key it gives here, for
        ``Result.reads``; or why the Result is keyed by the whole tree."""
        reads = report.checkout_reads
        if reads is None:
            return {"whole_tree": report.whole_tree_because} if report.whole_tree_because \
                else None
        key = self._read_key(reads, report.strategy, report.shape_point)
        if not key:
            return {"whole_tree": "the commit's tree could not be listed"}
        return {**reads.to_json(), "key": key, "observed_by": OBSERVED_BY_VIEW}

    def unchanged_since(self, board: str, strategy: str, point) -> Result | None:
        """An earlier compile whose recorded files are all unchanged at this commit, in
        this commit's history; None when there is none."""
        candidates = Result.objects.with_recorded_reads(
            board, self.run.repository_id, model=self.entry.name, strategy=strategy,
            toolchain=self.toolchain, shape_label=label(point), observed_by=OBSERVED_BY_VIEW,
        ).exclude(run=self.run)[:RECORDED_CANDIDATES]
        for candidate in candidates:
            try:
                # Checked when it was stored; checked again, as anything read back is.
                reads = parse_reads({k: v for k, v in candidate.reads.items()
                                     if k not in ("key", "observed_by")})
            except InvalidReads:
                continue
            if candidate.reads.get("key") != self._read_key(reads, strategy, point):
                continue
            # A record is the recording commit's word: believed only in its descendants.
            if self._descends_from(candidate.commit.sha):
                return candidate
        return None

    def _descends_from(self, sha: str) -> bool:
        try:
            return gitrepo.is_ancestor(self.mirror, sha, self.run.commit.sha)
        except gitrepo.GitError:  # a commit the mirror no longer has
            return False


def _reuse_cached(
    run: Run, entry, board: str, todo, keys: dict[tuple[str, str], str], name: str = "",
    *, cache: _CacheLookup | None = None,
) -> list[tuple[str, dict[str, int]]]:
    """Record cached figures for what was compiled before; return the (strategy, point)
    pairs that still need a compile."""
    left, reused = [], []
    for strategy, point in todo:
        key = (strategy, label(point))
        source = None
        if key in keys:
            source = (
                Result.objects.cached(keys[key], board, run.repository_id, shape_label=key[1])
                .exclude(run=run).first()
            )
        if source is None and cache is not None:
            source = cache.unchanged_since(board, strategy, point)
        if source is None:
            left.append((strategy, point))
            continue
        actions.reuse_result(
            run, model=entry.name, strategy=strategy, board=board, source=source,
            # This commit's manifest says how much worse this commit's figure may get.
            tolerance=cache.suite.tolerance_for(entry, key[1]) if cache is not None else {},
        )
        reused.append(f"{strategy}{_at(point)} (from run {source.run_id})")
    if reused:
        where = f"{entry.name} on {board}" + (f" with {name}" if name else "")
        actions.append_log(run, f"{where}: unchanged, reused {', '.join(reused)}")
    return left
