"""A micro board's figures in the typed reports: what a sandboxed micro job adds to a compile.

A micro board's job runs ``compile_model`` for target ``c`` (plan, host build, check), then
:func:`run_on_board` in the same child process: the model is built there from the
manifest's source, which may be a tracked repository's code, so the export and the
emulated run must stay inside the sandbox too. Each strategy's :class:`MicroResult` becomes
its report's :class:`~planner.report.BoardFigures` (kind ``micro``), and its exported C
project an ``export.zip`` artifact.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from planner.report import BoardFigures, StrategyReport
from planner.tvm.micro.boards import Board, resolve_board
from planner.tvm.micro.run import INSTRUCTIONS_LABEL, MicroResult, run_micro
from planner.tvm.sources import ModelSource

log = logging.getLogger(__name__)

KIND = "micro"
#: MicroResult fields copied into ``details["board"]`` as they are.
FIGURES = (
    "ram_bytes", "flash_bytes", "arena_bytes", "workspace_bytes", "workspace_used_bytes",
    "static_ram_bytes", "stack_bytes", "io_bytes", "weights_bytes", "instructions",
    "outputs_match", "host_outputs_match", "max_abs_diff", "board", "machine",
    "sram_capacity", "flash_capacity", "lifted_temporaries",
)
EXPORT_ARTIFACT = "export.zip"


def compile_options(options: dict) -> dict:
    """What ``compile_model`` takes for a micro job: the C build, checked on this host.

    Host timings and the host allocator's peak say nothing about a microcontroller; the
    board's own figures come from the emulated run.
    """
    return {"target": options.get("target") or "c", "repeat": 0, "memory_configs": ()}


def board_of(micro: dict) -> Board:
    """The board a job's ``micro`` options name: ``board`` and/or ``machine``, with the
    capacities ``sram_bytes`` and ``flash_bytes`` where given."""
    return resolve_board(
        micro.get("board"), micro.get("machine"),
        sram_bytes=micro.get("sram_bytes"), flash_bytes=micro.get("flash_bytes"),
    )


def board_figures(result: MicroResult) -> BoardFigures:
    figures = {name: getattr(result, name) for name in FIGURES}
    figures["instructions_label"] = INSTRUCTIONS_LABEL
    return BoardFigures(
        kind=KIND,
        memory_capacity=result.sram_capacity,
        over_capacity=bool(result.over_capacity),
        figures=figures,
    )


def merge(report: StrategyReport, result: MicroResult, artifacts: Path | None) -> None:
    """Put what the board measured into ``report``: on a micro board, whether the outputs
    match is the board's answer, not the host build's."""
    report.board = board_figures(result)
    if result.outputs_match is not None:
        report.outputs_match = result.outputs_match
        report.max_abs_diff = result.max_abs_diff
    problems = [result.error] if result.error else []
    if result.over_capacity:
        # The plan is fine and its figures stand; the board it is for cannot run it.
        problems.append(_does_not_fit(result))
    if problems:
        where = f"micro board {result.board} ({result.machine})"
        said = f"{where}: {'; '.join(problems)}"
        report.error = f"{report.error}; {said}" if report.error else said
    if artifacts is not None and result.export_dir and Path(result.export_dir).is_dir():
        artifacts.mkdir(parents=True, exist_ok=True)
        archive = shutil.make_archive(
            str(artifacts / Path(EXPORT_ARTIFACT).stem), "zip", root_dir=result.export_dir
        )
        report.artifacts[EXPORT_ARTIFACT] = archive


def _does_not_fit(result: MicroResult) -> str:
    """What of the board's capacity the image passes, in the board's own figures."""
    parts = []
    ram = result.ram_bytes if result.ram_bytes is not None else result.static_ram_bytes
    if ram is not None and result.sram_capacity is not None and ram > result.sram_capacity:
        stack = f" with a {result.stack_bytes:,} B stack" if result.stack_bytes else ""
        parts.append(f"needs {ram:,} B of RAM{stack}, and the board has {result.sram_capacity:,} B")
    if (result.flash_bytes is not None and result.flash_capacity is not None
            and result.flash_bytes > result.flash_capacity):
        parts.append(f"needs {result.flash_bytes:,} B of flash, and the board has "
                     f"{result.flash_capacity:,} B")
    return "does not fit: " + ("; ".join(parts) or "the image is larger than the board")


def run_on_board(
    reports: Sequence[StrategyReport],
    source: ModelSource,
    micro: dict,
    *,
    model_name: str,
    artifacts_dir: str | Path | None = None,
    base_dir: str | Path | None = None,
    pipeline: str = "",
    network=None,
) -> None:
    """Export, build and run each compiled strategy of ``reports`` on the board of
    ``micro`` and add the board's figures to its report (in place).

    Strategies whose compile failed are not run: their Result fails either way. Anything
    that stops the whole micro run fails every strategy it was to run, with the reason.
    """
    from planner.report import slug

    todo = [r for r in reports if r.ok]
    if not todo:
        return
    with tempfile.TemporaryDirectory(prefix="peakwatch-micro-") as scratch:
        root = Path(artifacts_dir) / slug(model_name) if artifacts_dir else None
        work_dir = root / "micro" if root is not None else Path(scratch)
        try:
            board = board_of(micro)
            results = run_micro(
                source, [r.strategy for r in todo], board=board, work_dir=work_dir,
                base_dir=base_dir, model_name=model_name, pipeline=pipeline, network=network,
            )
        except Exception as exc:  # the compile's figures stay; the Result says why no board
            log.exception("micro run of %s failed", model_name)
            for report in todo:
                report.error = f"micro board: {type(exc).__name__}: {exc}"
            return
        for report, result in zip(todo, results, strict=True):
            folder = root / slug(report.strategy) if root is not None else None
            merge(report, result, folder)


__all__ = ["EXPORT_ARTIFACT", "board_figures", "board_of", "compile_options", "run_on_board"]
