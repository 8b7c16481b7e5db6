"""``best-fit``: the TFLite / XLA heap-simulator style greedy by size with best fit.

Each buffer goes into the smallest gap between the already-placed buffers it is live
together with that can hold it, or on top of them when no gap can. Like XLA's
``ChooseBestHeapAlgorithm``, the placement is run over a few orders and the lowest plan
wins:

* XLA's spatial order: size descending, then lifetime descending;
* XLA's temporal order: lifetime descending, then size descending;
* TFLite's greedy-by-size order: size descending, ties in the problem's (creation) order.

Remaining ties keep the problem's order (Python's sort is stable). The spatial order alone
reproduces MiniMalloc's published best-fit figures; the TFLite order is what packs chains of
equal-sized activations (as in CNNs) tightly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from planner.plan import Placement
from planner.problem import Buffer, Problem
from planner.strategies._placement import Instance, finishing_by, place_in_order, plan_height

NAME = "best-fit"
SUMMARY = "TFLite/XLA greedy by size, best fit: smallest gap that holds the buffer"

ORDERS: dict[str, Callable[[Buffer], tuple[int, ...]]] = {
    "xla-spatial": lambda b: (-b.size, b.lower - b.upper),
    "xla-temporal": lambda b: (b.lower - b.upper, -b.size),
    "tflite": lambda b: (-b.size,),
}


def order_by(instance: Instance, name: str) -> list[int]:
    """Positions in the named order (ties keep the problem's order)."""
    arrays = instance.sort_keys()
    if arrays is not None:
        # The same order by numpy (lexsort is stable; its last key is the first criterion).
        by_size, by_lifetime = arrays
        keys = {
            "xla-spatial": (by_lifetime, by_size),
            "xla-temporal": (by_size, by_lifetime),
            "tflite": (by_size,),
        }[name]
        return np.lexsort(keys).tolist()
    key = ORDERS[name]
    buffers = instance.problem.buffers
    return sorted(range(len(buffers)), key=lambda i: key(buffers[i]))


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    return Placement(instance_plan(Instance.of(problem), deadline)[0])


def instance_plan(instance: Instance, deadline: float | None) -> tuple[dict[str, int], int]:
    """The lowest plan of the orders (by id) and its height. After ``deadline`` no further
    order is tried, and the one under way stacks its remaining buffers on top."""
    best: list[int] | None = None
    best_height = 0
    # No further order is started when only the time to answer is left.
    last_start = finishing_by(deadline, 2 * len(instance))
    for name in ORDERS:
        if best is not None and last_start is not None and time.perf_counter() > last_start:
            break
        offsets = place_in_order(instance, order_by(instance, name), fit="best", deadline=deadline)
        top = plan_height(instance, offsets)
        if best is None or top < best_height:
            best, best_height = offsets, top
    return instance.offsets_by_id(best or []), best_height
