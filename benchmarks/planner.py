"""Benchmark of the planner strategies; prints Markdown tables.

1. The MiniMalloc "challenging" instances A..G (capacity 1,048,576): height, ratio to the
   max-live lower bound, seconds and whether each strategy fits the capacity.
2. Realistic traces: tensor lifetimes of chain / residual CNNs (spatial size halving and
   channels doubling per stage, skip connections living across their block): sequences of
   such networks with 1k, 10k and 100k buffers, showing how each heuristic scales, and
   single deep networks of 1k and 10k buffers.

Usage: python benchmarks/planner.py [--dir DIR] [--time-limit 60] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.problem import Buffer, Problem, read_csv  # noqa: E402
from planner.strategies import solve, strategy_names  # noqa: E402

MINIMALLOC_DIR = ROOT.parent / "shared" / "benchmarks" / "dsa" / "minimalloc"
HEURISTICS = ["none", "tvm-token-reuse", "greedy-by-size", "greedy-by-conflicts", "best-fit"]


# --------------------------------------------------------------------------------------
# Realistic traces


class _Trace:
    """Records tensors as a sequence of operators runs: each operator reads its inputs
    and writes one output; a tensor lives from its producer to its last reader."""

    def __init__(self) -> None:
        self.time = 0
        self.start: list[int] = []
        self.end: list[int] = []
        self.size: list[int] = []

    def op(self, inputs: list[int], size: int) -> int:
        for tensor in inputs:
            self.end[tensor] = self.time + 1
        self.start.append(self.time)
        self.end.append(self.time + 1)
        self.size.append(size)
        self.time += 1
        return len(self.size) - 1

    def problem(self, name: str) -> Problem:
        return Problem(
            tuple(
                Buffer(f"t{k}", lower, upper, size)
                for k, (lower, upper, size) in enumerate(
                    zip(self.start, self.end, self.size, strict=True)
                )
            ),
            name=name,
        )


def cnn_trace(buffers: int, seed: int = 0) -> Problem:
    """A sequence of ResNet-like networks with about ``buffers`` tensors.

    Each network has 4-5 stages; each stage halves the spatial size and doubles the
    channels (so activations halve); each residual block is conv-conv-add with the block
    input kept alive for the add, the first block of a stage has a 1x1 projection on the
    skip path, and some blocks are inception-like (two branches, concatenated). Sizes are
    4 * C * H * W bytes.
    """
    rng = random.Random(seed)
    trace = _Trace()
    while len(trace.size) < buffers:
        side = rng.choice([56, 64, 112, 128, 224])
        channels = rng.choice([16, 24, 32, 48, 64])
        x = trace.op([], 4 * 3 * side * side)  # the input image
        x = trace.op([x], 4 * channels * side * side)  # the stem
        for stage in range(rng.choice([4, 5])):
            if stage:
                side = max(1, side // 2)
                channels *= 2
            for block in range(rng.choice([2, 3, 4])):
                size = 4 * channels * side * side
                skip = x
                if block == 0 and stage:
                    skip = trace.op([x], size)  # 1x1 projection of the skip path
                if rng.random() < 0.2:
                    left = trace.op([x], size // 2)
                    right = trace.op([x], size // 4)
                    right = trace.op([right], size // 2)
                    y = trace.op([left, right], size)  # concatenation
                else:
                    y = trace.op([x], size)
                    y = trace.op([y], size)
                x = trace.op([y, skip], size)  # the residual add
        x = trace.op([x], 4 * channels)  # global pooling
        trace.op([x], 4 * 1000)  # the classifier
    return trace.problem(f"cnn-{buffers}")


def deep_cnn_trace(buffers: int, seed: int = 0) -> Problem:
    """One deep residual network of about ``buffers`` tensors: 5 stages of equal depth,
    the same block mix as ``cnn_trace``."""
    rng = random.Random(seed)
    trace = _Trace()
    side, channels = 224, 32
    blocks = max(1, buffers // (5 * 4))
    x = trace.op([], 4 * 3 * side * side)
    x = trace.op([x], 4 * channels * side * side)
    for stage in range(5):
        if stage:
            side //= 2
            channels *= 2
        for block in range(blocks):
            size = 4 * channels * side * side
            skip = trace.op([x], size) if block == 0 and stage else x
            if rng.random() < 0.2:
                left = trace.op([x], size // 2)
                right = trace.op([trace.op([x], size // 4)], size // 2)
                y = trace.op([left, right], size)
            else:
                y = trace.op([trace.op([x], size)], size)
            x = trace.op([y, skip], size)
    trace.op([trace.op([x], 4 * channels)], 4 * 1000)
    return trace.problem(f"deep-cnn-{buffers}")


# --------------------------------------------------------------------------------------


def capacity_from_name(path: Path) -> int | None:
    match = re.search(r"\.(\d+)$", path.stem)
    return int(match.group(1)) if match else None


def row(name: str, n: int, solution, capacity: int | None) -> str:
    fits = "" if solution.fits is None else ("yes" if solution.fits else "**no**")
    proven = " (proven)" if solution.proven_optimal else ""
    return (
        f"| {name} | {n:,} | {solution.strategy} | {solution.height:,}{proven} | "
        f"{solution.ratio:.3f} | {solution.seconds:.3f} | {fits} |"
    )


HEADER = (
    "| instance | buffers | strategy | height | ratio to LB | seconds | fits |\n"
    "|---|---:|---|---:|---:|---:|---|"
)


def minimalloc_table(directory: Path, strategies: list[str], time_limit: float) -> None:
    files = sorted(directory.glob("[A-Z].*.csv"))
    if not files:
        print(f"(no MiniMalloc files in {directory})")
        return
    shown = os.path.relpath(directory, ROOT)  # never a path of the machine it ran on
    print(f"## MiniMalloc challenging instances ({shown})\n")
    print(
        f"`optimal` runs with the file's capacity and --time-limit {time_limit:g}; "
        "`hill-climb` with its default 1 s limit.\n"
    )
    print(HEADER)
    summary = []
    for path in files:
        problem = read_csv(path)
        capacity = capacity_from_name(path)
        for name in strategies:
            limit = time_limit if name == "optimal" else None
            solution = solve(problem, name, capacity=capacity, time_limit=limit)
            print(row(path.stem.split(".")[0], len(problem), solution, capacity), flush=True)
            if name == "optimal":
                summary.append((path.stem, solution))
    if summary:
        times = sorted(s.seconds for _, s in summary)
        fitted = sum(1 for _, s in summary if s.fits)
        median = times[len(times) // 2]
        print(
            f"\n`optimal`: fits {fitted} of {len(summary)} files; median {median:.1f} s, "
            f"slowest {times[-1]:.1f} s.\n"
        )


def scaling_table(sizes: list[int], strategies: list[str], optimal_up_to: int) -> None:
    print("## Realistic CNN traces (residual / inception blocks), scaling\n")
    print(
        "`cnn-N`: a sequence of ResNet-like networks with about N tensors in all; "
        "`deep-cnn-N`: one deep network.\n"
    )
    print(
        f"`hill-climb` runs with its default 1 s limit; `optimal` with 10 s, only up to "
        f"{optimal_up_to:,} buffers.\n"
    )
    print(HEADER)
    problems = [(n, cnn_trace(n, seed=n)) for n in sizes]
    problems += [(n, deep_cnn_trace(n, seed=n)) for n in sizes if n <= 10_000]
    for requested, problem in problems:
        for name in strategies:
            if name == "optimal" and requested > optimal_up_to:
                continue
            limit = 10.0 if name == "optimal" else None
            solution = solve(problem, name, time_limit=limit)
            print(row(problem.name, len(problem), solution, None), flush=True)
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=MINIMALLOC_DIR, help="MiniMalloc CSVs")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds for optimal")
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="buffer counts of the realistic traces"
    )
    parser.add_argument(
        "--strategies", default=",".join(strategy_names()), help="comma-separated names"
    )
    parser.add_argument("--skip-minimalloc", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument(
        "--optimal-up-to", type=int, default=1000, help="largest trace to run optimal on"
    )
    args = parser.parse_args(argv)
    strategies = [name for name in args.strategies.split(",") if name]
    started = time.perf_counter()
    if not args.skip_minimalloc:
        minimalloc_table(args.dir, strategies, args.time_limit)
    if not args.skip_scaling:
        sizes = [int(n) for n in args.sizes.split(",") if n]
        scaling_table(sizes, strategies, args.optimal_up_to)
    print(f"Total {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
