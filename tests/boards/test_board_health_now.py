"""/boards/ says how each board is now: its worker checks it every few seconds, not only when
a run starts or ends, so a board that goes away between runs reads offline, and online again
once it is back."""

from __future__ import annotations

import json
import os
import signal

import pytest
from django.test import Client

from dashboard.models import Board
from tests.boards.conftest import free_port
from tests.workers.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def _status(name: str) -> tuple[str, str]:
    rows = {row["name"]: row for row in Client().get("/boards/?format=json").json()["boards"]}
    row = rows.get(name)
    return (row["status"], row.get("reason") or "") if row else ("", "")


def test_the_boards_page_follows_a_remote_board_as_it_goes_and_comes_back(
    start_worker, spawn
):
    port = free_port()
    address = f"127.0.0.1:{port}"
    worker = start_worker(queues="board.loop", extra_env={
        "PEAKWATCH_BOARDS": json.dumps({"loop": {"kind": "rpc", "rpc": address}}),
        "PEAKWATCH_BOARD_HEALTH_SECONDS": "1",
    })

    # No server yet: no run has started, and the page already says why.
    wait_for(lambda: _status("loop")[0] == "offline", 60, "the board to read offline",
             [worker.log_path])
    assert "unreachable" in _status("loop")[1]
    assert Board.objects.get(name="loop").info["checked_at"]

    # The server comes up: online within a check or two, still with no run.
    server = spawn("tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(port),
                   "--port-end", str(port + 1), port=port)
    wait_for(lambda: _status("loop")[0] == "online", 30, "the board to read online",
             [worker.log_path])

    # And it goes away again (the server and the process it serves each connection in).
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    wait_for(lambda: _status("loop")[0] == "offline", 30, "the board to read offline again",
             [worker.log_path])
