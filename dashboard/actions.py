"""Every state change Peakwatch makes, as verb-named functions.

Views, tasks and management commands call these; none of them writes rows directly.
"""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from dashboard import queue
from dashboard.models import (
    Alert,
    ApiToken,
    Artifact,
    Board,
    Commit,
    Model,
    Notification,
    PullRequest,
    Repository,
    Result,
    Run,
    RunRequest,
    Series,
    Strategy,
    Toolchain,
    TrendSnapshot,
    WebhookDelivery,
)
from dashboard.redaction import redact
from planner.report import ARTIFACT_NAMES, StrategyReport
from planner.shapes import label

log = logging.getLogger(__name__)


def track_repository(
    name: str, clone_url: str, default_branch: str = "main", *, trust: str | None = None,
    webhook_secret: str | None = None,
) -> Repository:
    defaults = {"clone_url": clone_url, "default_branch": default_branch}
    if trust is not None:
        defaults["trust"] = trust
    if webhook_secret is not None:
        defaults["webhook_secret"] = webhook_secret
    repository, _ = Repository.objects.update_or_create(name=name, defaults=defaults)
    return repository


def record_commit(
    repository: Repository,
    *,
    sha: str,
    parent_sha: str = "",
    branch: str = "",
    author: str = "",
    message: str = "",
    committed_at: datetime,
    from_outside: bool = False,
) -> Commit:
    """The commit's row, created if new. ``from_outside``: code the repository has not
    vouched for (see ``Commit.from_outside``); set on the row as it is created, so no run
    can find it unmarked in between."""
    commit, created = Commit.objects.get_or_create(
        repository=repository,
        sha=sha,
        defaults={
            "parent_sha": parent_sha,
            "branch": branch,
            "author": author,
            "message": message,
            "committed_at": committed_at,
            "from_outside": from_outside,
        },
    )
    if not created and branch and not commit.branch:
        commit.branch = branch
        commit.save(update_fields=["branch"])
    if not created and from_outside and not commit.from_outside:
        mark_from_outside(repository, [sha])
        commit.from_outside = True
    return commit


def mark_from_outside(repository: Repository, shas: Iterable[str]) -> int:
    """Mark the recorded commits among ``shas`` as from outside; an approval they already
    have stands. Returns how many changed."""
    return Commit.objects.for_repository(repository).filter(
        sha__in=list(shas), from_outside=False
    ).update(from_outside=True)


def register_board(name: str, *, kind: str = Board.Kind.CPU, target: str = "llvm") -> Board:
    board, _ = Board.objects.get_or_create(name=name, defaults={"kind": kind, "target": target})
    return board


def start_run(
    commit: Commit,
    *,
    trigger: str = "manual",
    pull_request: PullRequest | None = None,
    approved: bool = True,
) -> Run:
    """Create a Run for ``commit`` and hand it to the workers, or hold it until a maintainer
    approves: when not ``approved`` (a pull request from outside), and whenever the commit
    awaits approval, whoever asks (webhook, API, command, a retry).

    While a run of such a commit waits, asking again with the same trigger and pull request
    names that run instead of adding one: repeated requests cannot pile up runs for one
    approval to release at once.
    """
    with transaction.atomic():
        # Locked, as approve_commit locks it: an approval at this moment either releases
        # this run or is seen here, never neither.
        commit = Commit.objects.select_for_update().get(pk=commit.pk)
        waits = not approved or commit.awaits_approval
        if waits:
            waiting = (
                Run.objects.for_commit(commit).awaiting_approval()
                .filter(trigger=trigger, pull_request=pull_request).newest_first().first()
            )
            if waiting is not None:
                return waiting
        # A run of approved code from outside says who let it run, as a released run does.
        vouched = commit.from_outside and not waits
        run = Run.objects.create(
            repository_id=commit.repository_id, commit=commit, trigger=trigger,
            pull_request=pull_request,
            status=Run.Status.AWAITING_APPROVAL if waits else Run.Status.QUEUED,
            approved_by=commit.approved_by if vouched else "",
            approved_at=commit.approved_at if vouched else None,
        )
        if waits:
            append_log(run, f"waits for a maintainer's approval of {commit.short_sha}")
        else:
            _queue_run(run)
    return run


