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
    """Messages waiting in each queue, when the broker is Redis or RabbitMQ; else nothing."""
    url = settings.CELERY_BROKER_URL
    if url.startswith(("amqp://", "amqps://", "pyamqp://")) and queues:
        return _amqp_depths(queues)
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


def _amqp_depths(queues: list[str]) -> dict[str, int]:
    """Ready messages per queue, by passive declaration (a queue nobody declared has none)."""
    from amqp.exceptions import AMQPError, NotFound
    from kombu.exceptions import OperationalError

    found: dict[str, int] = {}
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
            for queue in queues:
                # A failed passive declaration closes its channel: one channel per queue.
                channel = connection.channel()
                try:
                    found[queue] = channel.queue_declare(queue=queue, passive=True).message_count
                except NotFound:
                    found[queue] = 0
                finally:
                    if channel.is_open:
                        channel.close()
    except (OSError, OperationalError, AMQPError) as exc:
        log.warning("no queue depths from the broker: %s", exc)
        return {}
    return found
