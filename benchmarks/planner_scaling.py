"""How best-fit and greedy-by-size scale: time and peak memory from 1k to 1M buffers, dense
real traces, and a check that the sweep plans exactly what the old pairwise pass planned.

Each measurement runs in a fresh process, so that its peak resident memory (``VmHWM``,
else ``resource.getrusage``) is its own; it includes the Python interpreter and the
problem's buffers (about 0.3 KB each), not just the strategy. ``seconds`` is the
strategy's own time, as ``solve`` reports it; ``total`` adds building the problem and
validating the plan.

With ``--time-limit T`` it instead runs every strategy with that limit on a 1M-buffer
random trace and on MiniMalloc's file D, and prints the strategy's seconds as a share of T
(the target: within T + 5%).

Usage: python benchmarks/planner_scaling.py [--sizes 1000,10000,100000,1000000] [--live 50]
       [--strategies greedy-by-size,best-fit] [--traces var/traces] [--skip-reference]
       [--time-limit T] [--setup N]

With ``--setup N`` it times each piece of the setup that no time limit cuts short (the
instance's arrays, the orders, the bounds) on N random buffers, with hashes of the orders.
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


def measure(source: str, strategy: str, time_limit: float | None = None) -> dict:
    """Plan one problem in this process: ``source`` is ``random:N:LIVE`` or a CSV path."""
    import planner_traces

    from planner.strategies._placement import Instance

    started = time.perf_counter()
    if source.startswith("random:"):
        _, n, live = source.split(":")
        problem = planner_traces.random_trace(int(n), int(live))
    else:
        problem = read_csv(source)
    solution = solve(problem, strategy, time_limit=time_limit)
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
        "limit": time_limit,
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


def in_child(source: str, strategy: str, time_limit: float | None = None) -> dict:
    limit = [] if time_limit is None else ["--time-limit", str(time_limit)]
    output = subprocess.run(
        [sys.executable, __file__, "--one", source, strategy, *limit],
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


def time_limit_table(limit: float, live: int) -> None:
    """Every strategy under ``limit`` seconds; the plan is validated by ``solve``."""
    from planner.strategies import strategy_names

    sources = [
        f"random:1000000:{live}",
        str(ROOT.parent / "shared" / "benchmarks" / "dsa" / "minimalloc" / "D.1048576.csv"),
    ]
    print(f"## Every strategy with --time-limit {limit:g}\n")
    print("| problem | strategy | ratio to LB | seconds | seconds / limit | total s | peak MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for source in sources:
        for strategy in strategy_names():
            result = in_child(source, strategy, limit)
            print(
                f"| {result['problem']} | {strategy} | {result['ratio']:.3f} | "
                f"{result['seconds']:.2f} | {result['seconds'] / limit:.3f} | "
                f"{result['total']:.2f} | {result['peak_mb']:,} |",
                flush=True,
            )


def setup_times(n: int, live: int) -> dict:
    """Seconds of each piece of the setup that no time limit cuts short, on a random trace
    of ``n`` buffers, and a hash of each order (to compare two versions of the code)."""
    import hashlib

    import planner_traces

    from planner.problem import lower_bound
    from planner.strategies import best_fit, greedy_by_conflicts, greedy_by_size
    from planner.strategies._placement import Instance

    problem = planner_traces.random_trace(n, live)
    seconds: dict[str, float] = {}
    digests: dict[str, str] = {}

    def timed(label, work):
        started = time.perf_counter()
        result = work()
        seconds[label] = round(time.perf_counter() - started, 3)
        if isinstance(result, list):
            digests[label] = hashlib.sha256(repr(result).encode()).hexdigest()[:12]
        elif isinstance(result, int):
            digests[label] = str(result)
        return result

    instance = timed("instance", lambda: Instance(problem))
    timed("size order", lambda: greedy_by_size.size_order(instance))
    timed("max-live bound", instance.lowest_height)
    timed("problem.lower_bound", lambda: lower_bound(problem))
    timed("pair count", instance.pair_count)
    timed("batch state", instance.batch_state)
    for name in best_fit.ORDERS:
        timed(f"order {name}", lambda name=name: best_fit.order_by(instance, name))
    timed("conflict order", lambda: greedy_by_conflicts.conflict_order(instance))
    timed("offsets by id", lambda: len(instance.offsets_by_id([0] * n)))
    return {"seconds": seconds, "total": round(sum(seconds.values()), 2), "hashes": digests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=2, metavar=("SOURCE", "STRATEGY"), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--live", type=int, default=50)
    parser.add_argument("--strategies", default="greedy-by-size,best-fit")
    parser.add_argument(
        "--traces",
        type=Path,
        default=ROOT / "var" / "traces",
        help="CSV traces to plan too (planner_traces.py writes them)",
    )
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--time-limit", type=float, help="check every strategy's time limit")
    parser.add_argument(
        "--setup", type=int, metavar="N", help="time the setup pieces on N random buffers"
    )
    args = parser.parse_args(argv)
    if args.setup:
        print(json.dumps(setup_times(args.setup, args.live)))
        return 0
    if args.one:
        print(json.dumps(measure(*args.one, time_limit=args.time_limit)))
        return 0
    if args.time_limit is not None:
        time_limit_table(args.time_limit, args.live)
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
        folder = args.traces.resolve()
        shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
        print(f"\n## Traces in {shown}\n")
        print(HEADER)
        for path in traces:
            for strategy in strategies:
                print(row(in_child(str(path), strategy)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
