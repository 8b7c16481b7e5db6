"""The sweep behind first fit and best fit: the same plans as a pass over the explicit
conflict graph, without ever listing the conflicting pairs."""

import random
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.plan import validate_plan
from planner.problem import Buffer, Problem
from planner.strategies import _placement, best_fit, greedy_by_conflicts, greedy_by_size, solve
from planner.strategies._placement import (
    GraphTooLarge,
    Instance,
    place_against_neighbours,
    place_in_order,
)
from tests.planner.problems import problems as random_problems
from tests.planner.problems import seeded_problem

problems = partial(random_problems, max_buffers=14, max_start=15, max_length=10, max_size=16)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(), fit=st.sampled_from(["first", "best"]), data=st.data())
def test_the_sweep_places_every_buffer_where_the_pairwise_pass_does(problem, fit, data):
    instance = Instance(problem)
    order = data.draw(st.permutations(range(len(problem))))

    swept = place_in_order(instance, order, fit)

    assert swept == place_against_neighbours(instance, order, fit)
    validate_plan(problem, instance.offsets_by_id(swept))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(max_buffers=40), fit=st.sampled_from(["first", "best"]))
def test_the_vectorised_union_gives_the_same_plans(problem, fit):
    # Force the numpy path for every query: its gaps must be the plain path's gaps.
    instance = Instance(problem)
    order = list(range(len(problem)))
    plain = place_in_order(instance, order, fit)
    saved = _placement.NUMPY_FROM
    _placement.NUMPY_FROM = 0
    try:
        vectorised = place_in_order(instance, order, fit)
    finally:
        _placement.NUMPY_FROM = saved

    assert vectorised == plain


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=problems(max_buffers=40),
    fit=st.sampled_from(["first", "best"]),
    pairs=st.sampled_from([1, 16, 1 << 17]),
    data=st.data(),
)
def test_placing_in_batches_gives_the_plans_of_the_pairwise_pass(problem, fit, pairs, data):
    # Tiny chunks (pairs=1) give many chunks of one wave, large ones few chunks of many waves.
    instance = Instance(problem)
    order = data.draw(st.permutations(range(len(problem))))
    saved = _placement.BATCH_PAIRS
    _placement.BATCH_PAIRS = pairs
    try:
        batched = _placement.place_in_batches(instance, order, fit)
    finally:
        _placement.BATCH_PAIRS = saved

    assert batched == place_against_neighbours(instance, order, fit)


def test_large_sparse_problems_are_placed_in_batches_with_the_same_plans(monkeypatch):
    rng = random.Random(3)
    buffers = []
    for k in range(3000):
        lower = rng.randrange(0, 30000)
        size = rng.choice([0, 64, 100, 256, rng.randint(1, 5000)])
        buffers.append(Buffer(f"b{k}", lower, lower + rng.randint(1, 60), size, rng.choice([1, 8])))
    buffers[7] = Buffer("pinned", 0, 30000, 512, 1, 4096)
    problem = Problem(tuple(buffers))
    monkeypatch.setattr(_placement, "BATCH_FROM", 1000)
    instance = Instance(problem)
    order = best_fit.order_by(instance, "xla-spatial")

    assert _placement.batches_apply(instance)
    for fit in ("first", "best"):
        assert place_in_order(instance, order, fit) == place_against_neighbours(
            instance, order, fit
        )


def test_the_strategies_give_the_heights_of_the_pairwise_heuristics():
    problem = seeded_problem(7, 2000, span=4000, lengths=(1, 200), sizes=(1, 5000))
    instance = Instance(problem)

    by_size = place_against_neighbours(instance, greedy_by_size.size_order(instance))
    best = min(
        max(
            o + s
            for o, s in zip(
                place_against_neighbours(instance, best_fit.order_by(instance, name), "best"),
                instance.sizes,
                strict=True,
            )
        )
        for name in best_fit.ORDERS
    )

    assert solve(problem, "greedy-by-size").height == max(
        o + s for o, s in zip(by_size, instance.sizes, strict=True)
    )
    assert solve(problem, "best-fit").height == best


def test_degrees_count_conflicts_without_listing_them():
    problem = Problem(
        (
            Buffer("a", 0, 10, 4),
            Buffer("b", 2, 4, 4),
            Buffer("c", 4, 6, 4),
            Buffer("empty", 0, 10, 0),
            Buffer("later", 10, 12, 4),
        )
    )

    assert Instance(problem).degrees() == [2, 1, 1, 0, 0]
    assert Instance(problem).pair_count() == 2


def test_the_conflict_graph_is_refused_above_a_pair_limit():
    problem = Problem(tuple(Buffer(f"b{k}", 0, 10, 1) for k in range(50)))

    try:
        Instance(problem).conflicts(max_pairs=100)
    except GraphTooLarge as error:
        assert error.pairs == 50 * 49 // 2
    else:
        raise AssertionError("expected GraphTooLarge")


def test_a_heuristic_caught_by_its_deadline_stacks_the_rest_into_a_valid_plan():
    problem = Problem(tuple(Buffer(f"b{k}", k, k + 5, 1 + k % 7) for k in range(1000)))
    instance = Instance(problem)

    offsets = place_in_order(instance, range(1000), deadline=0.0)  # long past

    validate_plan(problem, instance.offsets_by_id(offsets))


def test_the_orders_sorted_by_numpy_are_those_of_python_sorted():
    rng = random.Random(11)
    for _ in range(100):
        ids = [f"b{k}" for k in range(rng.randint(1, 40))]
        rng.shuffle(ids)  # ties on sizes and lifetimes fall back to ids, not positions
        buffers = []
        for name in ids:
            lower = rng.randint(-5, 5)
            buffers.append(Buffer(name, lower, lower + rng.randint(1, 3), rng.randint(0, 3)))
        instance = Instance(Problem(tuple(buffers)))
        b = instance.problem.buffers
        positions = range(len(b))
        degrees = instance.degrees()

        assert greedy_by_size.size_order(instance) == sorted(
            positions, key=lambda i: (-b[i].size, b[i].lower - b[i].upper, b[i].id)
        )
        assert greedy_by_conflicts.conflict_order(instance) == sorted(
            positions, key=lambda i: (-degrees[i], -b[i].size, b[i].id)
        )
        for name, key in best_fit.ORDERS.items():
            assert best_fit.order_by(instance, name) == sorted(positions, key=lambda i: key(b[i]))
