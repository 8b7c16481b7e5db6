"""Small helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import os
import signal
import subprocess

from dashboard import actions, gitrepo


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
