"""The ``none`` strategy: no reuse."""

from planner.problem import Buffer, Problem
from planner.strategies import solve


def test_it_gives_every_buffer_its_own_slot(example_problem):
    solution = solve(example_problem, "none")

    assert solution.height == sum(b.size for b in example_problem.buffers)
    assert sorted(solution.offsets.values()) == [0, 4, 8, 12, 16]


def test_it_stacks_above_fixed_buffers_and_keeps_alignment():
    problem = Problem(
        (
            Buffer("free", 0, 1, 3),
            Buffer("aligned", 5, 6, 4, alignment=8),
            Buffer("f", 9, 10, 2, offset=4),
        )
    )

    offsets = solve(problem, "none").offsets

    assert offsets == {"f": 4, "free": 6, "aligned": 16}
