"""Runs executed by a real ``celery worker`` process consuming ``board.cpu`` from Redis."""

import os
import signal

import pytest

from dashboard import actions
from dashboard.demo import create_demo_repository
from dashboard.models import Result, Run
from tests.helpers import record_head
from tests.workers.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

MODELS = {
    "small-cnn": {"channels": 4, "resolution": 16, "depth": 2},
    "residual-cnn": {"channels": 4, "resolution": 16, "blocks": 1},
}


def _commit(tmp_path, models=MODELS):
    path = tmp_path / "repo"
    create_demo_repository(path, [("Track tiny models", models)])
    return record_head(path)


def _run(run_id):
    return Run.objects.get(pk=run_id)


def test_a_worker_on_the_board_queue_executes_the_run(tmp_path, start_worker):
    commit = _commit(tmp_path)
    worker = start_worker()

    run = actions.start_run(commit)

    wait_for(lambda: _run(run.pk).is_finished, 240, "the run to finish", [worker.log_path])
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    errors = [r.error for r in Result.objects.filter(run=run)]
    assert Result.objects.filter(run=run, status="ok").count() == 6, errors
    # The worker, not this process, did the work: its log names the task.
    assert "workers.tasks.run_on_board" in open(worker.log_path).read()


def test_a_run_stays_queued_while_no_worker_serves_its_board(tmp_path, broker):
    commit = _commit(tmp_path)

    run = actions.start_run(commit)

    assert _run(run.pk).status == Run.Status.QUEUED
    assert broker.llen("peakwatch") == 1


def test_a_worker_killed_mid_run_loses_nothing(tmp_path, start_worker):
    wide = {"source": "zoo:small_cnn", "channels": 8, "resolution": 24, "depth": 3}
    models = {**MODELS, "wide-cnn": wide}
    commit = _commit(tmp_path, models)
    first = start_worker(visibility_timeout=4)
    run = actions.start_run(commit)
    wait_for(lambda: Result.objects.filter(run=run).count() >= 3, 240,
             "the first model's results", [first.log_path])

    os.killpg(first.pid, signal.SIGKILL)  # no warm shutdown: the machine just died
    first.wait()
    done_before = Result.objects.filter(run=run).count()
    assert not _run(run.pk).is_finished
    second = start_worker(visibility_timeout=4)

    # The visibility timeout is 4 s and the second worker looks for expired runs every
    # 10 s; kombu's default throttle would leave the run waiting over 100 s.
    wait_for(lambda: _run(run.pk).is_finished, 75, "the redelivered run to finish",
             [second.log_path])
    run.refresh_from_db()
    failed = [r.error for r in Result.objects.filter(run=run) if r.error]
    assert run.status == Run.Status.SUCCEEDED, (run.error, failed)
    assert Result.objects.filter(run=run).count() == 9
    assert run.progress_done == 9
    assert done_before < 9