def _queue_run(run: Run) -> None:
    # The worker must see the row: queue only once the transaction is committed.
    transaction.on_commit(lambda: queue.send(queue.PLAN_RUN, run.pk))
    if run.repository.notifies_github:
        # A pending commit status, so the pull request shows the check from the start.
        transaction.on_commit(lambda: queue.send(queue.NOTIFY_RUN, run.pk))


def approve_run(run: Run, *, by: str) -> bool:
    """Approve ``run``'s commit, if ``run`` waits for approval: it and every other run of
    that commit waiting go to the workers, and later runs of the commit go at once. False
    when ``run`` was not waiting."""
    if not Run.objects.filter(pk=run.pk).awaiting_approval().exists():
        return False
    released = approve_commit(run.commit, by=by)
    run.refresh_from_db()
    return any(each.pk == run.pk for each in released)


def approve_commit(commit: Commit, *, by: str) -> list[Run]:
    """Let ``commit``'s code run: record who approved it and when (the first approval
    stands), send every run of it waiting for approval to the workers, and let its later
    runs go at once. Returns the runs released."""
    by, now = by[:150], timezone.now()
    with transaction.atomic():
        locked = Commit.objects.select_for_update().get(pk=commit.pk)
        if locked.approved_at is None:
            Commit.objects.filter(pk=commit.pk).update(approved_by=by, approved_at=now)
            commit.approved_by, commit.approved_at = by, now
        waiting = list(
            Run.objects.for_commit(commit).awaiting_approval()
            .select_for_update(of=("self",)).select_related("repository")
        )
        Run.objects.filter(pk__in=[run.pk for run in waiting]).update(
            status=Run.Status.QUEUED, approved_by=by, approved_at=now
        )
        for run in waiting:
            run.status, run.approved_by, run.approved_at = Run.Status.QUEUED, by, now
            append_log(run, f"approved by {by}")
            _queue_run(run)
    return waiting


def begin_run(run: Run, *, models: Iterable[tuple[str, str]], strategies: Iterable[str],
              boards: Iterable[str], total: int) -> None:
    """Register what the manifest names and mark the run as running."""
    for name, source in models:
        Model.objects.update_or_create(
            repository=run.repository, name=name, defaults={"source": source}
        )
    for name in strategies:
        Strategy.objects.get_or_create(name=name)
    boards = list(boards)
    for name in boards:
        register_board(name)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        started_at=run.started_at or timezone.now(),
        progress_total=total,
        boards=boards,
    )


