"""How best-fit and greedy-by-size scale: time and peak memory from 1k to 1M buffers, dense
real traces, and a check that the sweep plans exactly what the old pairwise pass planned.

Each measurement runs in a fresh process, so that its peak resident memory (``VmHWM``,
else ``resource.getrusage``) is its own; it includes the Python interpreter and the
problem's buffers (about 0.3 KB each), not just the strategy. ``seconds`` is the
strategy's own time, as ``solve`` reports it; ``total`` adds building the problem and
validating the plan.

Usage: python benchmarks/planner_scaling.py [--sizes 1000,10000,100000,1000000] [--live 50]
       [--strategies greedy-by-size,best-fit] [--traces var/traces] [--skip-reference]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.problem import read_csv  # noqa: E402
from planner.strategies import solve  # noqa: E402


def measure(source: str, strategy: str) -> dict:
    """Plan one problem in this process: ``source`` is ``random:N:LIVE`` or a CSV path."""
    import planner_traces

    from planner.strategies._placement import Instance

    started = time.perf_counter()
    if source.startswith("random:"):
        _, n, live = source.split(":")
        problem = planner_traces.random_trace(int(n), int(live))
    else:
        problem = read_csv(source)
    solution = solve(problem, strategy)
    total = time.perf_counter() - started
    return {
        "problem": problem.name,
        "buffers": len(problem),
        "pairs": Instance(problem).pair_count(),
        "strategy": strategy,
        "height": solution.height,
        "ratio": round(solution.ratio, 4),
        "seconds": round(solution.seconds, 2),
        "total": round(total, 2),
        "peak_mb": peak_megabytes(),
    }


def peak_megabytes() -> int:
    """This process's peak resident memory. VmHWM starts afresh at exec; ru_maxrss (the
    fallback) may keep the peak of the parent that forked us."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def in_child(source: str, strategy: str) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--one", source, strategy],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output)


HEADER = (
    "| problem | buffers | overlapping pairs | strategy | ratio to LB | seconds | "
    "µs per n·log2(n) | total s | peak MB |\n|---|---:|---:|---|---:|---:|---:|---:|---:|"
)


def row(result: dict) -> str:
    n = result["buffers"]
    per = result["seconds"] * 1e6 / (n * math.log2(n)) if n > 1 else 0.0
    return (
        f"| {result['problem']} | {n:,} | {result['pairs']:,} | {result['strategy']} | "
        f"{result['ratio']:.3f} | {result['seconds']:.2f} | {per:.2f} | {result['total']:.2f} | "
        f"{result['peak_mb']:,} |"
    )


def reference_check() -> None:
    """Heights of the sweep against the old pairwise pass on the files benchmarks/planner.py
    plans (MiniMalloc challenge files, CNN traces up to 100k buffers)."""
    import importlib.util

    from planner.strategies import best_fit, greedy_by_size
    from planner.strategies._placement import Instance, place_against_neighbours, plan_height

    # benchmarks/planner.py, loaded under another name than the planner package's.
    spec = importlib.util.spec_from_file_location(
        "planner_benchmark", ROOT / "benchmarks" / "planner.py"
    )
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    problems = [read_csv(path) for path in sorted(bench.MINIMALLOC_DIR.glob("[A-Z].*.csv"))]
    problems += [bench.cnn_trace(n, seed=n) for n in (1000, 10000, 100000)]
    problems += [bench.deep_cnn_trace(n, seed=n) for n in (1000, 10000)]

    print("## Sweep vs the old pairwise pass (same heights expected)\n")
    print("| problem | buffers | greedy-by-size old / new | best-fit old / new | same |")
    print("|---|---:|---:|---:|---|")
    for problem in problems:
        instance = Instance(problem)
        instance.conflicts(max_pairs=None)
        old_size = plan_height(
            instance, place_against_neighbours(instance, greedy_by_size.size_order(instance))
        )
        old_best = min(
            plan_height(
                instance,
                place_against_neighbours(instance, best_fit.order_by(instance, name), "best"),
            )
            for name in best_fit.ORDERS
        )
        new_size = solve(problem, "greedy-by-size").height
        new_best = solve(problem, "best-fit").height
        same = "yes" if (old_size, old_best) == (new_size, new_best) else "**no**"
        print(
            f"| {problem.name} | {len(problem):,} | {old_size:,} / {new_size:,} | "
            f"{old_best:,} / {new_best:,} | {same} |",
            flush=True,
        )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=2, metavar=("SOURCE", "STRATEGY"), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--live", type=int, default=50)
    parser.add_argument("--strategies", default="greedy-by-size,best-fit")
    parser.add_argument(
        "--traces", type=Path, default=ROOT / "var" / "traces",
        help="CSV traces to plan too (planner_traces.py writes them)",
    )
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(*args.one)))
        return 0
    strategies = [s for s in args.strategies.split(",") if s]
    if not args.skip_reference:
        reference_check()
    print(f"## Random traces, about {args.live} buffers live at a time\n")
    print(HEADER)
    for n in [int(x) for x in args.sizes.split(",") if x]:
        for strategy in strategies:
            print(row(in_child(f"random:{n}:{args.live}", strategy)), flush=True)
    traces = sorted(args.traces.glob("*.csv")) if args.traces.is_dir() else []
    if traces:
        print(f"\n## Traces in {args.traces.relative_to(ROOT)}\n")
        print(HEADER)
        for path in traces:
            for strategy in strategies:
                print(row(in_child(str(path), strategy)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
