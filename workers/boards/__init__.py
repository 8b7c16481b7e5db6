"""Board runners: how a model is compiled and measured on one class of device.

Each board is served by the workers started with its queue (``board.NAME``), so a fleet
grows by starting ``celery -A workers.app worker -Q board.NAME`` where the board is attached.
``cpu`` and ``cuda`` are known to every worker; any other board (a remote device over TVM
RPC, a micro-class board) is named in the worker's ``PEAKWATCH_BOARDS`` setting (see
:mod:`workers.boards.config`).
"""

from __future__ import annotations

from typing import Any

from dashboard.queue import board_queue as queue_for
from workers import sandbox
from workers.boards.base import BoardRunner, Health, UnknownBoard
from workers.boards.config import KINDS, BoardConfigError, lookup
from workers.boards.cpu import CpuBoard
from workers.boards.cuda import CudaBoard
from workers.boards.micro import MicroBoard
from workers.boards.rpc import RpcBoard

__all__ = ["BoardRunner", "Health", "UnknownBoard", "queue_for", "runner_for"]

#: The runner of each kind of board.
RUNNER_CLASSES: dict[str, type[BoardRunner]] = {
    cls.kind: cls for cls in (CpuBoard, CudaBoard, RpcBoard, MicroBoard)
}
assert set(RUNNER_CLASSES) == set(KINDS), "every board kind needs a runner"

#: Boards every deployment serves out of the box (docker-compose has a worker for each);
#: a GPU or a remote board needs its own host, so its worker is started there.
RUNNERS: dict[str, type[BoardRunner]] = {"cpu": CpuBoard}


def runner_for(
    board: str, configured: dict[str, Any] | None = None, *, limits: sandbox.Limits | None = None
) -> BoardRunner:
    """The runner of board ``board``, as built in or as ``configured`` (PEAKWATCH_BOARDS)."""
    try:
        config = lookup(board, configured)
    except BoardConfigError as exc:
        raise UnknownBoard(f"board {board!r} is misconfigured: {exc}") from None
    if config is None:
        known = sorted({"cpu", "cuda", *(configured or {})})
        raise UnknownBoard(
            f"no runner for board {board!r}; known boards: {', '.join(known)} "
            "(others are configured in the worker's PEAKWATCH_BOARDS)"
        )
    return RUNNER_CLASSES[config.kind](config, limits=limits)
