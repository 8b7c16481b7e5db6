"""``--time-limit`` bounds every strategy, and the answer is the best valid plan found."""

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from planner.plan import validate_plan
from planner.problem import Buffer, Problem, write_csv
from planner.strategies import get_strategy, solve, strategy_names
from planner.strategies._placement import Instance, batches_apply, place_in_order
from tests.planner.problems import seeded_problem

ROOT = Path(__file__).resolve().parents[2]


def hard_problem(count=300, seed=3):
    return seeded_problem(seed, count, span=300, lengths=(5, 45), sizes=(1, 97))


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


def large_sparse_problem(count, live=50, seed=5):
    """One buffer starting per time step, about ``live`` live at a time: big enough that a
    single re-placing in hill climbing takes a good part of a second."""
    rng = random.Random(seed)
    return Problem(
        tuple(
            Buffer(f"r{k}", k, k + rng.randint(1, 2 * live - 1), 64 * rng.randint(1, 16384))
            for k in range(count)
        )
    )


def test_hill_climb_on_a_large_problem_answers_within_five_percent_of_its_limit():
    problem = large_sparse_problem(200_000)
    limit = 2.0
    strategy = get_strategy("hill-climb")

    # The processor time this process has used when the deadline passes: what the strategy
    # does after it is counted in processor time, which a machine busy with other tests
    # (the suite runs in two processes on two cores) does not stretch as it does wall time.
    at_deadline = []
    timer = threading.Timer(limit, lambda: at_deadline.append(time.process_time()))
    started = time.perf_counter()
    timer.start()
    placement = strategy(problem, time_limit=limit)
    after = time.process_time()
    elapsed = time.perf_counter() - started
    timer.cancel()

    # Unbounded, it would climb for its 3,000 iterations, each a re-placing of up to every
    # buffer. What it does after its deadline (the cut re-placing, turning the plan into
    # offsets by id) must fit in the 5% the limit allows, with 0.1 s of slack.
    after_deadline = after - at_deadline[0] if at_deadline else 0.0  # none: it was in time
    assert after_deadline < limit * 0.05 + 0.1
    assert elapsed < 2 * limit
    assert len(placement.offsets) == len(problem)


@pytest.mark.parametrize("alignment", [1, 256])
def test_batched_placement_caught_by_its_deadline_stacks_a_valid_plan(alignment):
    problem = large_sparse_problem(25_000, seed=alignment)
    buffers = list(problem.buffers)
    # A fixed buffer and a zero-sized one, which stacking must leave where they are.
    buffers[7] = Buffer("fixed", buffers[7].lower, buffers[7].upper, 4096, offset=1 << 20)
    buffers[8] = Buffer("empty", buffers[8].lower, buffers[8].upper, 0)
    buffers[9:] = [Buffer(b.id, b.lower, b.upper, b.size, alignment=alignment) for b in buffers[9:]]
    problem = Problem(tuple(buffers))
    instance = Instance(problem)
    assert batches_apply(instance)

    # A deadline long past: every free buffer is stacked, none placed by fit.
    offsets = place_in_order(instance, range(len(instance)), deadline=0.0)

    validate_plan(problem, instance.offsets_by_id(offsets))
    assert offsets[7] == 1 << 20 and offsets[8] == 0
