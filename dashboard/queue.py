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
RESOLVE_RUN_REQUEST = "workers.tracking.resolve_run_request"
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


#: Seconds a list of consumers is reused: asking every worker costs up to a second.
CONSUMERS_TTL = 15
CONSUMERS_KEY = "peakwatch:queue-consumers"


def consumers(timeout: float = 1.0) -> dict[str, list[str]] | None:
    """The workers consuming each queue, as they answer a broadcast now; None when that
    cannot be known (no broker: tasks run in process; the broker did not answer).

    A queue no worker consumes keeps its runs waiting forever, while the boards page, which
    shows what workers last reported, still reads "online": this is what says so.
    """
    from django.core.cache import cache

    if app.conf.task_always_eager:
        return None
    known = cache.get(CONSUMERS_KEY)
    if known is not None:
        return known
    try:
        answers = app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception as exc:  # a broker that cannot be reached leaves it unknown
        log.warning("could not ask the workers which queues they consume: %s", exc)
        return None
    found: dict[str, list[str]] = {}
    for worker, queues in answers.items():
        for entry in queues or []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if name:
                found.setdefault(name, []).append(worker)
    cache.set(CONSUMERS_KEY, found, CONSUMERS_TTL)
    return found


def unconsumed(queues: list[str]) -> list[str] | None:
    """Those of ``queues`` no worker consumes now; None when that cannot be known."""
    found = consumers()
    if found is None:
        return None
    return [name for name in dict.fromkeys(queues) if not found.get(name)]


def waiting_on(run) -> list[str]:
    """The queues the unfinished ``run`` needs that no worker consumes now (none when that
    cannot be known): a run planned on nobody's queue waits forever, silently. A queued run
    needs the planning queue; a planned one, each of its boards' queues."""
    if run.is_finished or run.awaits_approval:
        return []
    if run.status == "queued":
        needed = [TRACKING_QUEUE]
    else:
        needed = [board_queue(board) for board in run.boards]
    return unconsumed(needed) or []
