"""Micro-class boards: devices without the TVM runtime, judged by what the build needs.

A microcontroller runs no Relax VM and no RPC server, so nothing is timed on it. What a
user needs to know is whether the model fits: the C-codegen build (target ``c``) is
compiled and checked here as on any board, and each strategy reports

- ``sram_bytes``: what must sit in RAM during an inference: the planned bytes (arena,
  kernel workspace and outputs) and the input;
- ``code``: section sizes of the compiled kernels (the ``model.so`` built by the host's C
  compiler from the generated C: a proxy for the board's own compiler);
- ``weights_bytes``: parameters, which a board keeps in flash.

A strategy whose ``sram_bytes`` exceed the board's ``memory_capacity`` is flagged with
``over_capacity``: still a result (the plan is right, the board is too small), shown on the
run page.
"""

from __future__ import annotations

import logging

from planner.report import BoardFigures, StrategyReport
from workers.boards import elf
from workers.boards.base import BoardRunner

log = logging.getLogger(__name__)


class MicroBoard(BoardRunner):
    kind = "micro"
    default_target = "c"

    def describe(self) -> dict:
        info = super().describe()
        info["memory_capacity"] = self.memory_capacity
        return info

    def compile_options(self, job) -> dict:
        # Host timings and the host allocator say nothing about the board.
        return {"repeat": 0, "memory_configs": []}

    def after_compile(self, job, reports) -> None:
        for report in reports:
            report.board = self.footprint(report)

    def footprint(self, report: StrategyReport) -> BoardFigures:
        planned = report.planned_bytes
        # planned_bytes already holds the kernel workspace and the outputs.
        sram = planned + (report.input_bytes or 0) if planned is not None else None
        code = None
        library = report.artifacts.get("model.so")
        if library:
            try:
                code = elf.section_sizes(library).to_json()
            except (OSError, elf.NotElf) as exc:
                log.warning("no code size for %s: %s", library, exc)
        capacity = self.memory_capacity
        return BoardFigures(
            kind=self.kind,
            memory_capacity=capacity,
            over_capacity=bool(capacity and sram is not None and sram > capacity),
            figures={
                "sram_bytes": sram,
                "input_bytes": report.input_bytes,
                "weights_bytes": report.weights_bytes,
                "code": code,
            },
        )