def append_log(run: Run, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    # Concatenate in the database so concurrent board workers never overwrite each other.
    line = redact(line)
    Run.objects.filter(pk=run.pk).update(log=Concat(F("log"), Value(f"{stamp} {line}\n")))


def record_toolchain(spec: str, *, tvm_version: str = "", tvm_git_hash: str = "") -> Toolchain:
    """The Toolchain row of ``spec`` (empty: the worker's environment), with the TVM version
    and git hash its latest probe or compile found, when known."""
    toolchain, _ = Toolchain.objects.get_or_create(spec=spec)
    changed = {
        name: value
        for name, value in (("tvm_version", tvm_version), ("tvm_git_hash", tvm_git_hash))
        if value and getattr(toolchain, name) != value
    }
    if changed:
        Toolchain.objects.filter(pk=toolchain.pk).update(**changed)
        for name, value in changed.items():
            setattr(toolchain, name, value)
    return toolchain


def record_result(
    run: Run, *, model: str, strategy: str, board: str, report: StrategyReport,
    cache_key: str = "", toolchain: str = "",
) -> Result:
    """Store one finished model x strategy x board x toolchain; count it once even if
    redelivered. ``toolchain`` is the spec compiled with (empty: the worker's own TVM)."""
    latency = report.latency_ms or {}
    details = {
        "tolerance": report.tolerance,
        "plan_seconds": report.plan_seconds,
        "model_source": report.model_source,
        "measured": report.measured,
        "kernel_workspace_bytes": report.kernel_workspace_bytes,
        "kernel_workspace_source": report.kernel_workspace_source,
        "kernel_stack_bytes": report.kernel_stack_bytes,
        "peak": report.peak,
        "rewrites": report.rewrites,
        "shape_bounds": report.shape_bounds,
        # Bounds of the problem a plan really solved, where that differs from the model's.
        "rewritten_lower_bound_bytes": report.rewritten_lower_bound_bytes,
        "program_order_lower_bound_bytes": report.program_order_lower_bound_bytes,
        "chosen_order_lower_bound_bytes": report.chosen_order_lower_bound_bytes,
        "order": report.order,
        # Figures the repository's own process timed, and what was not taken from it.
        "reported_by_repository": report.reported_by_repository,
        "warnings": list(report.warnings),
    }
    if report.board is not None:
        details["board"] = report.board.to_json()
        details["over_capacity"] = report.over_capacity
    fields = {
        "cache_key": cache_key,
        "reused_from": None,
        "commit_id": run.commit_id,
        "status": Result.Status.OK if report.ok else Result.Status.FAILED,
        "planned_bytes": report.planned_bytes,
        "intermediate_bytes": report.intermediate_bytes,
        "output_bytes": report.output_bytes,
        "measured_peak_bytes": report.measured_peak_bytes,
        "lower_bound_bytes": report.lower_bound_bytes,
        "latency_median_ms": latency.get("median"),
        "latency_p90_ms": latency.get("p90"),
        "latency_samples_ms": latency.get("samples", []),
        "outputs_match": report.outputs_match,
        "max_abs_diff": _finite(report.max_abs_diff),
        "compile_seconds": report.compile_seconds,
        "proven_optimal": report.proven_optimal,
        "shape_point": dict(report.shape_point),
        "reserved_at_bound_bytes": report.reserved_at_bound_bytes,
        "peak_formula": report.peak_formula,
        "tvm_version": report.tvm_version,
        "target": report.target,
        "environment": report.environment,
        "details": details,
        "error": redact(report.error or ""),
    }
    row = record_toolchain(
        toolchain, tvm_version=report.tvm_version,
        tvm_git_hash=report.environment.get("tvm_git_hash", "") if report.ok else "",
    )
    result = _store_result(
        run, model=model, strategy=strategy, board=board, fields=fields, toolchain=row,
        shape_label=label(report.shape_point),
    )
    warnings = []
    for name, path in report.artifacts.items():
        # The worker collects artifacts by these names from folders it chose; anything
        # else is refused here too, and a file that cannot be stored costs only itself.
        if name not in ARTIFACT_NAMES:
            warnings.append(f"artifact {name[:80]!r} is not one Peakwatch writes; skipped")
            continue
        try:
            attach_artifact(result, name, Path(path))
        except (OSError, SuspiciousFileOperation) as exc:
            warnings.append(f"artifact {name} could not be stored: {exc}")
    if warnings:
        log.warning("result %s: %s", result.pk, "; ".join(warnings))
        details["warnings"] = details["warnings"] + warnings
        Result.objects.filter(pk=result.pk).update(details=details)
        result.details = details
    return result


def _store_result(
    run: Run, *, model: str, strategy: str, board: str, fields: dict, toolchain: Toolchain,
    shape_label: str = "",
) -> Result:
    keys = {
        "run": run,
        "model": Model.objects.get(repository=run.repository, name=model),
        "strategy": Strategy.objects.get_or_create(name=strategy)[0],
        "board": register_board(board),
        "toolchain": toolchain,
        "shape_label": shape_label,
    }
    with transaction.atomic():
        try:
            with transaction.atomic():
                result = Result.objects.create(**keys, **fields)
            created = True
        except IntegrityError:
            Result.objects.filter(**keys).update(**fields)
            result = Result.objects.get(**keys)
            created = False
        if created:
            Run.objects.filter(pk=run.pk).update(progress_done=F("progress_done") + 1)
        # Recomputed from the series' results, not incremented: a redelivered or rerun
        # result is counted once, and one that turned from ok to failed leaves the line.
        summarise_series(series_key(result))
    return result


#: A series: (model, strategy, board, toolchain) ids and the shape label ("" without an
#: axis), as ``Series.key`` gives it.
SeriesKey = tuple[int, int, int, int, str]


def series_key(result: Result) -> SeriesKey:
    return result.series_key


def summarise_series(key: SeriesKey, *, snapshot: bool = True) -> Series | None:
    """Store what pages show of the series ``key`` (model, strategy, board, toolchain ids
    and shape label): its newest result, its commit count, the points its chart draws and
    its overview cell; then (unless not ``snapshot``) its model's trend snapshot. None (and
    no row) when it has no successful result left."""
    from dashboard.overview import latest_cell_html
    from dashboard.trends import SERIES_COLUMNS, series_points

    model_id = key[0]
    ids = dict(zip(SERIES_COLUMNS, key, strict=True))
    with transaction.atomic():
        # Taken before reading the results: a worker recording another result of this
        # series waits here, then reads ours too, so the last to write has seen both.
        series = Series.objects.select_for_update().filter(**ids).first()
        if series is None:
            if not Result.objects.succeeded().filter(**ids).exists():
                return None
            # The row must exist to be locked; a concurrent creator makes this a no-op.
            Series.objects.bulk_create([Series(**ids)], ignore_conflicts=True)
            series = Series.objects.select_for_update().get(**ids)
        summary = series_points(key)
        if not summary.commits:
            series.delete()
        else:
            series.points = summary.points
            series.commits = summary.commits
            series.latest_result_id = summary.latest_result_id
            series.latest_html = latest_cell_html(series)
            series.save()
        if snapshot:
            materialise_trend(model_id)
    return series if summary.commits else None


def materialise_trend(model_id: int) -> None:
    """Store the model's unfiltered trend as the API serves it (less its alerts), from its
    series as they are now: an unfiltered trend is then one row to read."""
    from dashboard.trends import snapshot_of

    model = Model.objects.filter(pk=model_id).select_related("repository").first()
    if model is None:
        return
    TrendSnapshot.objects.update_or_create(model=model, defaults=snapshot_of(model))


def summarise_all_series() -> int:
    """Summarise every series with results (a backfill: results loaded in bulk, or recorded
    before series were summarised); returns how many series there are."""
    keys = set(
        Result.objects.succeeded()
        .order_by()
        .values_list("model_id", "strategy_id", "board_id", "toolchain_id", "shape_label")
        .distinct()
    )
    for key in sorted(keys):
        summarise_series(key, snapshot=False)
    Series.objects.exclude(
        pk__in=[s.pk for s in Series.objects.with_points(False) if s.key in keys]
    ).delete()
    for model_id in sorted({key[0] for key in keys}):
        materialise_trend(model_id)
    TrendSnapshot.objects.exclude(model_id__in={key[0] for key in keys}).delete()
    return len(keys)


def forget_result(result: Result) -> None:
    """A Result is being removed (with its run, commit or repository, or in the admin):
    its series is summarised again once the removal is committed, once per transaction
    however many of its results go."""
    key = series_key(result)
    connection = transaction.get_connection()
    if any(getattr(hook, "series_key", None) == key for _, hook, _ in connection.run_on_commit):
        return
    transaction.on_commit(_SummariseAgain(key))


class _SummariseAgain:
    """An on-commit hook that says which series it is for, so it is registered once."""

    def __init__(self, key: SeriesKey):
        self.series_key = key

    def __call__(self) -> None:
        summarise_series(self.series_key)


#: What a reused Result copies from the compile it reuses.
_REUSED_FIELDS = (
    "status", "planned_bytes", "intermediate_bytes", "output_bytes", "measured_peak_bytes",
    "lower_bound_bytes", "latency_median_ms", "latency_p90_ms", "latency_samples_ms",
    "outputs_match", "max_abs_diff", "compile_seconds", "proven_optimal", "tvm_version",
    "target", "environment", "error", "cache_key", "shape_point", "reserved_at_bound_bytes",
    "peak_formula",
)


def reuse_result(run: Run, *, model: str, strategy: str, board: str, source: Result) -> Result:
    """Record ``source``'s figures for ``run`` without compiling: the same model content was
    compiled before with the same strategy, toolchain, TVM version and target.

    Artifacts are shared, not copied: the new rows point at the files ``source`` owns.
    """
    fields = {name: getattr(source, name) for name in _REUSED_FIELDS}
    fields["commit_id"] = run.commit_id
    fields["details"] = {**source.details, "reused_from": source.pk}
    fields["reused_from"] = source
    result = _store_result(
        run, model=model, strategy=strategy, board=board, fields=fields,
        toolchain=source.toolchain, shape_label=source.shape_label,
    )
    for artifact in source.artifacts.all():
        Artifact.objects.update_or_create(
            result=result,
            name=artifact.name,
            defaults={
                "file": artifact.file.name,
                "size": artifact.size,
                "content_type": artifact.content_type,
            },
        )
    return result


def _finite(value):
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def attach_artifact(result: Result, name: str, path: Path) -> Artifact:
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    artifact = Artifact.objects.filter(result=result, name=name).first()
    if artifact is not None:
        artifact.file.delete(save=False)
    else:
        artifact = Artifact(result=result, name=name)
    with path.open("rb") as handle:
        artifact.file.save(name, File(handle), save=False)
    artifact.size = path.stat().st_size
    artifact.content_type = content_type
    artifact.save()
    return artifact


def finish_run(run: Run, *, error: str = "") -> None:
    """Close the run: failed with ``error``; else, once every result is in, succeeded when
    all of them are ok, partial when some failed, failed when none succeeded.

    The board that closes the run (it finds it open under the row's lock, once) also looks
    for regressions and queues the notifications.
    """
    if error:
        # Errors are shown to every visitor and in the API: no credentials of any URL.
        error = redact(error)
    with transaction.atomic():
        # Recording a result locks the row to count it: once locked here, every result
        # counted in progress_done is committed, and the counts below are the whole run.
        state = (
            Run.objects.select_for_update().filter(pk=run.pk)
            .values("status", "progress_done", "progress_total").first()
        )
        if state is None:
            return
        status = state["status"]
        if error:
            # Already failed on another board: the latest error is the one shown.
            closed = status != Run.Status.FAILED
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.FAILED, error=error, finished_at=timezone.now(),
                failed_results=_result_counts(run)[1],
            )
        elif status == Run.Status.FAILED:
            # Failed by another board's error first: this board's failures count too.
            closed = False
            Run.objects.filter(pk=run.pk).update(failed_results=_result_counts(run)[1])
        elif status in Run.FINISHED or state["progress_done"] < state["progress_total"]:
            closed = False
        else:
            closed = True
            recorded, failed = _result_counts(run)
            Run.objects.filter(pk=run.pk).update(
                status=Run.outcome(recorded=recorded, failed=failed), failed_results=failed,
                finished_at=timezone.now(),
            )
    if closed:
        _after_run(run)


