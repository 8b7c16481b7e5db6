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

The result is the lowest of the three plans (the first of them on a tie), found with less
work: no further order is placed once a plan is at the lower bound (the max-live bound, or
the fixed buffers' top: no plan is lower), and a pass is abandoned as soon as a buffer it
places reaches the height of the best plan so far (its plan could not be lower).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from planner.plan import Placement
from planner.problem import Buffer, Problem
from planner.strategies._placement import (
    Instance,
    PassAbandoned,
    argsort_keys,
    finishing_by,
    place_in_order,
    plan_height,
)

log = logging.getLogger(__name__)

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
        # The same order by numpy (a stable sort, the first key first).
        by_size, by_lifetime = arrays
        keys = {
            "xla-spatial": (by_size, by_lifetime),
            "xla-temporal": (by_lifetime, by_size),
            "tflite": (by_size,),
        }[name]
        return argsort_keys(*keys).tolist()
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
    instance = Instance.of(problem)
    offsets, height, at_bound = lowest_plan(instance, deadline)
    return Placement(
        instance.offsets_by_id(offsets),
        proven_optimal=at_bound,
        lower_bound=height if at_bound else None,
    )


def instance_plan(
    instance: Instance, deadline: float | None, target: int | None = None
) -> tuple[dict[str, int], int]:
    """The lowest plan of the orders (by id) and its height (see ``lowest_plan``)."""
    offsets, top, _ = lowest_plan(instance, deadline, target)
    return instance.offsets_by_id(offsets), top


def lowest_plan(
    instance: Instance, deadline: float | None, target: int | None = None
) -> tuple[list[int], int, bool]:
    """The lowest plan of the orders (by position), its height, and whether it is at
    ``target`` (default: ``instance.lowest_height()``, below which no plan is).

    No further order is placed once a plan is at ``target``, and a pass is abandoned once it
    reaches the best height so far: the same height as placing every order, and the same
    plan (the first order's on a tie). After ``deadline`` no further order is tried, and the
    one under way stacks its remaining buffers on top.
    """
    best: list[int] | None = None
    best_height = 0
    best_name = ""
    # No further order is started when only the time to answer is left.
    last_start = finishing_by(deadline, 2 * len(instance), instance)
    for name in ORDERS:
        if best is not None:
            if last_start is not None and time.perf_counter() > last_start:
                break
            # Found once the first plan is there: a problem that it does not settle pays
            # for the bound (a numpy sort) rather than another pass.
            if target is None:
                target = instance.lowest_height()
            if best_height <= target:
                log.debug("best-fit: %s is at the lower bound %d", best_name, target)
                break
        try:
            offsets = place_in_order(
                instance,
                order_by(instance, name),
                fit="best",
                deadline=deadline,
                ceiling=None if best is None else best_height,
            )
        except PassAbandoned:
            log.debug("best-fit: %s abandoned at %d", name, best_height)
            continue
        top = plan_height(instance, offsets)
        if best is None or top < best_height:
            best, best_height, best_name = offsets, top, name
    at_target = best is not None and target is not None and best_height <= target
    return best or [], best_height, at_target
