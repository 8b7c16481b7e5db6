"""With RabbitMQ as broker and a deployment's default settings, a worker killed mid-run
costs seconds: the broker requeues the run's message when the connection drops."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from amqp.exceptions import NotFound
from django.conf import settings as django_settings

from dashboard import actions, queue
from dashboard.models import Result, Run
from tests.workers.conftest import wait_for
from tests.workers.test_celery_worker import MODELS, _commit, _run
from workers.app import app as celery_app

AMQP_URL = os.environ.get("PEAKWATCH_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
QUEUES = ("peakwatch", "board.cpu")


def _purge(connection) -> None:
    for name in QUEUES:
        channel = connection.channel()
        try:
            channel.queue_purge(name)
        except NotFound:
            pass
        finally:
            if channel.is_open:
                channel.close()


@pytest.fixture
def rabbitmq(settings):
    """This process sends its tasks to RabbitMQ, as a deployment configured with
    CELERY_BROKER_URL would."""
    with celery_app.connection_for_write(AMQP_URL) as connection:
        try:
            connection.ensure_connection(max_retries=1, timeout=5)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"RabbitMQ is not running at {AMQP_URL}: {exc} (.ci/services starts it)")
        _purge(connection)
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = settings.CELERY_BROKER_URL = AMQP_URL
    celery_app.conf.task_always_eager = False
    _reset_pools()
    yield
    with celery_app.connection_for_write(AMQP_URL) as connection:
        _purge(connection)
    celery_app.conf.broker_url = previous
    celery_app.conf.task_always_eager = True
    _reset_pools()


def _reset_pools() -> None:
    # The app caches its pools for the broker it first used; kombu keeps one pool per
    # broker URL process-wide, so they are dropped here, not closed.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def _ready(worker) -> bool:
    return "ready." in Path(worker.log_path).read_text()


@pytest.mark.django_db(transaction=True)
def test_a_queued_run_shows_in_the_rabbitmq_queue_depth(tmp_path, rabbitmq):
    commit = _commit(tmp_path)

    actions.start_run(commit)

    # A publish reaches the queue's count a moment later: asked at once, under load it can
    # still read 0 (seen in CI).
    deadline = time.monotonic() + 10
    while queue.depths(["peakwatch"]) != {"peakwatch": 1} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert queue.depths(["peakwatch", "board.nowhere"]) == {"peakwatch": 1, "board.nowhere": 0}
    assert django_settings.CELERY_BROKER_URL == AMQP_URL


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_killed_workers_run_resumes_within_a_minute_on_default_settings(
    tmp_path, rabbitmq, start_worker, record_property
):
    wide = {"source": "zoo:small_cnn", "channels": 8, "resolution": 24, "depth": 3}
    commit = _commit(tmp_path, {**MODELS, "wide-cnn": wide})
    # Default settings: no visibility timeout set, the prefork pool, RabbitMQ as broker.
    first = start_worker(visibility_timeout=None, broker_url=AMQP_URL, pool="prefork")
    run = actions.start_run(commit)
    wait_for(lambda: Result.objects.filter(run=run).count() >= 3, 240,
             "the first model's results", [first.log_path])
    # A second worker is up and idle: the broker holds the run's message for the first.
    second = start_worker(visibility_timeout=None, broker_url=AMQP_URL, pool="prefork")
    wait_for(lambda: _ready(second), 120, "the second worker", [second.log_path])

    done_before = Result.objects.filter(run=run).count()
    os.killpg(first.pid, signal.SIGKILL)  # no warm shutdown: the machine just died
    killed_at = time.monotonic()
    first.wait()
    assert done_before < 9 and not _run(run.pk).is_finished

    wait_for(lambda: Result.objects.filter(run=run).count() > done_before or
             _run(run.pk).is_finished, 60, "the run to resume", [second.log_path])
    resumed_after = time.monotonic() - killed_at
    record_property("resumed_after_seconds", round(resumed_after, 1))
    wait_for(lambda: _run(run.pk).is_finished, 240, "the resumed run to finish",
             [second.log_path])

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert Result.objects.filter(run=run).count() == 9 and run.progress_done == 9
    assert "workers.tasks.run_on_board" in Path(second.log_path).read_text()
    assert resumed_after < 60