def _result_counts(run: Run) -> tuple[int, int]:
    """(recorded, failed) Results of ``run``."""
    counts = Result.objects.for_run(run).aggregate(
        recorded=Count("id"), failed=Count("id", filter=Q(status=Result.Status.FAILED))
    )
    return counts["recorded"], counts["failed"]


def _after_run(run: Run) -> None:
    run = Run.objects.select_related("repository", "commit", "pull_request").get(pk=run.pk)
    to_notify = [run]
    # A partial run's successful results are measurements like any others: they are
    # compared. A failed run is not searched: none of its results may have succeeded, and
    # one failed by an error is closed while its other boards may still be recording, so
    # detection would see an arbitrary part of it. Its successful results still serve as
    # baselines for later commits.
    if run.status in (Run.Status.SUCCEEDED, Run.Status.PARTIAL):
        try:
            detect_regressions(run)
            # Pull requests whose merge base is this commit were compared without a
            # baseline if they finished first: compare them again now that it is here.
            for waiting in _runs_waiting_for_base(run):
                detect_regressions(waiting)
                to_notify.append(waiting)
        except Exception:
            # A bug in detection must not undo a finished run; the log says what happened.
            log.exception("regression detection failed for run %s", run.pk)
    for each in to_notify:
        transaction.on_commit(lambda pk=each.pk: queue.send(queue.NOTIFY_RUN, pk))
    transaction.on_commit(_refresh_overview)


