"""The one place work leaves the web process: Celery tasks sent by name.

Actions never import tasks (the workers import the dashboard, not the other way round).
They hand work to :func:`send` inside ``transaction.on_commit`` so the worker sees the rows.
Without a broker (the embedded default), the task runs here and now, in process.
"""

from __future__ import annotations

import logging

from django.conf import settings

from dashboard.celery import app

log = logging.getLogger(__name__)

#: Planning a run, git fetches and HTTP calls of regression tracking; never a compile.
TRACKING_QUEUE = "peakwatch"

PLAN_RUN = "workers.tasks.plan_run"
RUN_ON_BOARD = "workers.tasks.run_on_board"
PROCESS_GITHUB_DELIVERY = "workers.tracking.process_github_delivery"
TRIGGER_RUN = "workers.tracking.trigger_run"
NOTIFY_RUN = "workers.tracking.notify_run"


def board_queue(board: str) -> str:
    """The queue a board's workers consume (``celery worker -Q board.NAME``)."""
    return f"board.{board}"


def send(name: str, *args, queue: str | None = None) -> None:
    if app.conf.task_always_eager:
        # send_task never runs eagerly; look the task up (the worker modules register it
        # when imported) and run it here, as a broker-less deployment must.
        app.loader.import_default_modules()
        app.tasks[name].apply(args=args, throw=True)
        return
    app.send_task(name, args=args, queue=queue or TRACKING_QUEUE)


def depths(queues: list[str]) -> dict[str, int]:
    """Messages waiting in each queue (``LLEN``), when the broker is Redis; else nothing."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")) or not queues:
        return {}
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        with client.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.llen(queue)
            return dict(zip(queues, pipe.execute(), strict=True))
    except redis.RedisError as exc:
        # The page still shows what the database knows.
        log.warning("no queue depths from the broker: %s", exc)
        return {}
