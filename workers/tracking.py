"""Celery tasks of regression tracking: webhook deliveries, API-triggered runs, notifications.

They run on the ``peakwatch`` queue, next to ``plan_run``: git fetches and HTTP calls to
GitHub or Slack, never compiles. Each calls one function of the dashboard's tracking service.
"""

from __future__ import annotations

import logging

from celery import shared_task

from dashboard import actions, notifications, queue, tracking
from dashboard.models import Repository, Run, RunRequest, WebhookDelivery

log = logging.getLogger(__name__)


@shared_task(name=queue.PROCESS_GITHUB_DELIVERY)
def process_github_delivery(delivery_id: int) -> None:
    """Record the commits a verified GitHub delivery names and start their runs."""
    delivery = WebhookDelivery.objects.select_related("repository").filter(pk=delivery_id).first()
    if delivery is None or delivery.processed_at is not None:
        return
    tracking.process_delivery(delivery)


@shared_task(name=queue.RESOLVE_RUN_REQUEST)
def resolve_run_request(request_id: int) -> None:
    """Resolve a run request of ``POST /api/runs`` in the repository's mirror, record the
    commit, run it, and answer the request (which CI polls) with the run or why not."""
    request = (
        RunRequest.objects.select_related("repository").filter(pk=request_id).first()
    )
    if request is None or request.status != RunRequest.Status.RESOLVING:
        return
    try:
        tracking.resolve_run_request(request)
    except Exception as exc:
        # A bug must not leave CI polling a request that stays "resolving" forever.
        actions.answer_run_request(request, error=f"internal error: {type(exc).__name__}")
        raise


@shared_task(name=queue.TRIGGER_RUN)
def trigger_run(repository_id: int, rev: str, branch: str = "", trigger: str = "api") -> None:
    """Resolve ``rev`` in the repository's mirror, record the commit and run it.

    ``POST /api/runs`` now sends ``resolve_run_request``; this stays for messages queued
    before an upgrade."""
    repository = Repository.objects.filter(pk=repository_id).first()
    if repository is None:
        log.warning("repository %s does not exist; dropping the trigger", repository_id)
        return
    tracking.run_revision(repository, rev, branch=branch, trigger=trigger)


@shared_task(name=queue.NOTIFY_RUN)
def notify_run(run_id: int) -> None:
    """Tell GitHub and Slack how a finished run went."""
    run = Run.objects.select_related("repository", "commit", "pull_request").filter(pk=run_id)
    run = run.first()
    if run is None:
        return
    notifications.send_run_notifications(run)
