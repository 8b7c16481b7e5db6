"""The ``optimal`` strategy and its canonical search."""

import time

import pytest

from planner.problem import Buffer, Problem
from planner.strategies import solve
from planner.strategies._canonical_search import FOUND, INFEASIBLE, CanonicalSearch
from planner.strategies._placement import Instance

# Two 3-byte buffers aligned to 4 live together: the lower bound says 6, but the second
# one can only start at 4, so the optimum is 7.
ALIGNED_PAIR = Problem((Buffer("a", 0, 2, 3, alignment=4), Buffer("b", 0, 2, 3, alignment=4)))


def test_it_reaches_the_lower_bound_and_says_it_is_optimal(example_problem):
    solution = solve(example_problem, "optimal", time_limit=5)

    assert solution.height == 12
    assert solution.proven_optimal is True


def test_it_proves_optimality_above_the_lower_bound():
    solution = solve(ALIGNED_PAIR, "optimal", time_limit=5)

    assert (solution.lower_bound, solution.height) == (6, 7)
    assert solution.proven_optimal is True


def test_it_works_around_fixed_buffers():
    # A fixed buffer at [5, 6) leaves a 5-byte hole below it: the 6-byte buffer must go
    # above it, the 5-byte one fits into the hole.
    problem = Problem(
        (
            Buffer("fixed", 0, 10, 1, offset=5),
            Buffer("big", 0, 10, 6),
            Buffer("small", 0, 10, 5),
        )
    )

    solution = solve(problem, "optimal", time_limit=5)

    assert solution.offsets == {"fixed": 5, "big": 6, "small": 0}
    assert solution.proven_optimal is True


def test_it_reports_a_capacity_it_cannot_meet():
    solution = solve(ALIGNED_PAIR, "optimal", capacity=6, time_limit=5)

    assert solution.fits is False
    assert solution.height == 7


def test_the_search_proves_infeasibility():
    search = CanonicalSearch(Instance.of(ALIGNED_PAIR))

    assert search.solve(6, time.perf_counter() + 5).status == INFEASIBLE
    assert search.solve(7, time.perf_counter() + 5).status == FOUND


def test_it_finds_a_plan_within_a_capacity_the_heuristics_miss():
    problem = Problem(
        (
            Buffer("b0", 6, 11, 2),
            Buffer("b1", 2, 4, 1),
            Buffer("b2", 7, 10, 1),
            Buffer("b3", 3, 8, 1),
            Buffer("b4", 8, 10, 5),
            Buffer("b5", 4, 5, 6),
        )
    )
    for heuristic in ("best-fit", "greedy-by-size", "greedy-by-conflicts", "tvm-token-reuse"):
        assert solve(problem, heuristic).height > 8

    solution = solve(problem, "optimal", capacity=8, time_limit=5)

    assert solution.fits is True
    assert solution.height == 8


@pytest.mark.parametrize("seed", range(5))
def test_it_matches_brute_force_on_small_random_problems(seed, brute_force):
    import random

    rng = random.Random(seed)
    buffers = []
    for k in range(7):
        lower = rng.randint(0, 6)
        buffers.append(
            Buffer(f"b{k}", lower, lower + rng.randint(1, 4), rng.randint(1, 6), rng.choice([1, 2]))
        )
    problem = Problem(tuple(buffers))

    solution = solve(problem, "optimal", time_limit=5)

    assert solution.height == brute_force(problem)
    assert solution.proven_optimal is True


def test_it_returns_the_best_plan_found_within_the_time_limit():
    problem = Problem(
        tuple(
            Buffer(f"b{k}", (k * 37) % 300, (k * 37) % 300 + 5 + k % 40, 1 + (k * 31) % 97)
            for k in range(300)
        )
    )

    solution = solve(problem, "optimal", time_limit=0.5)

    assert solution.seconds < 3
    assert solution.height <= solve(problem, "best-fit").height


def test_minimising_proves_a_bound_above_max_live_and_closes_the_gap():
    solution = solve(ALIGNED_PAIR, "optimal", time_limit=5)

    assert solution.lower_bound == 6
    assert solution.proven_lower_bound == solution.height == 7
    assert solution.gap == 0.0
    assert solution.to_json()["gap"] == 0.0


def test_a_minimisation_cut_short_reports_the_proven_bound_and_the_gap():
    problem = Problem(
        tuple(
            Buffer(f"b{k}", (k * 37) % 300, (k * 37) % 300 + 5 + k % 40, 1 + (k * 31) % 97)
            for k in range(300)
        )
    )

    summary = solve(problem, "optimal", time_limit=0.5).to_json()

    assert summary["proven_optimal"] is False
    assert summary["lower_bound"] <= summary["proven_lower_bound"] < summary["height"]
    assert summary["gap"] == round(
        (summary["height"] - summary["proven_lower_bound"]) / summary["height"], 6
    )
