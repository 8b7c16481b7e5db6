"""``python -m planner compile``: plan a real model under strategies, build, check, measure.

TVM is imported by the handler only, so ``python -m planner strategies`` stays instant.
With ``--toolchain SPEC`` the command creates (or reuses) that TVM's environment
(:mod:`planner.tvm.toolchain`) and runs itself again in it, without the option.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from planner.cli import register_strategy_names, register_subcommand
from planner.job_spec import MOE_FORMS
from planner.shapes import ShapeError, label, parse_cli, parse_cli_dims
from planner.tvm.strategies import registry, strategy_names

log = logging.getLogger(__name__)


def _param(text: str) -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a bare word is a string
    return key, value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="zoo:NAME, torchvision:NAME, timm:NAME, a path to an .onnx file, or module.py:factory",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        default=None,
        help="a strategy name, or 'all'; repeat for several (default: all)",
    )
    parser.add_argument(
        "--param",
        action="append",
        type=_param,
        default=[],
        metavar="KEY=VALUE",
        help="a model parameter, e.g. resolution=64",
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SYMBOL=POINTS",
        help="compile at each point of a symbolic dimension: h=64,256,1024 (the bound is the "
        "largest), seq=128,512:4096 (bound 4096), w=h (w follows h); repeat per symbol",
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="SYMBOL=INPUT:DIM",
        help="where a --shape symbol is in a model file's or ONNX file's inputs that leave it "
        "static: seq=input_ids:1 (the input's name or position, then the dimension, from 0), "
        "seq=0:1,1:1 for several places; repeat per symbol",
    )
    parser.add_argument(
        "--moe",
        choices=MOE_FORMS,
        default="dense",
        help="how mixtures of experts are computed: dense (every expert on every token) or "
        "grouped (each token's top-k rows through their experts, as a grouped-GEMM "
        "deployment holds them)",
    )
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per strategy")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip measuring the bytes the runtime really holds"
    )
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=None,
        help="folder for plans, problems, modules and libraries",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        dest="json_out",
        help="write every strategy's report here",
    )
    parser.add_argument(
        "--toolchain",
        default="",
        metavar="SPEC",
        help="compile with another TVM: apache-tvm==VERSION (from PyPI), an apache_tvm wheel "
        "or a built TVM source folder; created on first use under PEAKWATCH_TOOLCHAIN_DIR "
        "(default ~/.cache/peakwatch/toolchains)",
    )
    parser.set_defaults(compile_parser=parser)


def handle(args: argparse.Namespace) -> int:
    # Names are checked before TVM is imported: a typo costs no compiler start-up.
    known = strategy_names()
    requested = args.strategy or ["all"]
    strategies = known if "all" in requested else list(dict.fromkeys(requested))
    unknown = [s for s in strategies if s not in known]
    if unknown:
        sys.stderr.write(
            f"planner: unknown strategy {', '.join(unknown)}; known: {', '.join(known)}\n"
        )
        return 2
    if args.toolchain:
        return _in_toolchain(args)
    try:
        # Before TVM is imported too: a malformed axis costs no compiler start-up.
        axis = _axis(args)
    except ShapeError as exc:
        sys.stderr.write(f"planner: {exc}\n")
        return 2
    if not args.no_memory:
        from planner.tvm.measure import memory

        # As a worker's job does: TVM imported once, its measuring process forked from here.
        memory.preload_idle_shim()
    from planner.tvm.compile import compile_model
    from planner.tvm.sources import ModelSource, ModelSourceError

    source = ModelSource(args.model, dict(args.param), moe=args.moe)
    options = dict(
        target=args.target,
        repeat=args.repeat,
        artifacts_dir=args.artifacts,
        memory_configs=() if args.no_memory else ("pooled", "naive"),
    )
    try:
        if axis is not None:
            from planner.tvm.shape_axis import compile_shapes

            reports = compile_shapes(source, strategies, axis, **options)
        else:
            reports = compile_model(source, strategies, **options)
    except (ModelSourceError, ShapeError) as exc:
        sys.stderr.write(f"planner: {exc}\n")
        return 2
    except Exception as exc:  # a model that fails ends in a report naming the step, no traceback
        from planner.report import StrategyReport
        from planner.tvm.steps import failure_text

        log.debug("compile failed", exc_info=True)
        reports = StrategyReport.failed_everywhere(
            source.describe(), strategies, failure_text(exc, "build"),
            points=axis.points if axis is not None else None, source=source.source,
        )
    sys.stdout.write(format_table(reports) + "\n")
    for assumption in dict.fromkeys(a for r in reports for a in r.assumptions):
        sys.stdout.write(f"assumes: {assumption}\n")
    if args.shape:
        sys.stdout.write(format_shape_notes(reports) + "\n")
    if args.json_out:
        args.json_out.write_text(json.dumps([r.to_json() for r in reports], indent=2))
    return 0 if all(r.ok for r in reports) else 1


def _axis(args: argparse.Namespace):
    """The shape axis of ``--shape`` and ``--dim``; None without ``--shape``."""
    axis = parse_cli(args.shape) if args.shape else None
    if args.dim:
        if axis is None:
            raise ShapeError(
                "--dim says where a --shape symbol is: give its points with --shape too"
            )
        axis = parse_cli_dims(args.dim, axis)
    return axis


def _in_toolchain(args: argparse.Namespace) -> int:
    from planner.tvm import toolchain

    def progress(line: str) -> None:
        sys.stderr.write(f"planner: {line}\n")

    try:
        chosen = toolchain.ensure(args.toolchain, toolchain.default_root(), progress)
    except toolchain.ToolchainError as exc:
        sys.stderr.write(f"planner: {exc}\n")
        return 2
    env = {**os.environ, "PYTHONPATH": str(toolchain.PROJECT_ROOT)}
    command = [chosen.python, "-m", "planner", "compile", *_forwarded(args)]
    return subprocess.run(command, env=env, check=False).returncode


def _forwarded(args: argparse.Namespace) -> list[str]:
    """The command line that gave ``args``, less ``--toolchain``: every option of the
    compile parser, so an option added later is forwarded too."""
    argv: list[str] = []
    for action in args.compile_parser._actions:
        if action.dest in ("help", "toolchain", "compile_parser") or not hasattr(args, action.dest):
            continue
        value = getattr(args, action.dest)
        if not action.option_strings:
            argv.append(_as_text(value))
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:
            argv += [flag] if value else []
        elif isinstance(action, argparse._AppendAction):
            for item in value or []:
                argv += [flag, _as_text(item)]
        elif value is not None:
            argv += [flag, _as_text(value)]
    return argv


def _as_text(value) -> str:
    if isinstance(value, tuple):  # a --param, parsed
        key, item = value
        return f"{key}={json.dumps(item)}"
    return str(value)


def format_shape_notes(reports) -> str:
    """TVM's reservation for the symbolic build, and each strategy's peak formula."""
    lines = []
    reserved = next((r.reserved_at_bound_bytes for r in reports if r.reserved_at_bound_bytes), None)
    if reserved is not None:
        lines.append(
            f"reserved at the bound: {reserved:,} B of intermediates (TVM's planner, symbolic "
            "build, sizes at tir_var_upper_bound; compare with intermediates)"
        )
    shown = set()
    for r in reports:
        formula = r.peak_formula
        if r.strategy in shown or not (formula or r.ok):
            continue
        shown.add(r.strategy)
        if "expression" not in formula:
            why = formula.get("missing") or "the compile gave none"
            lines.append(f"{r.strategy}: no peak formula: {why}")
            continue
        lines += formula_lines(r.strategy, formula)
    return "\n".join(lines)


def formula_lines(strategy: str, formula: dict) -> list[str]:
    """A peak formula as the command prints it: over the points that compiled, whether its
    one plan held at each, and where it is above a point's own plan, by how much and why."""
    checked = {
        point: check for point, check in formula.get("checked", {}).items()
        if not check.get("point_failed")
    }
    held = bool(checked) and all(c.get("valid_plan") for c in checked.values())
    ties = "".join(f", {s} = {t}" for s, t in formula.get("ties", {}).items())
    lines = [
        f"{strategy}: intermediates = {formula['expression']} for "
        + ", ".join(f"{s} in [{lo}, {hi}]" for s, (lo, hi) in formula["range"].items())
        + f"{ties}; plan valid at every point compiled: {'yes' if held else 'NO'}"
    ]
    if formula.get("left_out"):
        lines.append(f"  left out, their own compile failed: {', '.join(formula['left_out'])}")
    for point, check in checked.items():
        value, planned = check.get("formula"), check.get("planned")
        if value is not None and planned is not None and value > planned:
            lines.append(
                f"  at {point} the formula gives {value:,} B, {value - planned:,} B above the "
                f"point's own plan ({planned:,} B): one placement serves the whole range, "
                "planned at the bound on the symbolic module, where the point's own compile "
                "plans a module specialised to its shape"
            )
    return lines


