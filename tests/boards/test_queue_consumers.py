"""A queue no worker consumes keeps its runs waiting: the boards page says so.

A deployment whose only worker was started with ``-Q board.cpu`` showed the board "online,
idle" while every run stayed queued: nobody consumed ``peakwatch``, where runs are planned.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache

from dashboard import actions, queue
from tests.workers.conftest import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.worker]


def consumed_now() -> dict:
    cache.delete(queue.CONSUMERS_KEY)
    return queue.consumers(timeout=1.0) or {}


def test_queues_without_a_worker_are_named_until_one_consumes_them(client, start_worker):
    actions.mark_board_seen("cpu", {"status": "online"})
    actions.mark_board_seen("stm32", {"status": "online"}, kind="micro", target="c")
    cache.delete(queue.CONSUMERS_KEY)

    page = client.get("/boards/").content.decode()

    # A board that reported itself online is still no use without a worker on its queue.
    assert 'data-unconsumed="peakwatch"' in page
    assert 'data-unconsumed="board.cpu"' in page and 'data-unconsumed="board.stm32"' in page
    assert '<span class="ok">online</span>' not in page
    statuses = {b["name"]: b["status"] for b in client.get("/boards/?format=json").json()["boards"]}
    assert statuses == {"cpu": "offline", "stm32": "offline"}

    worker = start_worker("board.cpu")
    wait_for(lambda: "board.cpu" in consumed_now(), 60, "the worker", [worker.log_path])
    page = client.get("/boards/").content.decode()
    answer = client.get("/boards/?format=json").json()

    assert 'data-unconsumed="board.cpu"' not in page
    assert 'data-unconsumed="board.stm32"' in page and 'data-unconsumed="peakwatch"' in page
    assert answer["planning_queue_consumed"] is False
    assert {b["name"]: b["consumed"] for b in answer["boards"]} == {"cpu": True, "stm32": False}
    # Online again as soon as a worker takes its queue; the other still is not.
    assert {b["name"]: b["status"] for b in answer["boards"]} == {
        "cpu": "online", "stm32": "offline"
    }


def test_without_a_broker_nothing_is_claimed_about_consumers(client, settings):
    # In process (the embedded default) there are no queues to watch.
    actions.mark_board_seen("cpu", {"status": "online"})

    page = client.get("/boards/").content.decode()

    assert "data-unconsumed" not in page
    assert client.get("/boards/?format=json").json()["planning_queue_consumed"] is None


def test_the_run_page_says_which_queue_its_run_waits_on(client, start_worker, recorded_history):
    from dashboard.models import Run

    queued = actions.start_run(recorded_history[-1].commit)
    planned = actions.start_run(recorded_history[-2].commit)
    actions.begin_run(planned, models=[], strategies=[], boards=["cpu", "stm32"], total=4)
    start_worker("peakwatch,board.cpu")
    wait_for(lambda: "board.cpu" in consumed_now(), 60, "the worker")
    # Not committed (this test's transaction), so never sent: the run stays queued.
    assert Run.objects.get(pk=queued.pk).status == Run.Status.QUEUED

    planned_page = client.get(planned.get_absolute_url()).content.decode()
    queued_page = client.get(queued.get_absolute_url()).content.decode()

    assert "data-waiting-on" in planned_page and "<code>board.stm32</code>" in planned_page
    assert "<code>board.cpu</code>" not in planned_page.split("data-waiting-on")[1][:300]
    assert "data-waiting-on" not in queued_page  # peakwatch has its worker