def _refresh_overview() -> None:
    """The overview's tables and alerts, rendered now for the next visitor; a page renders
    them itself if this fails, so a failure is only logged."""
    from dashboard import overview

    try:
        overview.refresh()
    except Exception:
        log.exception("could not render the overview after a run")


def _runs_waiting_for_base(run: Run) -> list[Run]:
    return list(
        Run.objects.measured().filter(
            repository=run.repository, pull_request__base_sha=run.commit.sha
        )
        .exclude(pk=run.pk)
        .select_related("repository", "commit", "pull_request")
    )


def detect_regressions(run: Run) -> list[Alert]:
    """Raise an alert for every series of ``run`` that got worse than its baseline."""
    from dashboard.detection import find_regressions

    alerts = []
    alerted: set[SeriesKey] = set()
    for finding in find_regressions(run):
        alert, created = Alert.objects.get_or_create(
            result=finding.result,
            kind=finding.kind,
            defaults={
                "repository": run.repository,
                "commit": finding.result.commit,
                "run": run,
                "baseline": finding.baseline,
                "model": finding.result.model,
                "strategy": finding.result.strategy,
                "board": finding.result.board,
                "toolchain_id": finding.result.toolchain_id,
                "shape_label": finding.result.shape_label,
                "baseline_value": finding.baseline_value,
                "value": finding.value,
                "p_value": finding.p_value,
            },
        )
        if created:
            append_log(run, f"alert: {alert}")
            alerted.add(series_key(finding.result))
        alerts.append(alert)
    # The chart marks each alert at its commit, so its series keeps that point; each model's
    # snapshot is stored once, after its last series.
    for key in sorted(alerted):
        summarise_series(key, snapshot=False)
    for model_id in sorted({key[0] for key in alerted}):
        materialise_trend(model_id)
    return alerts


