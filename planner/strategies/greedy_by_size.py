"""``greedy-by-size``: TVM USMP's greedy_by_size (RFC 0009), first fit in size order.

Buffers are taken largest first (ties: longer lifetime first, then id) and each one goes to
the lowest aligned offset that misses every already-placed buffer it is live together with.
"""

from __future__ import annotations

import time

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies._placement import Instance, place_in_order

NAME = "greedy-by-size"
SUMMARY = "TVM USMP greedy_by_size: largest first, lowest offset that fits (first fit)"


def size_order(instance: Instance) -> list[int]:
    """Positions sorted by size descending, then lifetime descending, then id."""
    buffers = instance.problem.buffers
    arrays = instance.sort_keys()
    if arrays is not None:
        by_size, by_lifetime = arrays
        return instance.sorted_by(by_size, by_lifetime)
    return sorted(
        range(len(buffers)),
        key=lambda i: (-buffers[i].size, buffers[i].lower - buffers[i].upper, buffers[i].id),
    )


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    instance = Instance.of(problem)
    offsets = place_in_order(instance, size_order(instance), fit="first", deadline=deadline)
    return Placement(instance.offsets_by_id(offsets))
