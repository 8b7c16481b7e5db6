"""The ``hill-climb`` strategy."""

from planner.problem import Buffer, Problem
from planner.strategies import solve
from planner.strategies.hill_climb import plan

# Greedy by size needs 9 bytes here; the optimum is 8.
GREEDY_IS_SUBOPTIMAL = Problem(
    (
        Buffer("b0", 5, 7, 3),
        Buffer("b1", 7, 8, 6),
        Buffer("b2", 6, 11, 1),
        Buffer("b3", 0, 6, 3),
        Buffer("b4", 2, 7, 2),
    )
)


def test_it_improves_on_greedy_by_size():
    assert solve(GREEDY_IS_SUBOPTIMAL, "greedy-by-size").height == 9

    solution = solve(GREEDY_IS_SUBOPTIMAL, "hill-climb", time_limit=5.0)

    assert solution.height == 8
    assert solution.proven_optimal is False or solution.height == solution.lower_bound


def test_it_is_deterministic_for_a_seed():
    problem = Problem(
        tuple(
            Buffer(f"b{k}", (k * 7) % 23, (k * 7) % 23 + 1 + k % 5, 1 + (k * 13) % 9)
            for k in range(40)
        )
    )

    first = plan(problem, seed=3, time_limit=30.0, max_iterations=200)
    second = plan(problem, seed=3, time_limit=30.0, max_iterations=200)

    assert first.offsets == second.offsets


def test_it_is_never_worse_than_greedy_by_size():
    problem = Problem(
        tuple(
            Buffer(f"b{k}", (k * 5) % 17, (k * 5) % 17 + 1 + k % 4, 1 + (k * 11) % 7)
            for k in range(30)
        )
    )

    greedy = solve(problem, "greedy-by-size").height

    assert solve(problem, "hill-climb", time_limit=0.2, seed=1).height <= greedy


def test_it_stops_at_the_time_limit():
    problem = Problem(
        tuple(
            Buffer(f"b{k}", (k * 37) % 500, (k * 37) % 500 + 5 + k % 40, 1 + (k * 31) % 97)
            for k in range(600)
        )
    )

    solution = solve(problem, "hill-climb", time_limit=0.2)

    assert solution.seconds < 1.5
