"""Small helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboard import actions, gitrepo
from dashboard.demo import DEMO_AUTHOR, git


def record_head(path, name: str = "tiny"):
    """Track the git repository at ``path`` and record its HEAD commit on main."""
    repository = actions.track_repository(name, str(path))
    info = gitrepo.commit_info(path, "HEAD")
    return actions.record_commit(
        repository, sha=info.sha, branch="main", author=info.author,
        message=info.message, committed_at=info.committed_at,
    )


def stop_process_group(proc: subprocess.Popen, timeout: float) -> None:
    """Stop a process started in its own session, and everything it started."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def hold_planned_runs(monkeypatch) -> list[int]:
    """Keep runs from compiling: the ids of runs handed to the workers, in order.

    Every other task (webhook processing, notifications) still runs, in process.
    """
    from dashboard import queue

    started: list[int] = []
    send = queue.send

    def hold(name, *args, **kwargs):
        if name == queue.PLAN_RUN:
            started.append(args[0])
        else:
            send(name, *args, **kwargs)

    monkeypatch.setattr(queue, "send", hold)
    return started


class Repo:
    """A git repository whose files a test changes and commits."""

    def __init__(self, path: Path):
        self.path = path
        self.when = datetime.now(UTC) - timedelta(days=1)

    def write(self, relative: str, text: str) -> None:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def read(self, relative: str) -> str:
        return (self.path / relative).read_text()

    def commit(self, message: str) -> str:
        self.when += timedelta(minutes=10)
        stamp = self.when.strftime("%Y-%m-%dT%H:%M:%S+0000")
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message, env={
            "GIT_AUTHOR_NAME": DEMO_AUTHOR[0], "GIT_AUTHOR_EMAIL": DEMO_AUTHOR[1],
            "GIT_COMMITTER_NAME": DEMO_AUTHOR[0], "GIT_COMMITTER_EMAIL": DEMO_AUTHOR[1],
            "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
        })
        return git(self.path, "rev-parse", "HEAD")


def migrated_to(migration: str):
    """The database migrated back to ``dashboard``'s ``migration``; returns a function giving
    each model's manager as that migration's state knew the model (a test then fills the
    old tables and migrates forward with :func:`migrate_to`)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    target = [("dashboard", migration)]
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    old = executor.loader.project_state(target).apps
    return lambda name: old.get_model("dashboard", name).objects


def migrate_to(migration: str | None = None) -> None:
    """Migrate ``dashboard`` forward to ``migration``; the newest one when None."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate(
        [("dashboard", migration)] if migration else executor.loader.graph.leaf_nodes()
    )
