"""The boards an export is built for, and the emulated machines that run them.

A board is what the user deploys to (its SRAM and flash decide whether a plan fits); the
machine is the QEMU model with the same CPU that runs the image. QEMU's MPS2 machines have
4 MB of code memory at 0x0 and 4 MB of RAM at 0x20000000, more than the boards: an image
too big for its board still runs there, so its figures are measured and flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from string import Template

RUNTIME_DIR = Path(__file__).with_name("runtime")

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Board:
    name: str
    #: QEMU's machine (``qemu-system-arm -M``) with this board's CPU.
    machine: str
    cpu: str
    sram_bytes: int
    flash_bytes: int
    #: Code generation flags for the CPU and its FPU (hard-float ABI where there is one).
    cpu_flags: tuple[str, ...]
    #: Reserved for the stack; what is used of it is measured by painting.
    stack_bytes: int = 32 * KIB
    flash_origin: int = 0x0
    flash_length: int = 4 * MIB
    ram_origin: int = 0x20000000
    ram_length: int = 4 * MIB

    def tvm_target(self):
        import tvm

        return tvm.target.Target({"kind": "c", "mcpu": self.cpu})

    def linker_script(self) -> str:
        template = Template((RUNTIME_DIR / "cortex_m.ld.in").read_text())
        return template.substitute(
            flash_origin=hex(self.flash_origin),
            flash_length=hex(self.flash_length),
            ram_origin=hex(self.ram_origin),
            ram_length=hex(self.ram_length),
            stack_bytes=hex(self.stack_bytes),
        )

    def qemu_command(self, elf: str, plugin: str | None = None) -> list[str]:
        command = [
            "qemu-system-arm", "-M", self.machine, "-nographic", "-monitor", "none",
            "-serial", "null", "-semihosting-config", "enable=on,target=native",
            "-kernel", elf,
        ]
        if plugin:
            command += ["-plugin", plugin]
        return command

    def with_capacity(self, *, sram_bytes: int | None = None, flash_bytes: int | None = None):
        return replace(
            self,
            sram_bytes=self.sram_bytes if sram_bytes is None else sram_bytes,
            flash_bytes=self.flash_bytes if flash_bytes is None else flash_bytes,
        )


BOARDS: dict[str, Board] = {
    # Case 2's board: Cortex-M7 with a single-precision FPU, 320 KB SRAM, 1 MB flash.
    "stm32f746": Board(
        "stm32f746", "mps2-an500", "cortex-m7", 320 * KIB, 1 * MIB,
        ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
    ),
    "mps2-an500": Board(
        "mps2-an500", "mps2-an500", "cortex-m7", 4 * MIB, 4 * MIB,
        ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"),
    ),
    "mps2-an386": Board(
        "mps2-an386", "mps2-an386", "cortex-m4", 4 * MIB, 4 * MIB,
        ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
    ),
}


class UnknownBoard(ValueError):
    pass


def get_board(board: str | Board) -> Board:
    """A board by name; a QEMU machine name gives that machine's own board."""
    if isinstance(board, Board):
        return board
    if board in BOARDS:
        return BOARDS[board]
    raise UnknownBoard(f"unknown board {board!r}; known: {', '.join(BOARDS)}")


def resolve_board(
    board: str | None = None, machine: str | None = None, *,
    sram_bytes: int | None = None, flash_bytes: int | None = None,
) -> Board:
    """The board named by a board and/or a QEMU machine (the command line's ``--board`` and
    ``--machine``, a micro worker's configuration), with its capacities overridden.

    A machine alone gives that machine's own board; neither gives case 2's STM32F746.
    """
    if board is None and machine is not None:
        machines = {b.machine: b for b in BOARDS.values() if b.name == b.machine}
        if machine not in machines:
            raise UnknownBoard(f"unknown machine {machine}; known: {', '.join(sorted(machines))}")
        spec = machines[machine]
    else:
        spec = get_board(board or "stm32f746")
        if machine is not None and machine != spec.machine:
            raise UnknownBoard(f"board {spec.name} runs on {spec.machine}, not {machine}")
    return spec.with_capacity(sram_bytes=sram_bytes, flash_bytes=flash_bytes)
