"""The USMP greedy strategies (by size, by conflicts) and best fit."""

import pytest

from planner.problem import Buffer, Problem
from planner.strategies import solve


def test_greedy_by_size_places_the_largest_buffer_at_the_bottom():
    problem = Problem((Buffer("small", 0, 4, 2), Buffer("large", 0, 4, 8)))

    assert solve(problem, "greedy-by-size").offsets == {"large": 0, "small": 8}


def test_greedy_by_size_breaks_size_ties_by_longer_lifetime():
    problem = Problem((Buffer("short", 1, 3, 4), Buffer("long", 0, 4, 4)))

    assert solve(problem, "greedy-by-size").offsets == {"long": 0, "short": 4}


def test_greedy_by_size_reuses_addresses_of_buffers_that_are_dead():
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 1, 3, 2), Buffer("c", 2, 4, 2)))

    assert solve(problem, "greedy-by-size").offsets == {"a": 0, "b": 4, "c": 0}


def test_greedy_by_conflicts_places_the_most_conflicting_buffer_first():
    problem = Problem(
        (
            Buffer("a", 0, 3, 5),
            Buffer("b", 3, 6, 5),
            Buffer("c", 6, 9, 5),
            Buffer("hub", 0, 9, 1),
        )
    )

    by_conflicts = solve(problem, "greedy-by-conflicts").offsets
    by_size = solve(problem, "greedy-by-size").offsets

    assert by_conflicts == {"hub": 0, "a": 1, "b": 1, "c": 1}
    assert by_size == {"a": 0, "b": 0, "c": 0, "hub": 5}


def gapped_problem():
    # Fixed buffers leave a 4-byte gap at [0, 4) and a 2-byte gap at [6, 8).
    return Problem(
        (
            Buffer("f1", 0, 10, 2, offset=4),
            Buffer("f2", 0, 10, 2, offset=8),
            Buffer("x", 0, 10, 2),
        )
    )


def test_first_fit_takes_the_lowest_gap():
    assert solve(gapped_problem(), "greedy-by-size").offsets["x"] == 0


def test_best_fit_takes_the_smallest_gap():
    assert solve(gapped_problem(), "best-fit").offsets["x"] == 6


def test_best_fit_goes_on_top_when_no_gap_holds_the_buffer():
    problem = Problem(
        (Buffer("f1", 0, 10, 2, offset=4), Buffer("f2", 0, 10, 2, offset=8), Buffer("x", 0, 10, 5))
    )

    assert solve(problem, "best-fit").offsets["x"] == 10


@pytest.mark.parametrize("name", ["greedy-by-size", "greedy-by-conflicts", "best-fit"])
def test_it_respects_alignment_when_fitting_into_gaps(name):
    problem = Problem((Buffer("low", 0, 4, 3, offset=0), Buffer("x", 0, 4, 4, alignment=4)))

    assert solve(problem, name).offsets["x"] == 4


@pytest.mark.parametrize("name", ["greedy-by-size", "greedy-by-conflicts", "best-fit"])
def test_it_packs_a_staircase_of_equal_buffers_at_the_lower_bound(name):
    # Equal sizes: the id tie-break takes them in time order, which is optimal here.
    problem = Problem(tuple(Buffer(f"b{k:02d}", k, k + 3, 4) for k in range(30)))

    solution = solve(problem, name)

    assert solution.height == solution.lower_bound == 12
