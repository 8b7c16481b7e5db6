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

from collections.abc import Callable

from planner.plan import Placement
from planner.problem import Buffer, Problem
from planner.strategies._placement import Instance, place_in_order, plan_height

NAME = "best-fit"
SUMMARY = "TFLite/XLA greedy by size, best fit: smallest gap that holds the buffer"

ORDERS: dict[str, Callable[[Buffer], tuple[int, ...]]] = {
    "xla-spatial": lambda b: (-b.size, b.lower - b.upper),
    "xla-temporal": lambda b: (b.lower - b.upper, -b.size),
    "tflite": lambda b: (-b.size,),
}


def order_by(instance: Instance, name: str) -> list[int]:
    """Positions in the named order (ties keep the problem's order)."""
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
    instance = Instance.of(problem)
    best: list[int] | None = None
    for name in ORDERS:
        offsets = place_in_order(instance, order_by(instance, name), fit="best")
        if best is None or plan_height(instance, offsets) < plan_height(instance, best):
            best = offsets
    return Placement(instance.offsets_by_id(best or []))