def triage_alert(alert: Alert, state: str) -> Alert:
    if state not in Alert.State.values:
        raise ValueError(f"unknown alert state {state!r}; known: {', '.join(Alert.State.values)}")
    alert.state = state
    alert.save(update_fields=["state", "updated_at"])
    return alert


def triage_commit_alerts(commit: Commit, state: str) -> int:
    """Give every open alert of ``commit`` the state ``state`` at once: a commit that
    meant to change its models is triaged in one step. Returns how many changed."""
    if state not in Alert.State.values:
        raise ValueError(f"unknown alert state {state!r}; known: {', '.join(Alert.State.values)}")
    return (
        Alert.objects.filter(commit=commit).open().exclude(state=state)
        .update(state=state, updated_at=timezone.now())
    )


def set_series_threshold(model: Model, strategy: Strategy, board: Board, threshold: int):
    from dashboard.models import SeriesThreshold

    override, _ = SeriesThreshold.objects.update_or_create(
        model=model, strategy=strategy, board=board, defaults={"bytes_threshold": threshold}
    )
    return override


def record_pull_request(
    repository: Repository,
    *,
    number: int,
    title: str = "",
    url: str = "",
    head_ref: str = "",
    head_sha: str,
    base_ref: str = "",
    base_sha: str = "",
    author: str = "",
    author_association: str = "",
    from_fork: bool = False,
) -> PullRequest:
    pull_request, _ = PullRequest.objects.update_or_create(
        repository=repository,
        number=number,
        defaults={
            "title": title, "url": url, "head_ref": head_ref, "head_sha": head_sha,
            "base_ref": base_ref, "base_sha": base_sha, "author": author,
            "author_association": author_association, "from_fork": from_fork,
        },
    )
    return pull_request


def remember_pull_request_comment(pull_request: PullRequest, comment_id: int) -> None:
    PullRequest.objects.filter(pk=pull_request.pk).update(comment_id=comment_id)
    pull_request.comment_id = comment_id


def ensure_run(
    commit: Commit, *, trigger: str, pull_request: PullRequest | None = None,
    approved: bool = True,
) -> tuple[Run, bool]:
    """The commit's run, started now unless one is waiting, queued, running, succeeded or
    partial.

    A partial run counts, as it did while it was called succeeded: what it measured is
    there to compare with, and its failures are most often the commit's own (a model that
    does not build), which running it again on every push or pull request event would only
    repeat; ``manage.py run`` and ``POST /api/runs`` always start a new run. A failed run
    does not count: the run itself broke, or none of its results succeeded, so the next
    event tries again. For a pull request, only a run of that pull request counts, so its
    summary is posted.
    """
    runs = Run.objects.for_commit(commit).not_failed().newest_first()
    if pull_request is not None:
        runs = runs.filter(pull_request=pull_request)
    existing = runs.first()
    if existing is not None:
        return existing, False
    return start_run(commit, trigger=trigger, pull_request=pull_request, approved=approved), True


def request_run(
    repository: Repository, *, rev: str, branch: str = "", trigger: str = "api"
) -> RunRequest:
    """Ask for a run of ``rev`` (a sha not recorded yet, or ``branch``'s head), to be
    resolved in the repository's mirror by a task: git can be slow, a request must not
    wait. The row is what the asker polls until it names the run."""
    request = RunRequest.objects.create(
        repository=repository, rev=rev, branch=branch, trigger=trigger
    )
    transaction.on_commit(lambda: queue.send(queue.RESOLVE_RUN_REQUEST, request.pk))
    return request


