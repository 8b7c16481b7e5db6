"""``python -m planner export`` and ``python -m planner micro``: bare-metal builds of a model.

``export`` writes the C project of one strategy; ``micro`` exports, builds and runs a model on
an emulated Cortex-M board under each strategy and reports RAM, flash, arena and executed
instructions. TVM is imported by the handlers only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from planner.cli import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, register_subcommand
from planner.tvm.micro.boards import BOARDS, Board, resolve_board

#: The fields of ``micro --json`` that every consumer can rely on; the rest may grow.
JSON_FIELDS = (
    "strategy", "outputs_match", "ram_bytes", "flash_bytes", "arena_bytes", "instructions",
)


def _param(text: str) -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw  # a bare word is a string


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="zoo:NAME, a path to an .onnx file, or module.py:factory")
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="KEY=VALUE", help="a model parameter, e.g. resolution=32")
    parser.add_argument("--board", default=None, choices=sorted(BOARDS),
                        help="the board (default stm32f746, or the board of --machine)")
    parser.add_argument("--machine", default=None,
                        help="QEMU machine, e.g. mps2-an500 (Cortex-M7), mps2-an386 (Cortex-M4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the example input")


def _board(args: argparse.Namespace) -> Board:
    return resolve_board(args.board, args.machine)


def configure_export(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--strategy", required=True, help="the planning strategy")
    parser.add_argument("-o", "--output", type=Path, required=True, dest="out_dir",
                        help="folder for the C project")


def handle_export(args: argparse.Namespace) -> int:
    from planner.tvm.micro.export import ExportError, export_c
    from planner.tvm.micro.plan import MicroPlanError
    from planner.tvm.sources import ModelSource, ModelSourceError

    try:
        board = _board(args)
        project = export_c(
            ModelSource(args.model, dict(args.param)), args.strategy, args.out_dir,
            board=board, seed=args.seed,
        )
    except (ModelSourceError, MicroPlanError, ExportError, ValueError) as exc:
        sys.stderr.write(f"planner: {exc}\n")
        return EXIT_BAD_INPUT
    sys.stdout.write(json.dumps(project.to_json()) + "\n")
    return EXIT_OK


def configure_micro(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--strategy", action="append", required=True,
                        help="a planning strategy; repeat for several")
    parser.add_argument("--sram", type=int, default=None,
                        help="the board's SRAM in bytes (default: the board's own)")
    parser.add_argument("--flash", type=int, default=None,
                        help="the board's flash in bytes (default: the board's own)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each strategy's exported project under this folder")
    parser.add_argument("--json", type=Path, default=None, dest="json_out",
                        help="write one object per strategy here")


def handle_micro(args: argparse.Namespace) -> int:
    from planner.tvm.micro.run import run_micro
    from planner.tvm.sources import ModelSource, ModelSourceError
    from planner.tvm.strategies import UnknownCompileStrategy

    try:
        board = _board(args).with_capacity(sram_bytes=args.sram, flash_bytes=args.flash)
        results = run_micro(
            ModelSource(args.model, dict(args.param)), list(dict.fromkeys(args.strategy)),
            board=board, work_dir=args.keep, seed=args.seed,
        )
    except (ModelSourceError, UnknownCompileStrategy, ValueError) as exc:
        sys.stderr.write(f"planner: {exc}\n")
        return EXIT_BAD_INPUT
    sys.stdout.write(format_table(results, board) + "\n")
    if args.json_out:
        args.json_out.write_text(json.dumps([r.to_json() for r in results], indent=2) + "\n")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILURE


def format_table(results, board: Board) -> str:
    header = ("strategy", "RAM", "flash", "arena", "workspace", "stack", "instructions",
              "match", "host match", "fits")
    rows = [header]
    for r in results:
        rows.append((
            r.strategy, _num(r.ram_bytes), _num(r.flash_bytes), _num(r.arena_bytes),
            _num(r.workspace_bytes), _num(r.stack_bytes), _num(r.instructions),
            _yes(r.outputs_match), _yes(r.host_outputs_match),
            {True: "NO", False: "yes", None: "-"}[r.over_capacity],
        ))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                  for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    title = (f"{board.name} on {board.machine}: {board.sram_bytes:,} B SRAM, "
             f"{board.flash_bytes:,} B flash; instructions = executed by one inference")
    errors = [f"{r.strategy}: {r.error}" for r in results if r.error]
    return "\n".join([title, *lines, *errors])


def _num(value) -> str:
    return f"{value:,}" if value is not None else "-"


def _yes(value) -> str:
    return {True: "yes", False: "NO", None: "-"}[value]


register_subcommand(
    "export", configure_export, handle_export,
    help="write a planned model as a bare-metal C project (one static arena, no runtime)",
)
register_subcommand(
    "micro", configure_micro, handle_micro,
    help="build a model for an emulated Cortex-M board under strategies; RAM, flash, "
         "instructions",
)

__all__ = ["EXIT_FAILURE", "JSON_FIELDS", "format_table"]
