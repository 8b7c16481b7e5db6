"""The deployment files, checked without a Docker engine (none runs on CI machines)."""

import os
import re
import shutil
import subprocess
import sys
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


SYSTEMD = ROOT / "deploy" / "systemd"


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_the_example_settings_make_a_deployment_that_starts(tmp_path):
    env = {**_env_file(SYSTEMD / "env.example"), "PEAKWATCH_DATA_DIR": str(tmp_path)}
    for needed in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY",
                   "PEAKWATCH_BASE_URL", "DJANGO_ALLOWED_HOSTS"):
        assert needed in env
    code = (
        "import django; from django.conf import settings; django.setup();"
        "print(settings.EMBEDDED, settings.CELERY_BROKER_URL, settings.PEAKWATCH_BASE_URL)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
        env={"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "dashboard.settings", **env},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "False", env["CELERY_BROKER_URL"], env["PEAKWATCH_BASE_URL"]
    ]


def test_the_units_start_what_the_deployment_section_names():
    web = (SYSTEMD / "peakwatch-web.service").read_text()
    worker = (SYSTEMD / "peakwatch-worker@.service").read_text()
    for unit in (web, worker):
        assert "EnvironmentFile=/etc/peakwatch/env" in unit
    assert "gunicorn dashboard.wsgi:application" in web and "User=peakwatch" in web
    assert "celery -A workers.app worker -Q %I" in worker
    deployment = (ROOT / "docs" / "deployment.md").read_text()
    for step in ("createdb", "CELERY_BROKER_URL", "PEAKWATCH_BASE_URL", "createsuperuser",
                 "peakwatch-worker@", "--github", "bash .ci/setup --worker"):
        assert step in deployment, step


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_reads_the_units_without_complaint(tmp_path):
    # Paths of a real install are absent here; the unit files themselves must parse.
    for unit in SYSTEMD.glob("*.service"):
        text = unit.read_text().replace("/opt/peakwatch/venv/bin/", "/bin/")
        copy = tmp_path / unit.name.replace("@", "@x")
        copy.write_text(text.replace("/etc/peakwatch/env", str(tmp_path / "env")))
        (tmp_path / "env").write_text("")
        proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)],
                              capture_output=True, text=True)
        complaints = [line for line in proc.stderr.splitlines()
                      if unit.name.split("@")[0] in line and "not executable" not in line]
        assert not complaints, proc.stderr
