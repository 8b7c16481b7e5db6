"""Board runners: how a model is compiled and measured on one class of device.

Each board is served by the workers started with its queue (``board.NAME``), so a fleet
grows by starting ``celery -A workers.app worker -Q board.NAME`` where the board is attached.
``cpu`` and ``cuda`` are known to every worker; any other board (a remote device over TVM
RPC, a micro-class board) is named in the worker's ``PEAKWATCH_BOARDS`` setting (see
:mod:`workers.boards.config`).
"""

from __future__ import annotations

from typing import Any

from workers.boards.base import BoardRunner, Health, UnknownBoard
from workers.boards.config import BoardConfigError, lookup
from workers.boards.cpu import CpuBoard
from workers.boards.cuda import CudaBoard
from workers.boards.micro import MicroBoard
from workers.boards.rpc import RpcBoard

__all__ = ["BoardRunner", "Health", "UnknownBoard", "queue_for", "runner_for"]

#: The runner of each kind of board.
KINDS: dict[str, type[BoardRunner]] = {
    "cpu": CpuBoard,
    "cuda": CudaBoard,
    "rpc": RpcBoard,
    "micro": MicroBoard,
}

#: Boards every deployment serves out of the box (docker-compose has a worker for each);
#: a GPU or a remote board needs its own host, so its worker is started there.
RUNNERS: dict[str, type[BoardRunner]] = {"cpu": CpuBoard}


def queue_for(board: str) -> str:
    return f"board.{board}"


def runner_for(board: str, configured: dict[str, Any] | None = None) -> BoardRunner:
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
    return KINDS[config.kind](config)
