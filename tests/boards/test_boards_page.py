"""The boards page: health, last seen, queue depth, current run and worker versions."""

import pytest

from dashboard import actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(recorded_history):
    run = recorded_history[-1]
    actions.mark_board_seen("cpu", {
        "status": "online", "current_run": run.pk, "host": "bench-1",
        "versions": {"tvm": "0.27.0.post1", "python": "3.11.7", "celery": "5.7.0"},
    })
    actions.mark_board_seen("cuda", {"status": "offline", "reason": "no CUDA device"},
                            kind="cuda", target='{"kind": "cuda", "arch": "sm_80"}')
    actions.mark_board_seen("stm32", {"status": "online"}, kind="micro", target="c",
                            memory_capacity=196608)
    return run


def test_it_shows_each_boards_health_and_current_run(client, fleet):
    page = client.get("/boards/").content.decode()

    assert 'data-board="cpu"' in page and "bench-1" in page and "TVM 0.27.0.post1" in page
    assert f'href="{fleet.get_absolute_url()}"' in page
    assert "offline" in page and "no CUDA device" in page
    assert "192.0 KiB" in page  # the micro board's memory capacity


def test_the_queue_depth_comes_from_the_redis_broker(client, fleet, settings, broker):
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    broker.rpush("board.cuda", "a", "b", "c")

    boards = {b["name"]: b for b in client.get("/boards/?format=json").json()["boards"]}

    assert boards["cuda"]["queue_depth"] == 3
    assert boards["cpu"]["queue_depth"] == 0
    assert boards["cuda"]["status"] == "offline"
    assert boards["cpu"]["current_run"] == fleet.pk
    assert boards["stm32"]["memory_capacity"] == 196608 and boards["stm32"]["kind"] == "micro"


def test_without_a_redis_broker_the_queue_depth_is_unknown(client, fleet, settings):
    settings.CELERY_BROKER_URL = "memory://"

    boards = client.get("/boards/?format=json").json()["boards"]

    assert {b["queue_depth"] for b in boards} == {None}


def test_the_navigation_links_to_the_boards_page(client, fleet):
    assert 'href="/boards/"' in client.get("/").content.decode()
