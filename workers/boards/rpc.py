"""Remote boards over TVM RPC: compile here, upload the library, run and time it there.

Compiling happens in the worker's sandbox for the board's target; checking and timing on the
board (:mod:`planner.tvm.measure.remote`). Memory on a remote board is the planned arena: the RPC
server has no allocator statistics to report, so ``measured_peak_bytes`` stays empty and
``measured`` says why.
"""

from __future__ import annotations

import logging
import socket

from planner.report import BoardFigures
from planner.shapes import label
from workers.boards.base import BoardOptions, BoardRunner, Health
from workers.boards.config import split_address

log = logging.getLogger(__name__)


class RpcBoard(BoardRunner):
    kind = "rpc"
    default_target = "llvm"

    @property
    def address(self) -> str:
        return self.config.tracker or self.config.rpc

    def describe(self) -> dict:
        info = super().describe()
        info["rpc"] = {
            "mode": "tracker" if self.config.tracker else "direct",
            "address": self.address,
            "key": self.config.key,
            "device": self.config.device,
        }
        return info

    def board_health(self) -> Health:
        from planner.tvm.measure import remote

        host, port = split_address(self.address, self.name)
        try:
            with socket.create_connection((host, port), timeout=5):
                pass
        except OSError as exc:
            return Health(False, f"RPC {self.address} unreachable: {exc}")
        if self.config.tracker:
            try:
                free = remote.tracker_has_key(host, port, self.config.key)
            except Exception as exc:  # a tracker that answers nonsense is as bad as none
                return Health(False, f"RPC tracker {self.address}: {exc}")
            if not free:
                return Health(False, f"no server with key {self.config.key!r} on {self.address}")
        return Health(True)

    def connect(self):
        from planner.tvm.measure import remote

        if self.config.tracker:
            return remote.connect(
                tracker=split_address(self.config.tracker, self.name), key=self.config.key,
                timeout=self.config.timeout,
            )
        return remote.connect(
            rpc_address=split_address(self.config.rpc, self.name), timeout=self.config.timeout
        )

    def compile_options(self, job) -> BoardOptions:
        # Latency is measured on the board, and the host's allocator says nothing about it.
        return BoardOptions(repeat=0, memory_configs=())

    def measure(self, *, strategies, **kwargs):
        from planner.tvm.strategies import STOCK

        # The stock build is the reference the board's outputs are checked against.
        compiled = list(dict.fromkeys([STOCK, *strategies]))
        reports = super().measure(strategies=compiled, **kwargs)
        return [r for r in reports if r.strategy in strategies]

    def after_compile(self, job, reports) -> None:
        from planner.tvm.measure import remote

        # Each shape point is its own build, checked against the stock build at that point.
        points: dict[str, dict] = {}
        for report in reports:
            points.setdefault(label(report.shape_point), {})[report.strategy] = report
        for by_strategy in points.values():
            if remote.STOCK not in by_strategy:
                for report in by_strategy.values():
                    report.error = (
                        "the tvm-stock build failed, so there is nothing to check against"
                    )
                continue
            # A session per point: a library of the same name uploaded over one the server
            # has loaded brings the server down.
            try:
                remote.check_remotely(
                    self.connect(), self.config.device, by_strategy, job.repeat
                )
            except Exception as exc:  # the board's failure is its Results', not the worker's
                log.warning("RPC board %s: %s", self.name, exc)
                where = f"RPC board {self.name} ({self.address}"
                where += f", key {self.config.key!r})" if self.config.key else ")"
                for report in by_strategy.values():
                    report.error = report.error or f"{where}: {type(exc).__name__}: {exc}"
        for report in reports:
            report.measured = {**report.measured, "note": remote.NO_REMOTE_MEMORY}
            report.board = BoardFigures(
                kind=self.kind, figures={"remote": self.address, "key": self.config.key}
            )
