"""The deployment files, checked without a Docker engine (none runs on CI machines)."""

import re
from pathlib import Path

import pytest
import yaml

from workers.app import app as celery_app
from workers.boards import RUNNERS, queue_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_runs_every_part_of_a_deployment(compose):
    assert {"postgres", "rabbitmq", "redis", "web"} <= set(compose["services"])
    assert [s for s in compose["services"] if s.startswith("worker-")]


def test_every_service_runs_something():
    # Celery beat had nothing scheduled; a service that only idles is one more to watch.
    assert not celery_app.conf.beat_schedule
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert not [name for name, s in compose["services"].items() if " beat" in s.get("command", "")]


def test_the_web_service_migrates_then_serves_with_gunicorn(compose):
    command = compose["services"]["web"]["command"]
    assert command.index("migrate") < command.index("gunicorn dashboard.wsgi:application")
    assert "8000:8000" in compose["services"]["web"]["ports"]


def test_every_board_has_a_worker_consuming_its_queue(compose):
    consumed = set()
    for name, service in compose["services"].items():
        if name.startswith("worker-"):
            queues = re.search(r"-Q (\S+)", service["command"]).group(1).split(",")
            assert service["command"].startswith("celery -A workers.app worker")
            consumed.update(queues)
    assert {queue_for(board) for board in RUNNERS} <= consumed
    # Someone must serve the coordination queue that plan_run is routed to.
    assert celery_app.conf.task_routes["workers.tasks.plan_run"]["queue"] in consumed


def test_apps_reach_postgres_rabbitmq_and_redis_by_service_name(compose):
    for name in ("web", "worker-cpu"):
        service = compose["services"][name]
        env = service["environment"]
        assert "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:6379")
        # Tasks go through RabbitMQ, which requeues a dead worker's task at once.
        assert env["CELERY_BROKER_URL"].startswith("amqp://") and "@rabbitmq:5672" in env[
            "CELERY_BROKER_URL"]
        assert env["DJANGO_DEBUG"] == "0"
        assert set(service["depends_on"]) == {"postgres", "rabbitmq", "redis"}
    postgres_env = compose["services"]["postgres"]["environment"]
    assert postgres_env["POSTGRES_DB"] in compose["services"]["web"]["environment"]["DATABASE_URL"]


def test_the_image_installs_a_worker_as_the_deployment_section_does():
    dockerfile = (ROOT / "Dockerfile").read_text()
    # torch and the model libraries come with the worker's install; without them every model
    # file in a tracked repository fails with "No module named 'torch'".
    assert "bash .ci/setup --worker" in dockerfile


def test_the_image_builds_the_frontend_and_collects_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "npm run build" in dockerfile
    assert "collectstatic" in dockerfile
    assert "\"gunicorn\", \"dashboard.wsgi:application\"" in dockerfile
