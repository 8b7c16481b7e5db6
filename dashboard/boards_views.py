"""The boards page: each board's health as its workers last reported it, and its queue."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.http import JsonResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import queue
from dashboard.models import Board, Run

log = logging.getLogger(__name__)

#: A worker reports at the start and end of every run; silence longer than this while runs
#: wait in its queue is worth a look.
STALE_AFTER = timedelta(hours=1)


@dataclass
class BoardHealth:
    board: Board
    status: str  # online, offline (the worker said why), never seen
    reason: str
    queue_depth: int | None  # None: the broker is not Redis, or did not answer
    current_run: Run | None
    #: Whether a worker consumes the board's queue now; None when that is unknown.
    consumed: bool | None = None

    @property
    def stale(self) -> bool:
        seen = self.board.last_seen
        return bool(self.queue_depth) and (seen is None or timezone.now() - seen > STALE_AFTER)

    def to_json(self) -> dict:
        info = self.board.info or {}
        return {
            "name": self.board.name,
            "kind": self.board.kind,
            "target": self.board.target,
            "memory_capacity": self.board.memory_capacity,
            "queue": self.board.queue,
            "status": self.status,
            "reason": self.reason,
            "last_seen": self.board.last_seen.isoformat() if self.board.last_seen else None,
            "queue_depth": self.queue_depth,
            "consumed": self.consumed,
            "current_run": self.current_run.pk if self.current_run else None,
            "host": info.get("host"),
            "versions": info.get("versions", {}),
            "sandbox": info.get("sandbox"),
        }


def board_health() -> list[BoardHealth]:
    board_list = list(Board.objects.all())
    depths = queue.depths([b.queue for b in board_list])
    idle = queue.unconsumed([b.queue for b in board_list])
    running = {b.pk: (b.info or {}).get("current_run") for b in board_list}
    running = {pk: run for pk, run in running.items() if run}
    runs = Run.objects.select_related("commit", "repository").in_bulk(running.values())
    rows = []
    for board in board_list:
        info = board.info or {}
        status = info.get("status") or ("online" if board.last_seen else "never seen")
        reason = info.get("reason", "")
        consumed = None if idle is None else board.queue not in idle
        if consumed is False and status == "online":
            # What a worker said when it last ran a job there no longer holds: a board is
            # of no use while nobody takes its jobs.
            status, reason = "offline", "no worker consumes its queue now"
        rows.append(BoardHealth(
            board=board,
            status=status,
            reason=reason,
            queue_depth=depths.get(board.queue),
            current_run=runs.get(running.get(board.pk)),
            consumed=consumed,
        ))
    return rows


def boards_page(request):
    rows = board_health()
    # Runs are planned on this queue before any board sees them.
    planning = queue.unconsumed([queue.TRACKING_QUEUE])
    unplanned = bool(planning)
    if request.GET.get("format") == "json":
        return JsonResponse({
            "boards": [row.to_json() for row in rows],
            "planning_queue_consumed": None if planning is None else not unplanned,
        })
    return render(
        request, "dashboard/boards.html",
        {"rows": rows, "unplanned": unplanned, "planning_queue": queue.TRACKING_QUEUE},
    )
