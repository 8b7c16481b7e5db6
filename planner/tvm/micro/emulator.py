"""Run a board image on QEMU and count the instructions of one inference.

QEMU's TCG plugin API gives exact counts: ``runtime/insn_count_plugin.c`` adds one per
executed guest instruction and notes the count at the first instruction of
``peakwatch_mark_begin`` and ``peakwatch_mark_end``, the markers the harness calls around
``peakwatch_run``. With one vCPU and no interrupts the count is the same on every run. It
is a count of instructions, not of cycles: QEMU models no pipeline, caches or wait states.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from planner.tvm.measure import native
from planner.tvm.micro.boards import RUNTIME_DIR, Board

QEMU = "qemu-system-arm"
PLUGIN_SOURCE = RUNTIME_DIR / "insn_count_plugin.c"


class EmulatorError(RuntimeError):
    pass


def plugin_library(cache_dir: Path | None = None) -> Path:
    """The instruction counting plugin, built once per source version with the host's gcc."""
    try:
        return native.shared_library(PLUGIN_SOURCE, "insn-count", cache_dir=cache_dir)
    except native.BuildError as exc:
        raise EmulatorError(f"could not build the QEMU plugin: {exc}") from None


def emulator_missing() -> str | None:
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (Debian: qemu-system-arm)"
    return None


@dataclass
class Run:
    """One inference: what the harness reported, the output bytes, the instructions."""

    status: int
    report: dict[str, str]
    output: bytes | None
    instructions: int | None = None


def read_report(directory: Path) -> dict[str, str]:
    path = directory / "report.txt"
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def _prepare(directory: Path, input_bytes: bytes) -> None:
    for name in ("output.bin", "report.txt", "insn_count.txt"):
        (directory / name).unlink(missing_ok=True)
    (directory / "input.bin").write_bytes(input_bytes)


def _finish(directory: Path, returncode: int, what: str, stderr: str) -> Run:
    report = read_report(directory)
    if "status" not in report:
        raise EmulatorError(f"{what} ended ({returncode}) without a report: {stderr[-300:]}")
    status = int(report["status"])
    output = (directory / "output.bin").read_bytes() if status == 0 else None
    return Run(status, report, output)


def run_on_emulator(
    elf: Path, board: Board, directory: Path, input_bytes: bytes, *, timeout: float = 600,
    begin_address: int | None = None, end_address: int | None = None,
) -> Run:
    """Run ``elf`` on the board's QEMU machine in ``directory`` (semihosting reads and writes
    files there)."""
    _prepare(directory, input_bytes)
    plugin = None
    if begin_address is not None and end_address is not None:
        plugin = (
            f"{plugin_library()},begin={begin_address:x},end={end_address:x},out=insn_count.txt"
        )
    command = board.qemu_command(elf.name if elf.parent == directory else str(elf), plugin)
    try:
        proc = subprocess.run(
            command, cwd=directory, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL, check=False,
        )
    except subprocess.TimeoutExpired:
        raise EmulatorError(f"{board.machine} did not finish within {timeout:.0f} s") from None
    run = _finish(directory, proc.returncode, f"QEMU {board.machine}", proc.stderr)
    counts = directory / "insn_count.txt"
    if plugin and counts.exists():
        begin, end, _total = (int(v) for v in counts.read_text().split())
        if end > begin:
            run.instructions = end - begin
    return run


def run_on_host(executable: Path, directory: Path, input_bytes: bytes, *,
                timeout: float = 300) -> Run:
    _prepare(directory, input_bytes)
    try:
        proc = subprocess.run(
            [str(executable.resolve())], cwd=directory, capture_output=True, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL, check=False,
        )
    except subprocess.TimeoutExpired:
        raise EmulatorError(f"the host build did not finish within {timeout:.0f} s") from None
    return _finish(directory, proc.returncode, "the host build", proc.stderr)
