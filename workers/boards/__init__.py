"""Board runners: how a model is compiled and measured on one class of device.

Each board is served by the workers started with its queue (``board.NAME``), so a fleet
grows by starting ``celery -A workers.app worker -Q board.NAME`` where the board is attached.
"""

from __future__ import annotations

from workers.boards.base import BoardRunner, UnknownBoard
from workers.boards.cpu import CpuBoard

RUNNERS: dict[str, type[BoardRunner]] = {
    "cpu": CpuBoard,
}


def queue_for(board: str) -> str:
    return f"board.{board}"


def runner_for(board: str) -> BoardRunner:
    try:
        return RUNNERS[board]()
    except KeyError:
        raise UnknownBoard(
            f"no runner for board {board!r}; known boards: {', '.join(sorted(RUNNERS))}"
        ) from None
