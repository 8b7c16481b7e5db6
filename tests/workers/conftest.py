"""A real Celery worker process consuming the board queues from a real Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.helpers import stop_process_group
from workers.app import app as celery_app

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker():
    """Tasks go through Redis for real; the database number is the tests' own."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is not running at {settings.REDIS_URL}: {exc} (.ci/run starts it)")
    client.flushdb()
    celery_app.conf.task_always_eager = False
    yield client
    celery_app.conf.task_always_eager = True
    client.flushdb()


@pytest.fixture
def start_worker(broker, tmp_path) -> Callable[..., subprocess.Popen]:
    """Start ``celery worker`` on the given queues against the test database."""
    processes: list[subprocess.Popen] = []
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"

    def start(queues: str = "peakwatch,board.cpu", visibility_timeout: int | None = 3600,
              broker_url: str | None = None, pool: str = "solo", extra_env: dict | None = None,
              cwd: Path = REPO_ROOT):
        """``visibility_timeout=None`` and ``pool="prefork"`` are a deployment's defaults;
        ``broker_url`` another broker than the tests' Redis (RabbitMQ); ``extra_env`` more
        variables (another host's, say), and ``cwd`` another folder to run in."""
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "DATABASE_URL": url,
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "PEAKWATCH_DATA_DIR": str(tmp_path / "worker-data"),
            "PEAKWATCH_ARTIFACT_DIR": str(settings.MEDIA_ROOT),
            "PEAKWATCH_LATENCY_REPEAT": "2",
        }
        env.pop("PEAKWATCH_VISIBILITY_TIMEOUT", None)
        if visibility_timeout is not None:
            env["PEAKWATCH_VISIBILITY_TIMEOUT"] = str(visibility_timeout)
        if broker_url:
            env["CELERY_BROKER_URL"] = broker_url
        env.update(extra_env or {})
        if cwd != REPO_ROOT:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                              env.get("PYTHONPATH")]))
        log = open(tmp_path / f"worker-{len(processes)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", queues,
             "--pool", pool, "--concurrency", "1", "--without-gossip", "--without-mingle",
             "--loglevel", "INFO", "-n", f"test{len(processes)}@%h"],
            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.log_path = log.name
        processes.append(proc)
        return proc

    yield start
    for proc in processes:
        stop_process_group(proc, timeout=20)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, logs=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    tail = "".join(Path(p).read_text()[-3000:] for p in logs)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")