def answer_run_request(request: RunRequest, *, run: Run | None = None, error: str = "") -> None:
    """Record what became of ``request``: the run it started, or why there is none."""
    request.status = RunRequest.Status.RESOLVED if run is not None else RunRequest.Status.FAILED
    request.run = run
    # Git's messages may name the clone URL, which may hold a token.
    request.error = redact(error)[:2000] if run is None else ""
    request.resolved_at = timezone.now()
    request.save(update_fields=["status", "run", "error", "resolved_at"])


def log_delivery(
    *,
    outcome: str,
    status_code: int,
    guid: str = "",
    event: str = "",
    action: str = "",
    repository: Repository | None = None,
    detail: str = "",
) -> WebhookDelivery:
    """Record a delivery that was not taken on (rejected, answered at once, duplicate)."""
    return WebhookDelivery.objects.create(
        guid=guid, event=event, action=action, repository=repository, outcome=outcome,
        status_code=status_code, detail=detail[:2000], accepted=False,
    )


def _rejection_keys(outcome: str, repository: Repository | None) -> tuple[str, str]:
    base = f"peakwatch:webhook-rejections:{outcome}:{repository.pk if repository else 0}"
    return base, base + ":unlogged"


def log_rejected_delivery(
    *, outcome: str, status_code: int, guid: str = "", event: str = "",
    repository: Repository | None = None, detail: str = "",
) -> WebhookDelivery:
    """Record a delivery refused before it was verified, at most once a window per kind.

    Anyone can send unsigned requests; logging each as a row would let them fill the
    table. The first of a window (outcome x repository) is a row; the others are counted
    and the count is written into the next row. Returns the row, or an unsaved delivery
    when this one was only counted.
    """
    window = settings.PEAKWATCH_WEBHOOK_REJECTION_WINDOW
    if window <= 0:
        return log_delivery(outcome=outcome, status_code=status_code, guid=guid, event=event,
                            repository=repository, detail=detail)
    marker, unlogged = _rejection_keys(outcome, repository)
    if not cache.add(marker, 1, window):
        cache.add(unlogged, 0, None)
        cache.incr(unlogged)
        return WebhookDelivery(guid=guid, event=event, repository=repository, outcome=outcome,
                               status_code=status_code, detail=detail[:2000])
    skipped = cache.get(unlogged) or 0
    if skipped:
        cache.decr(unlogged, skipped)
        detail += f" ({skipped} more like this before were counted, not logged)"
    return log_delivery(outcome=outcome, status_code=status_code, guid=guid, event=event,
                        repository=repository, detail=detail)


def accept_delivery(
    *, guid: str, event: str, action: str, repository: Repository, payload: dict,
    outcome: str, status_code: int, detail: str = "",
) -> WebhookDelivery | None:
    """Record a verified delivery; None when that ``guid`` was accepted before."""
    try:
        with transaction.atomic():
            return WebhookDelivery.objects.create(
                guid=guid, event=event, action=action, repository=repository,
                payload=payload, outcome=outcome, status_code=status_code, detail=detail,
                accepted=True,
            )
    except IntegrityError:
        return None


def close_delivery(delivery: WebhookDelivery, *, outcome: str, detail: str = "") -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        outcome=outcome, detail=detail[:2000], processed_at=timezone.now()
    )


def create_api_token(name: str, repository: Repository | None = None) -> tuple[ApiToken, str]:
    """A new token: the row (holding only a hash) and the token itself, shown once."""
    raw = ApiToken.generate()
    token = ApiToken.objects.create(name=name, token_hash=ApiToken.hash(raw), repository=repository)
    return token, raw


def use_api_token(raw: str) -> ApiToken | None:
    token = ApiToken.objects.filter(token_hash=ApiToken.hash(raw)).first()
    if token is not None:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


def record_notification(
    run: Run, *, channel: str, url: str, status_code: int | None, error: str = ""
) -> Notification:
    return Notification.objects.create(
        run=run, channel=channel, url=url, status_code=status_code, error=error[:2000]
    )


def mark_board_seen(
    name: str,
    info: dict,
    *,
    kind: str = "",
    target: str = "",
    memory_capacity: int | None = None,
) -> None:
    """Record a worker's view of its board: health, versions, and (when it knows) what the
    board is; the worker's configuration wins over what an admin typed, since it is what
    runs."""
    fields = {"last_seen": timezone.now(), "info": info}
    if kind:
        fields["kind"] = kind
    if target:
        fields["target"] = target
    if memory_capacity:
        fields["memory_capacity"] = memory_capacity
    register_board(name)
    Board.objects.filter(name=name).update(**fields)
