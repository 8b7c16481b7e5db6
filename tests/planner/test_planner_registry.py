"""The strategy registry and solve()."""

import pytest

from planner.plan import InvalidPlan, Placement
from planner.problem import Buffer, Problem, ProblemError
from planner.strategies import (
    Strategy,
    UnknownStrategy,
    get_strategy,
    solve,
    strategy_names,
)

EXPECTED = [
    "none",
    "tvm-token-reuse",
    "greedy-by-size",
    "greedy-by-conflicts",
    "best-fit",
    "hill-climb",
    "optimal",
]


def test_it_lists_every_strategy():
    assert strategy_names() == EXPECTED


def test_it_rejects_an_unknown_name_listing_the_known_ones():
    with pytest.raises(UnknownStrategy, match="unknown strategy 'fastest'; known strategies: none"):
        get_strategy("fastest")


def test_an_unknown_name_is_both_a_key_error_and_a_value_error():
    for error in (KeyError, ValueError):
        with pytest.raises(error):
            get_strategy("fastest")


@pytest.mark.parametrize("name", EXPECTED)
def test_it_solves_the_minimalloc_example_with_every_strategy(example_problem, name):
    solution = solve(example_problem, name, time_limit=1.0)

    assert solution.strategy == name
    assert set(solution.offsets) == {"b1", "b2", "b3", "b4", "b5"}
    assert solution.lower_bound == 12
    assert solution.height >= 12
    assert solution.fits is None
    assert solution.seconds >= 0


def test_it_reports_whether_the_plan_fits_the_capacity(example_problem):
    assert solve(example_problem, "none", capacity=20).fits is True
    assert solve(example_problem, "none", capacity=19).fits is False


def test_meeting_the_lower_bound_counts_as_proven_optimal(example_problem):
    assert solve(example_problem, "greedy-by-size").proven_optimal is True
    assert solve(example_problem, "none").proven_optimal is False


def test_it_validates_what_a_strategy_returns(example_problem, monkeypatch):
    def broken(problem, **options):
        return Placement({b.id: 0 for b in problem.buffers})

    monkeypatch.setitem(
        get_strategy.__globals__["_STRATEGIES"], "none", Strategy("none", "broken", broken)
    )

    with pytest.raises(InvalidPlan, match="share addresses"):
        solve(example_problem, "none")


def test_it_rejects_fixed_offsets_that_overlap_each_other():
    problem = Problem((Buffer("a", 0, 2, 4, offset=0), Buffer("b", 1, 3, 4, offset=2)))

    with pytest.raises(ProblemError, match="fixed offsets cannot all be kept"):
        solve(problem, "greedy-by-size")


def test_it_plans_an_empty_problem():
    solution = solve(Problem(()), "optimal")

    assert (solution.height, solution.lower_bound, solution.offsets) == (0, 0, {})
