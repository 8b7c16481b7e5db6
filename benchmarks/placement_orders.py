"""How far each of best-fit's orders lands from the bound, beside placing by first use.

    python benchmarks/placement_orders.py                        # MiniMalloc's A-G
    python benchmarks/placement_orders.py var/art/m/best-fit-rewrites/problem-merged.csv

best-fit places its buffers in three orders (XLA's spatial and temporal, TFLite's by size)
and keeps the lowest plan. This prints, per problem file, the lower bound, each order's
height (best fit), the height of placing by first use (lower ascending, larger first on a
tie: the order a program allocates in), best-fit's answer and hill-climb's. A
``problem-merged.csv`` that ``planner compile --artifacts`` writes for a +rewrites strategy
is the problem that strategy really solved. Offsets in a file are read as a plan, not as
constraints, and dropped.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.problem import Problem, lower_bound, read_problem  # noqa: E402
from planner.strategies import best_fit, solve  # noqa: E402
from planner.strategies._placement import Instance, place_in_order, plan_height  # noqa: E402

MINIMALLOC_DIR = ROOT.parent / "shared" / "benchmarks" / "dsa" / "minimalloc"


def first_use_order(problem: Problem) -> list[int]:
    buffers = problem.buffers
    return sorted(range(len(buffers)), key=lambda i: (buffers[i].lower, -buffers[i].size))


def heights(problem: Problem) -> dict[str, int]:
    instance = Instance.of(problem)
    found = {"lower bound": lower_bound(problem)}
    for name in best_fit.ORDERS:
        offsets = place_in_order(instance, best_fit.order_by(instance, name), fit="best")
        found[name] = plan_height(instance, offsets)
    offsets = place_in_order(instance, first_use_order(problem), fit="best")
    found["first use"] = plan_height(instance, offsets)
    found["best-fit"] = solve(problem, "best-fit").height
    found["hill-climb"] = solve(problem, "hill-climb", seed=0).height
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.problems or sorted(MINIMALLOC_DIR.glob("[A-G].*.csv"))
    if not paths:
        parser.error(f"no problem files given and none in {MINIMALLOC_DIR}")
    rows = []
    for path in paths:
        problem = read_problem(path)
        free = Problem(tuple(dataclasses.replace(b, offset=None) for b in problem.buffers))
        rows.append((path, len(free.buffers), heights(free)))
    columns = list(rows[0][2])
    print("| problem | buffers | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for path, count, found in rows:
        bound = found["lower bound"]
        cells = [f"{found['lower bound']:,}"] + [
            f"{found[c]:,} ({found[c] / bound:.3f})" if bound else f"{found[c]:,}"
            for c in columns[1:]
        ]
        name = path.name if path.parent == MINIMALLOC_DIR else str(path)
        print(f"| {name} | {count:,} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
