"""Small helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import os
import signal
import subprocess

from dashboard import actions
from workers import gitrepo


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
