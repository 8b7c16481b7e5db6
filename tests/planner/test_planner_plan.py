"""Plan height and validation."""

import random

import pytest

from planner.plan import CapacityError, InvalidPlan, Solution, height, validate_plan
from planner.problem import Buffer, Problem


def test_height_is_the_highest_end(example_problem):
    offsets = {"b1": 0, "b2": 0, "b3": 4, "b4": 0, "b5": 8}

    assert height(example_problem, offsets) == 12


def test_it_accepts_a_valid_plan(example_problem):
    validate_plan(example_problem, {"b1": 0, "b2": 0, "b3": 4, "b4": 0, "b5": 8}, capacity=12)


def test_it_names_the_two_overlapping_buffers(example_problem):
    offsets = {"b1": 0, "b2": 0, "b3": 4, "b4": 0, "b5": 6}

    with pytest.raises(InvalidPlan, match=r"buffers '(b3|b5)' and '(b3|b5)' .*share addresses"):
        validate_plan(example_problem, offsets)


def test_it_finds_an_overlap_with_a_buffer_that_is_not_an_address_neighbour():
    # c sits on top of b, but a (live with c) spans both: the sweep must still catch it.
    problem = Problem((Buffer("a", 0, 10, 10), Buffer("b", 5, 6, 1), Buffer("c", 7, 8, 1)))

    with pytest.raises(InvalidPlan, match="'a' and 'c'|'c' and 'a'"):
        validate_plan(problem, {"a": 0, "b": 20, "c": 9})


def test_buffers_that_meet_in_time_may_share_addresses():
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 2, 4, 4)))

    validate_plan(problem, {"a": 0, "b": 0})


def test_zero_sized_buffers_never_collide():
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("empty", 0, 2, 0)))

    validate_plan(problem, {"a": 0, "empty": 2})


def test_it_rejects_a_misaligned_offset():
    problem = Problem((Buffer("a", 0, 2, 4, alignment=8),))

    with pytest.raises(InvalidPlan, match="'a': offset 4 is not a multiple of its alignment 8"):
        validate_plan(problem, {"a": 4})


def test_it_rejects_a_moved_fixed_buffer():
    problem = Problem((Buffer("a", 0, 2, 4, offset=16),))

    with pytest.raises(InvalidPlan, match="'a': has the fixed offset 16 but was moved to 0"):
        validate_plan(problem, {"a": 0})


def test_it_rejects_a_plan_over_the_capacity(example_problem):
    offsets = {"b1": 0, "b2": 0, "b3": 4, "b4": 0, "b5": 8}

    with pytest.raises(CapacityError, match="height 12 exceeds the capacity 11"):
        validate_plan(example_problem, offsets, capacity=11)


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ({"a": 0}, "no offset for buffer"),
        ({"a": 0, "b": 8, "ghost": 0}, "unknown buffer"),
        ({"a": -4, "b": 8}, "non-negative integer"),
        ({"a": 0.0, "b": 8}, "non-negative integer"),
    ],
)
def test_it_rejects_missing_extra_and_bad_offsets(offsets, message):
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 0, 2, 4)))

    with pytest.raises(InvalidPlan, match=message):
        validate_plan(problem, offsets)


def test_it_agrees_with_a_pairwise_check_on_random_plans():
    rng = random.Random(7)
    for _ in range(300):
        buffers = []
        for k in range(rng.randint(1, 12)):
            lower = rng.randint(0, 10)
            buffers.append(Buffer(f"b{k}", lower, lower + rng.randint(1, 5), rng.randint(0, 4)))
        problem = Problem(tuple(buffers))
        offsets = {b.id: rng.randint(0, 8) for b in buffers}
        pairwise_ok = all(
            not (a.overlaps(b) and a.size and b.size)
            or offsets[a.id] + a.size <= offsets[b.id]
            or offsets[b.id] + b.size <= offsets[a.id]
            for i, a in enumerate(buffers)
            for b in buffers[i + 1 :]
        )
        try:
            validate_plan(problem, offsets)
            swept_ok = True
        except InvalidPlan:
            swept_ok = False
        assert swept_ok == pairwise_ok


def test_a_solution_serialises_to_the_summary_line():
    solution = Solution(
        strategy="best-fit",
        offsets={"a": 0, "b": 4},
        height=8,
        lower_bound=8,
        seconds=0.25,
        proven_optimal=True,
        fits=None,
    )

    assert solution.to_json() == {
        "strategy": "best-fit",
        "buffers": 2,
        "height": 8,
        "lower_bound": 8,
        "proven_lower_bound": 8,
        "gap": 0.0,
        "seconds": 0.25,
        "proven_optimal": True,
        "fits": None,
    }
    assert solution.ratio == 1.0
