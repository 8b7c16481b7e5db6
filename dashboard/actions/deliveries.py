"""What arrives from outside and what is sent out: GitHub's webhook deliveries, the API
tokens CI signs its requests with, and the notifications sent about runs."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.models import ApiToken, Notification, Repository, Run, WebhookDelivery


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


def create_api_token(
    name: str, repository: Repository | None = None, *, all_repositories: bool = False
) -> tuple[ApiToken, str]:
    """A new token: the row (holding only a hash) and the token itself, shown once.

    A token starts runs of its ``repository`` only. One that starts runs of every
    repository, present and future, is made only when ``all_repositories`` asks for it:
    forgetting to name a repository must not widen a token to all of them.
    """
    if all_repositories and repository is not None:
        raise ValueError("a token is for one repository or for all of them, not both")
    if not all_repositories and repository is None:
        raise ValueError(
            "a token is for one repository: name it, or ask for all_repositories explicitly"
        )
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
