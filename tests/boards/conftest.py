"""Boards under test: a tracked repository whose manifest names them, and a real RPC server
on loopback acting as a remote board."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from dashboard import actions
from dashboard.demo import commit_file, git
from tests.helpers import stop_process_group
from tests.workers.conftest import broker, start_worker  # noqa: F401  (real Celery workers)

TINY = {"source": "zoo:small_cnn", "params": "{ channels = 4, resolution = 16, depth = 2 }"}


def manifest(boards: list[str], strategies=("tvm-stock", "greedy-by-size")) -> str:
    return "\n".join([
        "[suite]",
        "strategies = [" + ", ".join(f'"{s}"' for s in strategies) + "]",
        "boards = [" + ", ".join(f'"{b}"' for b in boards) + "]",
        "",
        "[[models]]",
        'name = "tiny-cnn"',
        f'source = "{TINY["source"]}"',
        f"params = {TINY['params']}",
        "",
    ])


@pytest.fixture
def commit_naming(tmp_path):
    """A recorded commit of a real repository whose manifest names ``boards``."""

    def make(boards: list[str], strategies=("tvm-stock", "greedy-by-size")):
        path = tmp_path / "repo"
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        sha = commit_file(path, "peakwatch.toml", manifest(boards, strategies),
                          "Track a tiny CNN", datetime.now(UTC))
        repository = actions.track_repository("boards", str(path))
        return actions.record_commit(
            repository, sha=sha, branch="main", author="Ada Planner",
            message="Track a tiny CNN", committed_at=datetime.now(UTC),
        )

    return make


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log_path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"RPC process exited early:\n{open(log_path).read()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"nothing listened on {port} after {timeout:.0f}s")


@pytest.fixture
def spawn(tmp_path):
    """Start ``python -m tvm.exec.*`` processes in their own sessions; stop them after."""
    processes: list[subprocess.Popen] = []

    def start(*args: str, port: int | None = None) -> subprocess.Popen:
        log_path = tmp_path / f"rpc-{len(processes)}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        proc.log_path = log_path
        processes.append(proc)
        if port is not None:
            _wait_for_port(port, proc, log_path)
        return proc

    yield start
    for proc in processes:
        stop_process_group(proc, timeout=10)


@pytest.fixture
def rpc_server(spawn) -> str:
    """A TVM RPC server on loopback: the remote board. Returns its ``host:port``."""
    port = free_port()
    spawn("tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(port),
          "--port-end", str(port + 1), port=port)
    return f"127.0.0.1:{port}"
