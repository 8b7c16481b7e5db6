"""``--time-limit`` bounds every strategy, and the answer is the best valid plan found."""

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.plan import validate_plan
from planner.problem import Buffer, Problem, write_csv
from planner.strategies import solve, strategy_names

ROOT = Path(__file__).resolve().parents[2]


def hard_problem(count=300, seed=3):
    rng = random.Random(seed)
    buffers = []
    for k in range(count):
        lower = rng.randrange(0, 300)
        buffers.append(Buffer(f"b{k}", lower, lower + rng.randint(5, 45), rng.randint(1, 97)))
    return Problem(tuple(buffers))


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_returns_a_valid_plan_under_a_zero_time_limit(name):
    problem = hard_problem()

    solution = solve(problem, name, time_limit=0)

    validate_plan(problem, solution.offsets)


def test_optimal_returns_an_unproven_plan_with_a_gap_when_time_runs_out():
    problem = hard_problem()

    # No time at all is never enough to prove, however fast the machine.
    solution = solve(problem, "optimal", time_limit=0)

    assert solution.proven_optimal is False
    assert solution.lower_bound <= solution.proven_lower_bound < solution.height
    assert solution.gap == pytest.approx(
        (solution.height - solution.proven_lower_bound) / solution.height
    )


def test_optimal_with_a_short_limit_is_never_worse_than_its_warm_starts():
    problem = hard_problem()

    solution = solve(problem, "optimal", time_limit=0.5)

    assert solution.height <= solve(problem, "best-fit").height
    # A fast machine may prove it within the limit; then there is no gap to report.
    if solution.proven_optimal:
        assert solution.proven_lower_bound == solution.height and solution.gap == 0
    else:
        assert solution.lower_bound <= solution.proven_lower_bound < solution.height


def test_the_command_line_answers_within_a_generous_bound_of_its_limit(tmp_path):
    path = tmp_path / "hard.csv"
    write_csv(path, hard_problem(600))
    started = time.perf_counter()

    result = subprocess.run(
        [sys.executable, "-m", "planner", "solve", path, "-s", "optimal", "--time-limit", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    # Interpreter start-up and imports come on top of the limit; be generous.
    assert time.perf_counter() - started < 15
    summary = json.loads(result.stdout)
    assert summary["proven_optimal"] is False
    assert summary["seconds"] < 3
