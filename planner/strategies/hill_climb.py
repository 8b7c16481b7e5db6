"""``hill-climb``: TVM USMP's randomised hill climbing over placement orders.

Like ``tir.usmp.algo.hill_climb``: start from the greedy-by-size order, place with first
fit, then repeatedly pick a buffer that reaches the top of the plan, pick one of its
conflicts placed before it (first level) and a conflict of that one placed before it (second
level, 75% of the time) or another first-level one, and swap the two in the order. A new
order is kept when its height is not worse; a worse one is kept with a small probability that
shrinks as the search goes on (USMP's simulated-annealing-like rule). The best plan seen is
returned. The search stops at the max-live lower bound, after ``MAX_ITERATIONS`` orders or at
the time limit; with a given seed it is deterministic as long as the time limit is not hit.

Only the suffix of the order from the first swapped position is placed again, since the
placement of a prefix does not depend on what comes after it.
"""

from __future__ import annotations

import random
import time

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies._placement import (
    UNPLACED,
    GraphTooLarge,
    Instance,
    finishing_by,
    place_against_neighbours,
    place_in_order,
    plan_height,
)
from planner.strategies.greedy_by_size import size_order

NAME = "hill-climb"
SUMMARY = "TVM USMP hill_climb: random swaps of the greedy order, keep if not worse"

DEFAULT_TIME_LIMIT = 1.0
MAX_ITERATIONS = 3000


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
    max_iterations: int = MAX_ITERATIONS,
) -> Placement:
    started = time.perf_counter()
    deadline = started + (DEFAULT_TIME_LIMIT if time_limit is None else time_limit)
    instance = Instance.of(problem)
    # The bound is the climb's target too: found once, before the deadline, since on a
    # large problem it takes a good share of the time that answering may take.
    bound = instance.max_live()
    # Without an explicit limit the default one bounds the climbing only, not the greedy
    # start: on a large problem that start alone may take longer.
    offsets, top = climb(
        instance,
        size_order(instance),
        random.Random(seed),
        deadline,
        max_iterations,
        target=bound,
        cap_start=time_limit is not None,
    )
    return Placement(instance.offsets_by_id(offsets), proven_optimal=top == bound)


def climb(
    instance: Instance,
    order: list[int],
    rng: random.Random,
    deadline: float,
    max_iterations: int,
    target: int | None = None,
    cap_start: bool = True,
) -> tuple[list[int], int | None]:
    """Hill-climb from ``order``; returns the offsets of the best order found and their
    height (None when the deadline came before it was worth measuring: validating the plan
    measures it anyway).

    Stops early once the height is at most ``target`` (default: the max-live bound).
    Re-placing uses the conflict graph where it is small, else the sweep (slower per try,
    but no memory per pair).
    """
    if target is None:
        target = instance.max_live()
    sizes = instance.sizes
    try:
        instance.conflicts()
        replace = place_against_neighbours
    except GraphTooLarge:
        replace = place_in_order
    offsets = place_in_order(instance, order, deadline=deadline if cap_start else None)
    # Climbing stops in time to turn the plan into the answer. The bookkeeping below (a list
    # and a dict of the order) costs about as much again: it is not started without the
    # time for both (on a loaded machine it took 1-2 s at a million buffers).
    bookkeeping_by = finishing_by(deadline, 3 * len(instance), instance) or deadline
    deadline = finishing_by(deadline, len(instance), instance) or deadline
    if time.perf_counter() > bookkeeping_by:
        return offsets, None
    # Fixed and zero-sized buffers are placed once and for all; the others get reordered.
    order = [i for i in order if sizes[i] > 0 and instance.fixed[i] is None]
    current = plan_height(instance, offsets)
    best, best_offsets = current, offsets
    if current <= target or len(order) < 2:
        return best_offsets, best
    position = {index: p for p, index in enumerate(order)}

    def earlier_conflicts(index: int) -> list[int]:
        mine = position[index]
        return [
            other
            for other in instance.neighbours(index)
            if other in position and position[other] < mine
        ]

    for attempt in range(1, max_iterations + 1):
        if time.perf_counter() > deadline:
            break
        top = [i for i in order if offsets[i] + sizes[i] == current]
        if not top:
            break  # a fixed buffer makes the height; no order can do better
        node = rng.choice(top)
        first_level = earlier_conflicts(node)
        if not first_level:
            continue
        second_level = [c2 for c1 in first_level for c2 in earlier_conflicts(c1)]
        one = rng.choice(first_level)
        if second_level and rng.random() < 0.75:
            two = rng.choice(second_level)
        else:
            two = rng.choice(first_level)
        if one == two:
            continue
        i, j = position[one], position[two]
        order[i], order[j] = two, one
        position[one], position[two] = j, i
        start = min(i, j)
        if replace is place_in_order and time.perf_counter() > deadline:
            # On a large problem finding the conflicts above took a while.
            break
        trial = list(offsets)
        for index in order[start:]:
            trial[index] = UNPLACED
        if replace is place_in_order:
            replace(instance, order[start:], offsets=trial, deadline=deadline)
            if time.perf_counter() > deadline:
                # On a large problem one re-placing may take long, and the deadline stopped
                # it: the trial, its rest stacked on top, is almost surely worse, and
                # measuring it would take time that is not left.
                break
        else:
            replace(instance, order[start:], offsets=trial)
        trial_height = plan_height(instance, trial)
        worse_by = (trial_height - current) / current
        if trial_height <= current or rng.random() < 0.5 * worse_by / attempt:
            offsets, current = trial, trial_height
            if current < best:
                best, best_offsets = current, trial
                if best <= target:
                    break
        else:
            order[i], order[j] = one, two
            position[one], position[two] = i, j
    return best_offsets, best
