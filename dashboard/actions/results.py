"""Each model x strategy x board x toolchain a run measured (compiled, or reused from an
identical compile), its artifacts, and the close of the run once they are all in, which
compares them with their baselines (``alerts.detect_regressions``).
"""

from __future__ import annotations

import logging
import mimetypes
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from dashboard import overview, queue
from dashboard.actions.alerts import detect_regressions
from dashboard.actions.runs import register_board
from dashboard.actions.series import summarise_series
from dashboard.models import Artifact, Model, Result, Run, Strategy, Toolchain
from dashboard.redaction import redact
from planner.report import ARTIFACT_NAMES, StrategyReport
from planner.shapes import label

log = logging.getLogger(__name__)


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
    cache_key: str = "", toolchain: str = "", reads: dict | None = None,
    tolerance: dict | None = None,
) -> Result:
    """Store one finished model x strategy x board x toolchain; count it once even if
    redelivered. ``toolchain`` is the spec compiled with (empty: the worker's own TVM);
    ``reads`` what its compile read of the checkout (``Result.reads``); ``tolerance`` how
    much worse its series may get before it alerts, as the commit's manifest says
    (``details["alert_tolerance"]``, read by :mod:`dashboard.detection`)."""
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
        # What the figures assume of the model (a mixture of experts routed in fixed shapes).
        "assumptions": list(report.assumptions),
        # What TVM's stock build, the baseline of every comparison, was checked against.
        "reference_check": report.reference_check,
        "reference_max_abs_diff": _finite(report.reference_max_abs_diff),
    }
    if report.llm:
        # An LLM deployment's breakdown: parameters, KV cache, each function's figures.
        details["llm"] = report.llm
    if tolerance:
        details["alert_tolerance"] = tolerance
    if report.board is not None:
        details["board"] = report.board.to_json()
        details["over_capacity"] = report.over_capacity
    fields = {
        "cache_key": cache_key,
        "reads": reads or {},
        "reused_from": None,
        "commit_id": run.commit_id,
        "status": Result.Status.OK if report.ok else Result.Status.FAILED,
        "planned_bytes": report.planned_bytes,
        "intermediate_bytes": report.intermediate_bytes,
        "output_bytes": report.output_bytes,
        "measured_peak_bytes": report.measured_peak_bytes,
        "board_ram_bytes": _board_ram(report),
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


#: Above any board's RAM by far, and within a BigIntegerField.
_MAX_BOARD_RAM = 1 << 48


def board_ram_from(figures: dict | None) -> int | None:
    """The RAM figure among a board's ``figures`` (``details["board"]``), where it measured
    one: a whole number of bytes, or nothing (the sandboxed job wrote it, so anything else is
    not taken as a figure). Migration 0023 reads older Results' details with it too."""
    ram = (figures or {}).get("ram_bytes")
    if isinstance(ram, int) and not isinstance(ram, bool) and 0 <= ram < _MAX_BOARD_RAM:
        return ram
    return None


def _board_ram(report: StrategyReport) -> int | None:
    return board_ram_from(report.board.figures if report.board is not None else None)


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
        summarise_series(result.series_key)
    return result


#: What a reused Result copies from the compile it reuses.
_REUSED_FIELDS = (
    "status", "planned_bytes", "intermediate_bytes", "output_bytes", "measured_peak_bytes",
    "board_ram_bytes", "lower_bound_bytes", "latency_median_ms", "latency_p90_ms",
    "latency_samples_ms", "outputs_match", "max_abs_diff", "compile_seconds",
    "proven_optimal", "tvm_version", "target", "environment", "error", "cache_key",
    "shape_point", "reserved_at_bound_bytes", "peak_formula",
)


def reuse_result(
    run: Run, *, model: str, strategy: str, board: str, source: Result,
    tolerance: dict | None = None,
) -> Result:
    """Record ``source``'s figures for ``run`` without compiling: the same model content was
    compiled before with the same strategy, toolchain, TVM version and target. Its alert
    ``tolerance`` is the one ``run``'s commit's manifest sets, not ``source``'s.

    Artifacts are shared, not copied: the new rows point at the files ``source`` owns.
    """
    fields = {name: getattr(source, name) for name in _REUSED_FIELDS}
    fields["commit_id"] = run.commit_id
    details = {k: v for k, v in source.details.items() if k != "alert_tolerance"}
    if tolerance:
        details["alert_tolerance"] = tolerance
    fields["details"] = {**details, "reused_from": source.pk}
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
    """Store the file at ``path`` (on this worker's disk) in the artifact storage, as
    ``result``'s artifact ``name``, replacing the one it had."""
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    artifact = Artifact.objects.filter(result=result, name=name).first()
    if artifact is not None:
        # A reused result's row names the file of the result it reused: that one stays.
        if not Artifact.objects.filter(file=artifact.file.name).exclude(pk=artifact.pk).exists():
            artifact.file.delete(save=False)
    else:
        artifact = Artifact(result=result, name=name)
    with path.open("rb") as handle:
        artifact.file.save(name, File(handle), save=False)
    artifact.size = path.stat().st_size
    artifact.content_type = content_type
    artifact.save()
    return artifact


def forget_artifact(artifact: Artifact) -> None:
    """An Artifact row is being removed (with its result, run, commit or repository, or in
    the admin): once the removal is committed, its file leaves the artifact storage, unless
    another row still names it (a reused result shares its source's files). One hook per
    transaction, however many rows go."""
    if not artifact.file.name:
        return
    connection = transaction.get_connection()
    hook = next(
        (hook for _, hook, _ in connection.run_on_commit if isinstance(hook, _DeleteFiles)),
        None,
    )
    if hook is None:
        hook = _DeleteFiles()
        transaction.on_commit(hook)
    hook.names.add(artifact.file.name)


class _DeleteFiles:
    """An on-commit hook that deletes the files its rows named, once no row names them.

    Checked after the commit, not before: rows whose removal was rolled back (a savepoint)
    still name their files, and keep them.
    """

    BATCH = 500

    def __init__(self):
        self.names: set[str] = set()

    def __call__(self) -> None:
        storage = Artifact._meta.get_field("file").storage
        names = sorted(self.names)
        for start in range(0, len(names), self.BATCH):
            batch = names[start:start + self.BATCH]
            named = set(
                Artifact.objects.filter(file__in=batch).values_list("file", flat=True)
            )
            for name in batch:
                if name in named:
                    continue
                try:
                    storage.delete(name)
                except Exception:
                    # The rows are gone either way; a file left behind only costs space.
                    log.exception("could not delete artifact file %s", name)


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
            # In the transaction that closes the run: a CI job polling the run must never
            # see it finished before its alerts exist, and pass a regression.
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
            # A savepoint: a failed detection rolls back its own writes, not the closed run.
            with transaction.atomic():
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
