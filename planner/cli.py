"""Command line: ``python -m planner strategies`` and ``python -m planner solve``.

Exit codes: 0 success, 2 bad input (malformed file, unknown strategy, bad option),
3 the plan does not fit the requested capacity (the JSON summary is still printed),
1 an unexpected failure.

Adding a subcommand from another module (e.g. ``compile``)::

    # mypackage/compile_cli.py
    from planner.cli import register_subcommand

    def configure(parser):            # an argparse.ArgumentParser for the subcommand
        parser.add_argument("model")

    def run(args) -> int:             # returns the exit code; import heavy things here
        ...
        return 0

    register_subcommand("compile", configure, run, help="compile a model and plan it")

and list ``"mypackage.compile_cli"`` in SUBCOMMAND_MODULES below, so that ``build_parser``
imports it (it is imported only when the CLI starts, never by the planner library). A
subcommand with a ``--strategy`` option also calls ``register_strategy_names`` with the
function it checks names against, so that ``planner strategies`` lists every name it takes.
Alternatively ``build_parser().subcommands`` is the argparse sub-parsers action: call
``add_parser`` on it and ``set_defaults(handler=...)`` on the new parser, then ``main(argv,
parser=that_parser)``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.plan import InvalidPlan
from planner.problem import (
    ProblemError,
    problem_to_json,
    read_problem,
    without_fixed_offsets,
    write_csv,
)
from planner.strategies import UnknownStrategy, get_strategy, solve, strategy_names

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_DOES_NOT_FIT = 3

# Modules that call register_subcommand when imported; build_parser imports them.
# This is the place to add e.g. the TVM "compile" subcommand's module.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "planner.tvm.cli", "planner.tvm.llm.cli", "planner.tvm.micro.cli"
)

Configure = Callable[[argparse.ArgumentParser], None]
Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Subcommand:
    name: str
    configure: Configure
    handler: Handler
    help: str


_subcommands: dict[str, Subcommand] = {}


def register_subcommand(
    name: str, configure: Configure, handler: Handler, *, help: str = ""
) -> None:
    """Add a subcommand: ``configure`` adds its arguments, ``handler(args)`` returns the
    exit code. Registering a name again replaces the earlier one."""
    _subcommands[name] = Subcommand(name, configure, handler, help)


#: ``(name, one-line summary)`` of each strategy a subcommand's ``--strategy`` accepts.
StrategyNames = Callable[[], Iterable[tuple[str, str]]]

_strategy_names: dict[str, StrategyNames] = {}


def register_strategy_names(command: str, names: StrategyNames) -> None:
    """Declare what ``planner COMMAND --strategy`` accepts. ``names`` must be what the
    command itself checks a name against, so the list cannot drift from what it takes."""
    _strategy_names[command] = names


def accepted_strategies() -> dict[str, tuple[str, list[str]]]:
    """Every strategy name some subcommand accepts: its summary and the subcommands that
    take it, in the order the subcommands list them."""
    _import_subcommand_modules()
    found: dict[str, tuple[str, list[str]]] = {}
    for command, names in _strategy_names.items():
        for name, summary in names():
            found.setdefault(name, (summary, []))[1].append(command)
    return found


class CommandLineError(Exception):
    """Bad input on the command line; reported as one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        # One line, as scripts that call us read stderr; --help still shows the usage.
        raise CommandLineError(f"{message} (see '{self.prog} --help')")