def format_table(reports) -> str:
    points = any(r.shape_point for r in reports)
    header = (
        *(("point",) if points else ()),
        "strategy",
        "planned",
        "intermediates",
        "lower bound",
        "bound planned",
        "measured peak",
        "latency ms",
        "match",
        "compile s",
    )
    rows = [header]
    for r in reports:
        latency = r.latency_ms or {}
        rows.append(
            (
                *((label(r.shape_point),) if points else ()),
                r.strategy,
                _num(r.planned_bytes),
                _num(r.intermediate_bytes),
                _num(r.lower_bound_bytes),
                _planned_bound(r),
                _num(r.measured_peak_bytes),
                f"{latency['median']:.3f}" if "median" in latency else "-",
                {True: "yes", False: "NO", None: "-"}[r.outputs_match],
                f"{r.compile_seconds:.2f}" if r.compile_seconds is not None else "-",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            str(c).rjust(w) if i else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    notes = []
    if any(_planned_bound(r) != "=" for r in reports):
        # A plan may sit below the model's bound; the table must say why where it does.
        notes.append(
            "bound planned: the lower bound of the problem a strategy really planned, where "
            "it differs (rewrites merge tensors; +reorder runs operators in another order)"
        )
    errors = [
        f"{r.strategy}{f' at {label(r.shape_point)}' if r.shape_point else ''}: {r.error}"
        for r in reports
        if r.error
    ]
    return "\n".join(lines + notes + errors)


def _planned_bound(report) -> str:
    """The bound of the rewritten or reordered problem, or ``=`` for the model's own."""
    if report.rewritten_lower_bound_bytes is not None:
        own = report.rewritten_lower_bound_bytes
    elif (report.order or {}).get("kept") == "chosen order":
        own = report.chosen_order_lower_bound_bytes
    else:
        own = None
    return "=" if own is None or own == report.lower_bound_bytes else _num(own)


def _num(value) -> str:
    return f"{value:,}" if value is not None else "-"


register_subcommand(
    "compile",
    configure,
    handle,
    help="compile a model with TVM under planning strategies; check and measure each build",
)
register_strategy_names(
    "compile", lambda: ((name, strategy.summary) for name, strategy in registry().items())
)
