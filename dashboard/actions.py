"""Every state change Peakwatch makes, as verb-named functions.

Views, tasks and management commands call these; none of them writes rows directly.
"""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from django.core.files import File
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from dashboard.models import Artifact, Board, Commit, Model, Repository, Result, Run, Strategy

log = logging.getLogger(__name__)


def track_repository(name: str, clone_url: str, default_branch: str = "main") -> Repository:
    repository, _ = Repository.objects.update_or_create(
        name=name, defaults={"clone_url": clone_url, "default_branch": default_branch}
    )
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
) -> Commit:
    commit, created = Commit.objects.get_or_create(
        repository=repository,
        sha=sha,
        defaults={
            "parent_sha": parent_sha,
            "branch": branch,
            "author": author,
            "message": message,
            "committed_at": committed_at,
        },
    )
    if not created and branch and not commit.branch:
        commit.branch = branch
        commit.save(update_fields=["branch"])
    return commit


def register_board(name: str, *, kind: str = Board.Kind.CPU, target: str = "llvm") -> Board:
    board, _ = Board.objects.get_or_create(name=name, defaults={"kind": kind, "target": target})
    return board


def start_run(commit: Commit, *, trigger: str = "manual") -> Run:
    """Create a queued Run for ``commit`` and hand it to the workers."""
    from workers.tasks import plan_run

    run = Run.objects.create(repository=commit.repository, commit=commit, trigger=trigger)
    # The worker must see the row: queue only once the transaction is committed.
    transaction.on_commit(lambda: plan_run.delay(run.pk))
    return run


def begin_run(run: Run, *, models: Iterable[tuple[str, str]], strategies: Iterable[str],
              boards: Iterable[str], total: int) -> None:
    """Register what the manifest names and mark the run as running."""
    for name, source in models:
        Model.objects.update_or_create(
            repository=run.repository, name=name, defaults={"source": source}
        )
    for name in strategies:
        Strategy.objects.get_or_create(name=name)
    for name in boards:
        register_board(name)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        started_at=run.started_at or timezone.now(),
        progress_total=total,
    )


def append_log(run: Run, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    # Concatenate in the database so concurrent board workers never overwrite each other.
    Run.objects.filter(pk=run.pk).update(log=Concat(F("log"), Value(f"{stamp} {line}\n")))


def record_result(
    run: Run, *, model: str, strategy: str, board: str, report: dict
) -> Result:
    """Store one finished model x strategy x board; count it once even if redelivered."""
    fields = {
        "commit_id": run.commit_id,
        "status": Result.Status.OK if not report.get("error") else Result.Status.FAILED,
        "planned_bytes": report.get("planned_bytes"),
        "intermediate_bytes": report.get("intermediate_bytes"),
        "output_bytes": report.get("output_bytes"),
        "measured_peak_bytes": report.get("measured_peak_bytes"),
        "lower_bound_bytes": report.get("lower_bound_bytes"),
        "latency_median_ms": (report.get("latency_ms") or {}).get("median"),
        "latency_p90_ms": (report.get("latency_ms") or {}).get("p90"),
        "latency_samples_ms": (report.get("latency_ms") or {}).get("samples", []),
        "outputs_match": report.get("outputs_match"),
        "max_abs_diff": _finite(report.get("max_abs_diff")),
        "compile_seconds": report.get("compile_seconds"),
        "proven_optimal": report.get("proven_optimal"),
        "tvm_version": report.get("tvm_version", ""),
        "target": report.get("target", ""),
        "environment": report.get("environment", {}),
        "details": {
            k: report[k]
            for k in ("tolerance", "plan_seconds", "model_source", "measured")
            if k in report
        },
        "error": report.get("error") or "",
    }
    keys = {
        "run": run,
        "model": Model.objects.get(repository=run.repository, name=model),
        "strategy": Strategy.objects.get_or_create(name=strategy)[0],
        "board": register_board(board),
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
    for name, path in (report.get("artifacts") or {}).items():
        attach_artifact(result, name, Path(path))
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
    """Close the run: failed with ``error``, or succeeded once every result is in."""
    if error:
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.FAILED, error=error, finished_at=timezone.now()
        )
        return
    Run.objects.filter(pk=run.pk, progress_done__gte=F("progress_total")).exclude(
        status=Run.Status.FAILED
    ).update(status=Run.Status.SUCCEEDED, finished_at=timezone.now())


def mark_board_seen(name: str, info: dict) -> None:
    Board.objects.filter(name=name).update(last_seen=timezone.now(), info=info)
