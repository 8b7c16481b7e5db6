"""Compile an exported project for its board and for this host; read the board image.

The figures of the image come from its ELF file (read with pyelftools): flash is every
allocated section that has contents (code, constants, weights, and the load image of
``.data``), static RAM is ``.data`` plus ``.bss`` (arena, workspace region, input and
output buffers). The stack reservation is left out: what the stack really used is measured
on the emulator.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from planner.tvm.micro.boards import Board

ARM_CC = "arm-none-eabi-gcc"
HOST_CC = "gcc"
ARM_SOURCES = (
    "startup_cortex_m.c", "main.c", "board_runtime.c", "model.c", "kernels.c", "weights.c",
)
HOST_SOURCES = ("main.c", "board_runtime.c", "model.c", "kernels.c", "weights.c")
# Both builds round floats the same way: no fused multiply-add contraction, which GCC does
# by default on the FPU and TVM's host build does not.
COMMON_FLAGS = ("-O2", "-std=gnu11", "-ffp-contract=off", "-fno-strict-aliasing")
#: Symbols that mean a heap was linked in: the export promises none.
HEAP_SYMBOLS = ("malloc", "_malloc_r", "calloc", "realloc", "_sbrk")


class BuildError(RuntimeError):
    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output

    @property
    def out_of_memory(self) -> bool:
        """The image did not fit the emulated machine's memory at all."""
        return "overflowed by" in self.output or "will not fit in region" in self.output


def arm_command(board: Board, output: str) -> list[str]:
    return [
        ARM_CC, *board.cpu_flags, *COMMON_FLAGS, "-ffunction-sections", "-fdata-sections",
        "-DPEAKWATCH_SEMIHOSTING", "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
        "-Wl,--gc-sections", "-T", "board.ld", "-o", output, *ARM_SOURCES, "-lm",
    ]


def host_command(output: str) -> list[str]:
    return [HOST_CC, *COMMON_FLAGS, "-o", output, *HOST_SOURCES, "-lm"]


def _compile(command: list[str], directory: Path, timeout: float) -> None:
    proc = subprocess.run(
        command, cwd=directory, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        summary = "; ".join(lines[:3]) or proc.stderr.strip()[-500:]
        raise BuildError(f"{command[0]} failed: {summary}", proc.stderr)


def build_for_board(directory: Path, board: Board, *, timeout: float = 300) -> Path:
    _compile(arm_command(board, "model.elf"), directory, timeout)
    return directory / "model.elf"


def build_for_host(directory: Path, *, timeout: float = 300) -> Path:
    _compile(host_command("model_host"), directory, timeout)
    return directory / "model_host"


def micro_toolchain_missing() -> str | None:
    """Why this machine cannot build and emulate micro boards (a missing tool), or None.

    Cheap and free of TVM, so a board can report itself offline before importing anything.
    """
    from planner.tvm.micro.emulator import emulator_missing

    return toolchain_missing() or emulator_missing()


def toolchain_missing() -> str | None:
    if shutil.which(ARM_CC) is None:
        return f"{ARM_CC} is not installed (Debian: gcc-arm-none-eabi)"
    proc = subprocess.run(
        [ARM_CC, "--specs=nano.specs", "-print-file-name=libc_nano.a"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0 or not Path(proc.stdout.strip()).is_absolute():
        return "newlib for arm-none-eabi is not installed (Debian: libnewlib-arm-none-eabi)"
    if shutil.which(HOST_CC) is None:
        return f"{HOST_CC} is not installed (the host build and the emulator plugin need it)"
    try:
        import elftools  # noqa: F401
    except ImportError:
        return "pyelftools is not installed (pip install pyelftools)"
    return None


@dataclass
class ImageFigures:
    flash_bytes: int
    #: ``.data`` + ``.bss``: everything static in RAM, the arena included.
    static_ram_bytes: int
    arena_bytes: int
    workspace_bytes: int
    #: The harness's input and output buffers (in ``.bss``).
    io_bytes: int
    stack_reserved_bytes: int
    sections: dict[str, int] = field(default_factory=dict)
    uses_heap: bool = False
    #: Addresses of the first instructions of the two markers around the inference.
    begin_address: int | None = None
    end_address: int | None = None


def read_image(path: Path) -> ImageFigures:
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as handle:
        elf = ELFFile(handle)
        sections: dict[str, int] = {}
        flash = static_ram = stack = 0
        for section in elf.iter_sections():
            if not section["sh_flags"] & SH_FLAGS.SHF_ALLOC or section["sh_size"] == 0:
                continue
            name, size = section.name, section["sh_size"]
            sections[name] = size
            if name == ".stack":
                stack = size
            elif section["sh_type"] == "SHT_NOBITS":
                static_ram += size
            elif name == ".data":
                static_ram += size
                flash += size  # its initial values are copied from flash at reset
            else:
                flash += size
        symbols = {}
        table = elf.get_section_by_name(".symtab")
        if table is not None:
            for symbol in table.iter_symbols():
                symbols.setdefault(symbol.name, symbol)
    def size_of(name: str) -> int:
        return int(symbols[name]["st_size"]) if name in symbols else 0

    def address_of(name: str) -> int | None:
        # Thumb function symbols carry the mode in bit 0; instructions start one below.
        return int(symbols[name]["st_value"]) & ~1 if name in symbols else None

    return ImageFigures(
        flash_bytes=flash,
        static_ram_bytes=static_ram,
        arena_bytes=size_of("peakwatch_arena"),
        workspace_bytes=size_of("peakwatch_workspace"),
        io_bytes=size_of("peakwatch_input") + size_of("peakwatch_output"),
        stack_reserved_bytes=stack,
        sections=sections,
        uses_heap=any(name in symbols for name in HEAP_SYMBOLS),
        begin_address=address_of("peakwatch_mark_begin"),
        end_address=address_of("peakwatch_mark_end"),
    )
