"""``greedy-by-conflicts``: TVM USMP's greedy_by_conflicts (RFC 0009).

Buffers are taken by number of conflicts (buffers live at the same time) descending, then
by size descending, then by id, and each one goes to the lowest aligned offset that misses
its already-placed conflicts (first fit).
"""

from __future__ import annotations

import time

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies._placement import Instance, place_in_order

NAME = "greedy-by-conflicts"
SUMMARY = "TVM USMP greedy_by_conflicts: most conflicts first, lowest offset that fits"


def conflict_order(instance: Instance) -> list[int]:
    """Positions sorted by conflict count descending, then size descending, then id."""
    buffers = instance.problem.buffers
    arrays = instance.sort_keys()
    if arrays is not None:
        return instance.sorted_by(-instance.degree_array(), arrays[0])
    degrees = instance.degrees()
    return sorted(range(len(buffers)), key=lambda i: (-degrees[i], -buffers[i].size, buffers[i].id))


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    instance = Instance.of(problem)
    offsets = place_in_order(instance, conflict_order(instance), fit="first", deadline=deadline)
    return Placement(instance.offsets_by_id(offsets))
