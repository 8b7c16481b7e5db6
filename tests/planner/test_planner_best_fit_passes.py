"""best-fit places its three orders with less work: it stops at the lower bound, and
abandons a pass that reaches the best height so far. Its plans are those of placing every
order in full."""

from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.plan import validate_plan
from planner.problem import Buffer, Problem, lower_bound
from planner.strategies import _placement, best_fit, solve
from planner.strategies._placement import (
    Instance,
    PassAbandoned,
    _add_interval,
    place_against_neighbours,
    place_in_order,
    plan_height,
)
from tests.planner.problems import problems as random_problems
from tests.planner.problems import seeded_problem

problems = partial(random_problems, max_buffers=30, max_start=20, max_length=12, max_size=24)


def every_order_in_full(instance):
    """The plan best-fit used to return: every order placed, the first lowest kept."""
    plans = [
        place_against_neighbours(instance, best_fit.order_by(instance, name), "best")
        for name in best_fit.ORDERS
    ]
    heights = [plan_height(instance, offsets) for offsets in plans]
    return plans[heights.index(min(heights))], min(heights)


def random_problem(seed, count=60):
    return seeded_problem(seed, count, span=60, lengths=(1, 20), sizes=(1, 50))


class PassLog:
    """Wraps best_fit's ``place_in_order``: how each pass ended."""

    def __init__(self, monkeypatch):
        self.ends = []
        self.place = best_fit.place_in_order
        monkeypatch.setattr(best_fit, "place_in_order", self)

    def __call__(self, *args, **kwargs):
        try:
            offsets = self.place(*args, **kwargs)
        except PassAbandoned:
            self.ends.append("abandoned")
            raise
        self.ends.append("placed")
        return offsets


def test_best_fit_stops_once_an_order_reaches_the_lower_bound(monkeypatch):
    # The first order (size, then lifetime, descending) packs b and c beside a: max-live.
    problem = Problem((Buffer("a", 0, 10, 4), Buffer("b", 0, 5, 4), Buffer("c", 5, 10, 4)))
    passes = PassLog(monkeypatch)

    placement = best_fit.plan(problem)

    assert passes.ends == ["placed"]  # the two other orders are never placed
    assert placement.proven_optimal
    solution = solve(problem, "best-fit")
    assert solution.height == solution.lower_bound == 8
    assert solution.proven_optimal


def test_a_plan_at_the_top_of_the_fixed_buffers_is_proven_optimal(monkeypatch):
    # Max-live is 8, but the pinned buffer ends at 20: no plan is lower than 20.
    problem = Problem((Buffer("pinned", 0, 10, 4, 1, 16), Buffer("a", 0, 10, 4)))
    passes = PassLog(monkeypatch)

    solution = solve(problem, "best-fit")

    assert passes.ends == ["placed"]
    assert solution.height == 20 > solution.lower_bound == 8
    assert solution.proven_optimal and solution.proven_lower_bound == 20
    assert solution.gap == 0


def test_best_fit_reports_no_proof_when_no_order_reaches_the_bound(monkeypatch):
    problem = random_problem(0)
    instance = Instance(problem)
    passes = PassLog(monkeypatch)

    offsets, height, at_bound = best_fit.lowest_plan(instance, None)

    assert height > instance.lowest_height()
    assert not at_bound
    assert not best_fit.plan(problem).proven_optimal
    assert len(passes.ends) == 6  # every order was started, each time


@pytest.mark.parametrize("seed", range(10))
def test_an_abandoned_pass_never_yields_a_worse_plan(seed, monkeypatch):
    # On these problems the first order's plan is the lowest or tied more often than not,
    # so later passes are abandoned part way; the plan is the one of every order in full.
    problem = random_problem(seed)
    instance = Instance(problem)
    expected, height = every_order_in_full(instance)
    passes = PassLog(monkeypatch)

    offsets, found, at_bound = best_fit.lowest_plan(instance, None)

    assert found == height == plan_height(instance, offsets)
    assert offsets == expected
    assert at_bound == (height <= lower_bound(problem))
    validate_plan(problem, instance.offsets_by_id(offsets))
    if not at_bound:
        assert len(passes.ends) == 3
    if seed == 0:  # orders' heights 404, 433, 404: both later passes reach 404 and stop
        assert passes.ends == ["placed", "abandoned", "abandoned"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
def test_best_fit_plans_what_placing_every_order_in_full_plans(problem):
    instance = Instance(problem)
    expected, height = every_order_in_full(instance)

    offsets, found, at_bound = best_fit.lowest_plan(instance, None)

    assert (offsets, found) == (expected, height)
    assert at_bound == (height <= instance.lowest_height())
    assert solve(problem, "best-fit").height == height


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=problems(fixed=False),
    fit=st.sampled_from(["first", "best"]),
    batched=st.booleans(),
    data=st.data(),
)
def test_a_pass_is_abandoned_exactly_when_it_reaches_its_ceiling(problem, fit, batched, data):
    instance = Instance(problem)
    order = data.draw(st.permutations(range(len(problem))))
    place = _placement.place_in_batches if batched else place_in_order
    full = place(instance, order, fit)
    height = plan_height(instance, full)

    assert place(instance, order, fit, ceiling=height + 1) == full
    if height:
        with pytest.raises(PassAbandoned):
            place(instance, order, fit, ceiling=height)
        with pytest.raises(PassAbandoned):
            place(instance, order, fit, ceiling=data.draw(st.integers(1, height)))


def test_a_large_sparse_pass_is_abandoned_in_batches(monkeypatch):
    problem = seeded_problem(5, 3000, span=30000, lengths=(1, 60), sizes=(1, 5000))
    monkeypatch.setattr(_placement, "BATCH_FROM", 1000)
    instance = Instance(problem)
    order = best_fit.order_by(instance, "xla-spatial")
    assert _placement.batches_apply(instance)
    height = plan_height(instance, place_in_order(instance, order, "best"))

    with pytest.raises(PassAbandoned):
        place_in_order(instance, order, "best", ceiling=height)
    assert plan_height(instance, place_in_order(instance, order, "best", ceiling=height + 1)) == (
        height
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(max_buffers=40))
def test_the_instance_lower_bound_is_max_live_or_the_fixed_top(problem):
    fixed_top = max(
        (b.offset + b.size for b in problem.buffers if b.offset is not None), default=0
    )

    assert Instance(problem).lowest_height() == max(lower_bound(problem), fixed_top)


def test_the_instance_lower_bound_of_a_large_trace_is_the_max_live_bound():
    problem = random_problem(1, count=5000)

    assert Instance(problem).lowest_height() == lower_bound(problem)


@settings(max_examples=300, deadline=None)
@given(
    lists=st.lists(
        st.lists(st.tuples(st.integers(0, 200), st.integers(1, 40)), min_size=1, max_size=12),
        min_size=1,
        max_size=6,
    ),
    size=st.integers(1, 60),
    alignment=st.sampled_from([1, 1, 2, 8, 16]),
)
def test_best_fit_over_interval_lists_is_best_fit_over_their_blocks(lists, size, alignment):
    # Several coalesced lists, overlapping each other, as the tree's query returns them.
    interval_lists = []
    blocks = []
    for pairs in lists:
        intervals = [pairs[0][0], pairs[0][0] + pairs[0][1]]
        for start, length in pairs[1:]:
            _add_interval(intervals, start, start + length)
        interval_lists.append(intervals)
        blocks.extend((start, start + length) for start, length in pairs)

    assert _placement.best_fit_in(interval_lists, size, alignment) == _placement.best_fit(
        blocks, size, alignment
    )
