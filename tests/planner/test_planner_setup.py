"""The setup that no time limit cuts short (the instance's arrays, the orders, the bounds)
is done by numpy without its slow paths, and gives exactly what the plain definitions give."""

from __future__ import annotations

import itertools
import random
import time
import types

import numpy as np
import pytest

from planner.problem import Buffer, Problem, lower_bound
from planner.strategies import (
    _placement,
    best_fit,
    greedy_by_conflicts,
    greedy_by_size,
    hill_climb,
    optimal,
)
from planner.strategies._placement import Instance, argsort_keys


def tied_problem(count: int, seed: int = 0, fixed: bool = False) -> Problem:
    """Many equal (size, lifetime) pairs, so the orders fall back on ids; ids whose string
    order is not their numeric order; interval ends shared by many buffers."""
    rng = random.Random(seed)
    buffers = []
    for k in range(count):
        lower = rng.randrange(0, count // 4 + 1)
        offset = None
        if fixed and k % 97 == 0:
            offset = 1 << 20 + k % 3
        buffers.append(
            Buffer(
                rng.choice("abc") + str(rng.randrange(10**6)) + f"-{k}",
                lower,
                lower + rng.choice((1, 2, 3, 5)),
                rng.choice((0, 16, 32, 48, 64)),
                offset=offset,
            )
        )
    return Problem(tuple(buffers))


def sweep_bound(problem: Problem) -> int:
    """The max-live bound by its definition: the event sweep, ends first at equal times."""
    events = sorted(
        [(b.lower, b.size) for b in problem if b.size]
        + [(b.upper, -b.size) for b in problem if b.size]
    )
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_argsort_keys_is_lexsort(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    small = rng.integers(-3, 4, n)
    wide = rng.integers(-(1 << 40), 1 << 40, n)
    huge = rng.integers(-(1 << 62), 1 << 62, n)  # too wide to fold: lexsort is used
    for keys in ((small,), (small, wide), (wide, small, small), (small, huge), (huge, small)):
        assert np.array_equal(argsort_keys(*keys), np.lexsort(keys[::-1]))
    assert len(argsort_keys(small[:0], small[:0])) == 0


@pytest.mark.parametrize("count", [50, 3000])
def test_orders_are_the_sorted_definitions(count):
    problem = tied_problem(count, seed=count)
    buffers = problem.buffers
    instance = Instance(problem)
    degrees = instance.degrees()
    positions = range(len(buffers))
    assert greedy_by_size.size_order(instance) == sorted(
        positions,
        key=lambda i: (-buffers[i].size, buffers[i].lower - buffers[i].upper, buffers[i].id),
    )
    assert greedy_by_conflicts.conflict_order(instance) == sorted(
        positions, key=lambda i: (-degrees[i], -buffers[i].size, buffers[i].id)
    )
    for name, key in best_fit.ORDERS.items():
        assert best_fit.order_by(instance, name) == sorted(positions, key=lambda i: key(buffers[i]))


@pytest.mark.parametrize("count", [60, 3000])
def test_bounds_and_counts_are_the_definitions(count):
    problem = tied_problem(count, seed=7, fixed=True)
    instance = Instance(problem)
    expected = sweep_bound(problem)
    assert lower_bound(problem) == expected
    assert instance.max_live() == expected
    fixed_top = max((b.offset + b.size for b in problem if b.offset is not None), default=0)
    assert instance.lowest_height() == max(expected, fixed_top)
    if count <= 100:
        real = [b for b in problem if b.size]
        pairs = sum(1 for i, a in enumerate(real) for b in real[i + 1 :] if a.overlaps(b))
        assert instance.pair_count() == pairs
    assert instance.slot_lo == instance.slot_lo_array.tolist()
    assert sorted(set(instance.fixed_positions)) == [
        i for i, b in enumerate(problem.buffers) if b.offset is not None
    ]


@pytest.fixture
def without_slow_numpy(monkeypatch):
    """np.unique took 2 s and a two-key np.lexsort 0.6 s on a million buffers (numpy 2.4),
    where a sort takes 0.1 s: the setup must not use them when its keys fit int64."""

    def refuse(*args, **kwargs):
        raise AssertionError("slow numpy path used in the setup")

    monkeypatch.setattr(np, "unique", refuse)
    monkeypatch.setattr(np, "lexsort", refuse)


def test_setup_avoids_slow_numpy_paths(without_slow_numpy):
    problem = tied_problem(3000, seed=1, fixed=True)
    instance = Instance(problem)
    greedy_by_size.size_order(instance)
    greedy_by_conflicts.conflict_order(instance)
    for name in best_fit.ORDERS:
        best_fit.order_by(instance, name)
    instance.lowest_height()
    instance.pair_count()
    instance.batch_state()
    lower_bound(problem)


def test_large_heuristics_avoid_slow_numpy_paths(without_slow_numpy):
    # 25,000 buffers: the batched placement; hill-climb's and optimal's bounds come from
    # the instance, not from a second sweep over the buffers.
    rng = random.Random(5)
    buffers = [
        Buffer(f"r{k}", k, k + rng.randint(1, 20), rng.choice((64, 128, 192, 4096)))
        for k in range(25_000)
    ]
    problem = Problem(tuple(buffers))
    for strategy in (greedy_by_size, greedy_by_conflicts, best_fit):
        strategy.plan(problem)
    hill_climb.plan(problem, time_limit=0.5)
    # Disjoint lifetimes: the first heuristic plan is at the bound, so no exact search.
    disjoint = Problem(tuple(Buffer(f"d{k}", k, k + 1, 64 + k % 7) for k in range(2000)))
    assert optimal.plan(disjoint, time_limit=5).proven_optimal


def random_problem(count: int, seed: int = 5) -> Problem:
    rng = random.Random(seed)
    return Problem(
        tuple(
            Buffer(f"r{k}", k, k + rng.randint(1, 60), rng.choice((64, 128, 192, 4096)))
            for k in range(count)
        )
    )


def test_answer_reserve_scales_with_the_instance_build_time():
    instance = Instance(random_problem(100))
    instance.build_seconds = 0.5
    # A slow machine (half a second to build 100 buffers) keeps ANSWER_PER_BUILD times that.
    assert _placement.finishing_by(10.0, 100, instance) == pytest.approx(
        10.0 - _placement.ANSWER_PER_BUILD * 0.5
    )
    assert _placement.finishing_by(10.0, 200, instance) == pytest.approx(
        10.0 - 2 * _placement.ANSWER_PER_BUILD * 0.5
    )
    instance.build_seconds = 0.0
    assert _placement.finishing_by(10.0, 100, instance) == pytest.approx(10.0 - 1e-4)
    assert _placement.finishing_by(None, 100, instance) is None


def test_batched_pass_does_not_start_a_chunk_it_cannot_finish(monkeypatch):
    problem = random_problem(25_000)
    instance = Instance(problem)
    assert _placement.batches_apply(instance)
    order = greedy_by_size.size_order(instance)
    full = _placement.place_in_batches(instance, order)
    instance.build_seconds = 0.0
    # A clock that moves one second each time it is read: the first chunk takes a second,
    # so the second (at least as long) would end past a deadline 2.5 s away.
    clock = itertools.count()
    monkeypatch.setattr(
        _placement, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock)))
    )
    reserve = _placement.FINISH_SECONDS_PER_BUFFER * len(instance)
    cut = _placement.place_in_batches(instance, order, deadline=2.5 + reserve)
    same = next(k for k, i in enumerate(order) if cut[i] != full[i])
    first_chunk = int(_placement.BATCH_PAIRS / (2 * instance.pair_count() / len(order) + 1))
    assert 0 < same <= first_chunk


def test_hill_climb_skips_its_bookkeeping_without_the_time_for_it():
    # On a slow machine (as the instance's build time tells) the climb's bookkeeping, about
    # as long as answering, is not started when only the time to answer is left.
    instance = Instance(random_problem(300))
    instance.build_seconds = 1.0  # the reserve: 2 s per 300 buffers answered
    started = time.perf_counter()
    offsets, top = hill_climb.climb(
        instance,
        greedy_by_size.size_order(instance),
        random.Random(0),
        started + 4.0,
        max_iterations=10**6,
        target=0,
    )
    assert top is None
    assert time.perf_counter() - started < 2.0
    assert len(offsets) == 300
