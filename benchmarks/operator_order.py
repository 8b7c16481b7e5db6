"""Program order against the operator order chosen for memory, on branchy networks.

    python benchmarks/operator_order.py                  # the default set below
    python benchmarks/operator_order.py randwire-ws-32 googlenet
    python benchmarks/operator_order.py --list
    python benchmarks/operator_order.py --rewrites       # also best-fit+rewrites(+reorder)

Each model is compiled once under ``best-fit`` (program order) and ``best-fit+reorder``
(see planner/order.py and planner/tvm/plan/reorder.py), both checked against tvm-stock. Printed
per model: the max-live lower bound in program order and in the chosen order, the arena
each plan needs, planned and measured bytes (pooled allocator), whether outputs match,
and what the search did. torchvision networks need torch and torchvision installed
(``torchvision:NAME``); they are skipped with a note otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/planner.py would
# shadow the planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm.compile import compile_model  # noqa: E402
from planner.tvm.sources import ModelSource, ModelSourceError  # noqa: E402

MODELS: dict[str, ModelSource] = {
    "randwire-ws-16": ModelSource("zoo:randwire", {"nodes": 16, "resolution": 32}),
    "randwire-ws-32": ModelSource("zoo:randwire", {"nodes": 32, "resolution": 32}),
    "randwire-er-32": ModelSource(
        "zoo:randwire", {"nodes": 32, "graph": "er", "p": 0.2, "resolution": 32}
    ),
    "randwire-ws-32x3": ModelSource(
        "zoo:randwire", {"nodes": 32, "stages": 3, "seed": 3, "resolution": 32}
    ),
    "googlenet": ModelSource("torchvision:googlenet", {"image": 64}),
    "squeezenet1_0": ModelSource("torchvision:squeezenet1_0", {"image": 64}),
    "inception_v3": ModelSource("torchvision:inception_v3", {"image": 75}),
    "densenet121": ModelSource("torchvision:densenet121", {"image": 64}),
}
DEFAULT = ["randwire-ws-16", "randwire-ws-32", "randwire-er-32", "randwire-ws-32x3",
           "googlenet", "squeezenet1_0"]


def _kb(value) -> str:
    return "-" if value is None else f"{value / 1024:,.1f}"


def run(name: str, source: ModelSource, strategies: list[str], measure: bool) -> list[str]:
    started = time.perf_counter()
    try:
        reports = compile_model(
            source, strategies, model_name=name, repeat=1,
            memory_configs=("pooled",) if measure else (),
        )
    except ModelSourceError as exc:
        return [f"| {name} | skipped: {exc} |"]
    seconds = time.perf_counter() - started
    by_strategy = {r.strategy: r for r in reports}
    rows = []
    for plain_name in [s for s in strategies if not s.endswith("+reorder")]:
        plain = by_strategy[plain_name]
        chosen = by_strategy[plain_name + "+reorder"]
        if plain.error or chosen.error:
            rows.append(f"| {name} | {plain_name}: {plain.error or chosen.error} |")
            continue
        order = chosen.order
        proven = {True: "yes", False: f"no ({order.get('states', 0):,} states)"}.get(
            order.get("exact"), "-"
        )
        rows.append(
            f"| {name} | {plain_name} | {_kb(chosen.program_order_lower_bound_bytes)} | "
            f"{_kb(chosen.chosen_order_lower_bound_bytes)} | {_kb(plain.intermediate_bytes)} | "
            f"{_kb(chosen.intermediate_bytes)} | {_kb(plain.planned_bytes)} | "
            f"{_kb(chosen.planned_bytes)} | {_kb(plain.measured_peak_bytes)} | "
            f"{_kb(chosen.measured_peak_bytes)} | {plain.outputs_match} / "
            f"{chosen.outputs_match} | {order.get('method', '-')} | {proven} | "
            f"{order.get('kept', '-')} | {seconds:.0f} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="names from --list (default: a branchy set)")
    parser.add_argument("--list", action="store_true", help="list the known models and stop")
    parser.add_argument("--rewrites", action="store_true",
                        help="also compare best-fit+rewrites with best-fit+rewrites+reorder")
    parser.add_argument("--no-measure", action="store_true",
                        help="skip the measured peak (one process per build)")
    args = parser.parse_args(argv)
    if args.list:
        for name, source in MODELS.items():
            print(f"{name}: {source.describe()}")
        return 0
    logging.basicConfig(level=logging.WARNING)
    strategies = ["best-fit", "best-fit+reorder"]
    if args.rewrites:
        strategies += ["best-fit+rewrites", "best-fit+rewrites+reorder"]
    names = args.models or DEFAULT
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; see --list")
    print("Sizes in KiB. Bounds are max-live lower bounds of the planned tensors; arena is "
          "the best-fit plan; planned adds outputs and kernel workspace; measured is the "
          "pooled allocator's peak.")
    print()
    print("| model | base | bound, program order | bound, chosen order | arena, program "
          "| arena, chosen | planned, program | planned, chosen | measured, program "
          "| measured, chosen | outputs match | search | proven minimal | kept | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|")
    for name in names:
        for row in run(name, MODELS[name], strategies, not args.no_measure):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
