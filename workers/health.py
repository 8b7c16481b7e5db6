"""Each worker checks its boards' health every few seconds, not only when a run starts.

``/boards/`` shows what the board's worker last reported. Reported only at a run's start and
end, a board that went away between runs (an RPC server killed, a GPU gone) read "online"
until the next run, and one that came back read "offline". From the moment a worker is
ready it checks each board whose queue it consumes (``board.NAME``), every
``PEAKWATCH_BOARD_HEALTH_SECONDS`` (30 by default; 0: never), and records the result with
when it was checked (``info["checked_at"]``); a run in progress keeps its ``current_run``.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import signals
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from dashboard import actions
from dashboard.models import Board

log = logging.getLogger(__name__)

BOARD_QUEUE = "board."


@signals.worker_ready.connect
def _start_checking(sender=None, **kwargs) -> None:
    interval = float(getattr(settings, "PEAKWATCH_BOARD_HEALTH_SECONDS", 30))
    if interval <= 0 or sender is None:
        return
    queues = sender.app.amqp.queues.consume_from or {}
    names = sorted(q.removeprefix(BOARD_QUEUE) for q in queues if q.startswith(BOARD_QUEUE))
    if names:
        threading.Thread(
            target=_check_forever, args=(names, interval), name="board-health", daemon=True
        ).start()


def _check_forever(names: list[str], interval: float) -> None:
    while True:
        for name in names:
            try:
                check(name)
            except Exception:  # one board's failed check must not end the others'
                log.exception("health check of board %s failed", name)
            finally:
                close_old_connections()
        time.sleep(interval)


def check(name: str) -> dict:
    """Check board ``name`` as its worker runs it now and record what was found."""
    from workers import boards, sandbox

    runner = boards.runner_for(
        name, settings.PEAKWATCH_BOARDS,
        limits=sandbox.Limits.from_settings(settings.PEAKWATCH.get("SANDBOX")),
    )
    health = runner.health()
    before = Board.objects.filter(name=name).values_list("info", flat=True).first() or {}
    info = {
        **runner.describe(), **health.to_json(),
        "checked_at": timezone.now().isoformat(),
        # A run in progress says so until it ends, whatever the check finds.
        "current_run": before.get("current_run"),
    }
    actions.mark_board_seen(
        name, info, kind=runner.kind, target=runner.target,
        memory_capacity=runner.memory_capacity,
    )
    return info
