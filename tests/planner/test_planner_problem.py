"""Buffers, problems and the max-live lower bound."""

import pytest

from planner.problem import Buffer, Problem, ProblemError, lower_bound


def test_it_accepts_a_well_formed_buffer():
    buffer = Buffer("x", 0, 3, 16, alignment=8, offset=32)

    assert (buffer.lower, buffer.upper, buffer.size, buffer.alignment) == (0, 3, 16, 8)
    assert buffer.offset == 32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": -1}, "size must be >= 0"),
        ({"lower": 3, "upper": 3}, "lower must be < upper"),
        ({"lower": 4, "upper": 3}, "lower must be < upper"),
        ({"alignment": 0}, "alignment must be >= 1"),
        ({"offset": -4}, "offset must be a non-negative integer"),
        ({"alignment": 8, "offset": 4}, "not a multiple of its alignment"),
        ({"size": 1.5}, "size must be an integer"),
        ({"size": True}, "size must be an integer"),
    ],
)
def test_it_rejects_an_invalid_buffer(kwargs, message):
    fields = {"id": "x", "lower": 0, "upper": 3, "size": 4} | kwargs

    with pytest.raises(ProblemError, match=message):
        Buffer(**fields)


def test_it_rejects_an_empty_id():
    with pytest.raises(ProblemError, match="non-empty string"):
        Buffer("", 0, 1, 1)


def test_it_rejects_duplicate_ids():
    with pytest.raises(ProblemError, match="duplicate buffer id 'a'"):
        Problem((Buffer("a", 0, 1, 1), Buffer("b", 0, 1, 1), Buffer("a", 2, 3, 1)))


def test_it_looks_buffers_up_by_id():
    problem = Problem([Buffer("a", 0, 1, 1), Buffer("b", 0, 1, 2)], name="p")

    assert problem["b"].size == 2
    assert problem.position("b") == 1
    assert isinstance(problem.buffers, tuple)
    assert len(problem) == 2


def test_the_lower_bound_is_the_largest_total_live_at_one_instant():
    problem = Problem(
        (
            Buffer("a", 0, 10, 5),
            Buffer("b", 2, 4, 7),
            Buffer("c", 3, 6, 11),
            Buffer("d", 8, 9, 100),
        )
    )

    assert lower_bound(problem) == 105  # d with a, at t=8; b+c+a at t=3 is only 23


def test_the_lower_bound_treats_intervals_as_half_open():
    problem = Problem((Buffer("a", 0, 2, 5), Buffer("b", 2, 4, 7)))

    assert lower_bound(problem) == 7


def test_the_lower_bound_of_an_empty_problem_is_zero():
    assert lower_bound(Problem(())) == 0


def test_the_lower_bound_of_the_minimalloc_example_is_12(example_problem):
    assert lower_bound(example_problem) == 12
