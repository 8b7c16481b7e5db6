"""Micro-class boards: a bare-metal C build of each plan, run on an emulated Cortex-M.

A microcontroller runs no Relax VM and no RPC server. For each strategy the sandboxed
compile (target ``c``, checked on the host) is followed, in the same child, by
``planner.tvm.micro``: the plan is exported as a C project with one static arena, built
with ``arm-none-eabi-gcc`` and run on ``qemu-system-arm``. Each Result records what the
built image and the run say (``details["board"]``): RAM (static RAM + the stack's measured
high-water mark), flash, arena, workspace region, executed instructions, whether the
outputs match TVM's stock build on the board and as a host build, and ``over_capacity``
against the board's SRAM and flash (a model that does not fit fails its Result, naming what
it needs and the board's capacity); the exported project is its ``export.zip`` artifact.

Configured in ``PEAKWATCH_BOARDS``::

    "stm32": {"kind": "micro", "machine": "mps2-an500",
              "memory_capacity": 327680, "flash_capacity": 1048576}

``board`` names a board of :data:`planner.tvm.micro.BOARDS` (its CPU flags and sizes),
``machine`` a QEMU machine; ``memory_capacity`` (SRAM) and ``flash_capacity`` override the
board's sizes. Without the toolchain or QEMU on the host the board is offline.
"""

from __future__ import annotations

from planner.job_spec import MicroOptions
from planner.tvm.micro.boards import Board, resolve_board
from planner.tvm.micro.build import micro_toolchain_missing
from workers.boards.base import BoardOptions, BoardRunner, Health


class MicroBoard(BoardRunner):
    kind = "micro"
    default_target = "c"

    @property
    def board(self) -> Board:
        extra = self.config.extra
        return resolve_board(
            extra.get("board"), extra.get("machine"),
            sram_bytes=self.config.memory_capacity, flash_bytes=extra.get("flash_capacity"),
        )

    @property
    def memory_capacity(self) -> int:
        return self.board.sram_bytes

    @property
    def cache_identity(self) -> str:
        # Another machine or capacity measures (or flags) differently: never reuse across.
        board = self.board
        return (
            f"{self.target}|{board.name}|{board.machine}|{board.sram_bytes}|{board.flash_bytes}"
        )

    def board_health(self) -> Health:
        missing = micro_toolchain_missing()
        if missing:
            return Health(online=False, reason=missing)
        return Health(online=True)

    def describe(self) -> dict:
        board = self.board
        return {
            **super().describe(),
            "board": board.name,
            "machine": board.machine,
            "cpu": board.cpu,
            "memory_capacity": board.sram_bytes,
            "flash_capacity": board.flash_bytes,
        }

    def compile_options(self, job) -> BoardOptions:
        board = self.board
        return BoardOptions(
            repeat=0,
            memory_configs=(),
            micro=MicroOptions(
                board=board.name, machine=board.machine,
                sram_bytes=board.sram_bytes, flash_bytes=board.flash_bytes,
            ),
        )