def _capacity(text: str) -> int:
    try:
        value = int(text.replace("_", ""), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"capacity must be an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"capacity must be >= 0, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"time limit must be a number, got {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"time limit must be >= 0, got {text}")
    return value


def _configure_strategies(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also print a one-line summary of each and the subcommands that take it",
    )
    parser.add_argument(
        "--for",
        dest="command",
        metavar="COMMAND",
        help="only the names COMMAND's --strategy accepts (e.g. solve, compile)",
    )


def _run_strategies(args: argparse.Namespace) -> int:
    accepted = accepted_strategies()
    if args.command is not None and args.command not in _strategy_names:
        raise CommandLineError(
            f"no subcommand {args.command!r} takes --strategy; those that do: "
            f"{', '.join(_strategy_names)}"
        )
    for name, (summary, commands) in accepted.items():
        if args.command is not None and args.command not in commands:
            continue
        line = f"{name}\t{summary}\t{','.join(commands)}" if args.verbose else name
        sys.stdout.write(line + "\n")
    return EXIT_OK


def _configure_solve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problem", type=Path, help="problem file: .csv (MiniMalloc) or .json")
    parser.add_argument(
        "--strategy", "-s", required=True, help="strategy name (see 'planner strategies')"
    )
    parser.add_argument("--capacity", type=_capacity, help="bytes available; exit 3 if exceeded")
    parser.add_argument(
        "--time-limit",
        type=_seconds,
        help="seconds; bounds every strategy (optimal's default: 10, heuristics: none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--fixed-offsets",
        action="store_true",
        help="keep the file's offset column as offsets every plan must keep (without it, "
        "offsets in the file are a plan's, e.g. one written by -o, and are ignored)",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        help="write the plan here: the input rows plus an offset column (.json: JSON form)",
    )


def _run_solve(args: argparse.Namespace) -> int:
    try:
        get_strategy(args.strategy)
    except UnknownStrategy as error:
        raise CommandLineError(str(error)) from None
    try:
        problem = read_problem(args.problem, fixed_offsets=True)
        if not args.fixed_offsets:
            free = without_fixed_offsets(problem)
            if free is not problem:
                sys.stderr.write(
                    f"planner: note: {args.problem}: its offsets are taken as a plan's and "
                    "ignored; --fixed-offsets keeps them\n"
                )
            problem = free
        solution = solve(
            problem,
            args.strategy,
            capacity=args.capacity,
            time_limit=args.time_limit,
            seed=args.seed,
        )
    except ProblemError as error:
        raise CommandLineError(str(error)) from None
    if args.output is not None:
        # solve() has validated the plan already.
        try:
            if args.output.suffix.lower() == ".json":
                document = problem_to_json(problem)
                for item in document["buffers"]:
                    item["offset"] = solution.offsets[item["id"]]
                args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            else:
                write_csv(args.output, problem, solution.offsets)
        except OSError as error:
            raise CommandLineError(
                f"{args.output}: cannot write: {error.strerror or error}"
            ) from None
    sys.stdout.write(json.dumps(solution.to_json()) + "\n")
    if solution.fits is False:
        sys.stderr.write(
            f"planner: the plan needs {solution.height} bytes, more than the capacity "
            f"{args.capacity}\n"
        )
        return EXIT_DOES_NOT_FIT
    return EXIT_OK


register_subcommand(
    "strategies", _configure_strategies, _run_strategies, help="list the strategy names"
)
register_subcommand("solve", _configure_solve, _run_solve, help="plan one problem file")
register_strategy_names(
    "solve", lambda: ((name, get_strategy(name).summary) for name in strategy_names())
)


def _import_subcommand_modules() -> None:
    for module in SUBCOMMAND_MODULES:
        importlib.import_module(module)


def build_parser(prog: str = "planner") -> argparse.ArgumentParser:
    """The parser with every registered subcommand; ``.subcommands`` is its sub-parsers
    action, for callers that want to add more."""
    _import_subcommand_modules()
    parser = _Parser(prog=prog, description="Plan the memory of buffers with known lifetimes.")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for subcommand in _subcommands.values():
        sub = subcommands.add_parser(
            subcommand.name, help=subcommand.help, description=subcommand.help
        )
        subcommand.configure(sub)
        sub.set_defaults(handler=subcommand.handler)
    parser.subcommands = subcommands  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run the command line; returns the exit code."""
    if parser is None:
        parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.handler(args)
    except CommandLineError as error:
        sys.stderr.write(f"planner: error: {error}\n")
        return EXIT_BAD_INPUT
    except InvalidPlan as error:
        # A strategy produced a wrong plan: a bug, not bad input.
        sys.stderr.write(f"planner: internal error: invalid plan: {error}\n")
        return EXIT_FAILURE
