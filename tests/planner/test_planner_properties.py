"""Properties every strategy must have, on random small problems (hypothesis)."""

from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.plan import validate_plan
from planner.problem import lower_bound
from planner.strategies import solve, strategy_names
from tests.planner.problems import problems as random_problems

HEURISTICS = [name for name in strategy_names() if name != "optimal"]
# Short limits keep the searching strategies quick on these tiny problems.
TIME_LIMIT = {"hill-climb": 0.02, "optimal": 2.0}


problems = partial(random_problems, min_buffers=0, alignments=(1, 1, 1, 2, 4))


def plan(problem, name, **options):
    return solve(problem, name, time_limit=TIME_LIMIT.get(name), **options)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
def test_every_strategy_returns_a_valid_plan_no_lower_than_the_bound(problem):
    bound = lower_bound(problem)
    for name in strategy_names():
        solution = plan(problem, name)

        validate_plan(problem, solution.offsets)
        assert solution.height >= bound
        assert solution.lower_bound == bound


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(max_buffers=7))
def test_optimal_is_never_higher_than_any_heuristic(problem):
    best = plan(problem, "optimal")

    for name in HEURISTICS:
        assert best.height <= plan(problem, name).height, name


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(max_buffers=6, fixed=False))
def test_optimal_matches_brute_force(problem, brute_force):
    solution = plan(problem, "optimal")

    assert solution.height == brute_force(problem)
    assert solution.proven_optimal


@settings(max_examples=40, deadline=None)
@given(problem=problems(), data=st.data())
def test_a_plan_over_the_capacity_does_not_fit_and_one_under_does(problem, data):
    solution = plan(problem, "best-fit")
    capacity = data.draw(st.integers(0, solution.height + 4))

    assert plan(problem, "best-fit", capacity=capacity).fits == (solution.height <= capacity)
