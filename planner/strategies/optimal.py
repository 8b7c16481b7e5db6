"""``optimal``: exact search (MiniMalloc-style), anytime when minimising.

The best plan of the fast heuristics is the incumbent; they run under the same deadline as
the search (a heuristic caught by it stacks what it has left on top, so there is always a
valid plan). Then a canonical-solution branch and bound (see ``_canonical_search``) answers
"is there a plan within C bytes?":

* with a ``capacity``: if no heuristic fits, first a short try at the max-live lower bound
  (often enough, and then the plan is proven optimal), then the search at the capacity,
  which either finds a plan within it or proves that none exists;
* without one: a short try at the lower bound, then a bisection between the lowest height
  not yet ruled out and the best height found, each probe with a share of the time left,
  and at the end a probe just below the best height with all the time left, to prove it.
  A probe that shows "no plan within C" proves every height up to C impossible, whatever
  the other probes did: the returned Placement carries that proven lower bound, so a run
  that cannot close the gap reports how wide it is. A probe that times out proves nothing;
  the bisection then looks higher.

Heights are searched in multiples of the gcd of the sizes and alignments, since canonical
plans only have such heights. The exact search holds numbers in int64 and the conflict graph
in memory, so it is skipped (the answer is then the best heuristic plan, with the max-live
bound) when the sums could overflow or the graph would be too large.
"""

from __future__ import annotations

import logging
import math
import random
import time

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies import best_fit, greedy_by_conflicts, greedy_by_size, tvm_token_reuse
from planner.strategies._canonical_search import FOUND, INFEASIBLE, CanonicalSearch
from planner.strategies._placement import (
    GraphTooLarge,
    Instance,
    finishing_by,
    place_in_order,
    plan_height,
)
from planner.strategies.hill_climb import climb

log = logging.getLogger(__name__)

NAME = "optimal"
SUMMARY = "exact canonical branch and bound (MiniMalloc-style), anytime under a time limit"

DEFAULT_TIME_LIMIT = 10.0
# The first try at the lower bound gets this share of the time, at most LOWER_BOUND_SECONDS;
# hill climbing (when minimising) gets HILL_CLIMB_SHARE.
LOWER_BOUND_SHARE = 0.25
LOWER_BOUND_SECONDS = 15.0
HILL_CLIMB_SHARE = 0.1
# A bisection probe gets at most this share of the time (at least a second).
PROBE_SHARE = 0.05
# The exact search keeps offsets, floors and section totals in int64.
EXACT_SEARCH_MAX = 1 << 61


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    started = time.perf_counter()
    budget = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = started + budget
    return _Optimiser(problem, deadline, budget, seed).run(capacity)


class _Optimiser:
    def __init__(self, problem: Problem, deadline: float, budget: float, seed: int) -> None:
        self.problem = problem
        self.deadline = deadline
        self.budget = budget
        self.seed = seed
        instance = self.instance = Instance.of(problem)
        # The max-live bound, or the fixed buffers' top when higher (no plan is lower).
        self.bound = instance.lowest_height()
        self.step = (
            math.gcd(
                math.gcd(*instance.sizes),
                math.gcd(*instance.alignments),
                *(instance.fixed[i] for i in instance.fixed_positions),
            )
            or 1
        )
        # Every height below this is impossible (the max-live bound, then what probes prove).
        self.proven_low = self._round_up(self.bound)
        self.best: dict[str, int] = {}
        self.best_height = -1
        self.search: CanonicalSearch | None = None
        self.exact = self._exact_search_applies()

    def _round_up(self, height: int) -> int:
        return -(-height // self.step) * self.step

    def _exact_search_applies(self) -> bool:
        instance = self.instance
        largest = sum(instance.sizes) + max(
            max(instance.alignments, default=0),
            max(
                (instance.alignments[i] + instance.fixed[i] for i in instance.fixed_positions),
                default=0,
            ),
        )
        if largest >= EXACT_SEARCH_MAX:
            log.warning(
                "optimal: sizes sum to %d, too large for the exact search; "
                "returning the best heuristic plan",
                largest,
            )
            return False
        try:
            self.instance.conflicts()
        except GraphTooLarge as error:
            log.warning(
                "optimal: %d conflicting pairs, too many for the exact search; "
                "returning the best heuristic plan",
                error.pairs,
            )
            return False
        return True

    def _placement(self, proven: bool = False) -> Placement:
        proven = proven or self.best_height <= self.proven_low
        low = self.best_height if proven else self.proven_low
        return Placement(self.best, proven_optimal=proven, lower_bound=low)

    # ----------------------------------------------------------------------------------

    def run(self, capacity: int | None) -> Placement:
        self._take_heuristics()
        if self.best_height <= self.bound:
            return self._placement(proven=True)
        if not self.exact:
            return self._placement()
        if capacity is not None:
            return self._fit(capacity)
        return self._minimise()

    def _offer(self, offsets: dict[str, int], top: int | None = None) -> None:
        if top is None:
            top = max((offsets[b.id] + b.size for b in self.problem.buffers), default=0)
        if self.best_height < 0 or top < self.best_height:
            self.best, self.best_height = offsets, top

    def _take_heuristics(self) -> None:
        # Cheapest first; each one under the common deadline. The first always runs, so
        # that there is a plan (caught by the deadline it stacks what is left on top).
        instance = self.instance
        # The heights come from the placements: measuring them again by id would take a
        # while on a large problem, after the deadline.
        offsets, top = best_fit.instance_plan(instance, self.deadline, target=self.bound)
        self._offer(offsets, top)
        # None is started when only the time to answer is left (it grows with the size).
        last_start = finishing_by(self.deadline, 2 * len(instance), instance) or self.deadline
        for order in (greedy_by_size.size_order, greedy_by_conflicts.conflict_order):
            if time.perf_counter() > last_start or self.best_height <= self.bound:
                return
            placed = place_in_order(instance, order(instance), deadline=self.deadline)
            self._offer(instance.offsets_by_id(placed), plan_height(instance, placed))
        if time.perf_counter() <= last_start and self.best_height > self.bound:
            self._offer(tvm_token_reuse.plan(self.problem).offsets)

    def _hill_climb(self, seconds: float) -> None:
        instance = self.instance
        offsets, top = climb(
            instance,
            greedy_by_size.size_order(instance),
            random.Random(self.seed),
            min(self.deadline, time.perf_counter() + seconds),
            max_iterations=10**9,
            target=self.bound,
        )
        if top is None:
            top = plan_height(instance, offsets)
        if top < self.best_height:
            self._offer(instance.offsets_by_id(offsets), top)

    def _probe(self, capacity: int, seconds: float) -> str:
        """Search for a plan within ``capacity``; keep it if found, raise the proven bound
        if there is none. Returns the status."""
        if self.search is None:
            self.search = CanonicalSearch(self.instance)
        deadline = min(self.deadline, time.perf_counter() + max(seconds, 0.0))
        result = self.search.solve(capacity, deadline)
        if result.status == FOUND:
            self._offer(self._complete(result.offsets))
        elif result.status == INFEASIBLE:
            self.proven_low = max(self.proven_low, self._round_up(capacity + 1))
        return result.status

    def _complete(self, free_offsets: list[int]) -> dict[str, int]:
        assert self.search is not None
        offsets: dict[str, int] = {}
        for buffer in self.problem.buffers:
            offsets[buffer.id] = buffer.offset if buffer.offset is not None else 0
        buffers = self.problem.buffers
        for local, position in enumerate(self.search.free.tolist()):
            offsets[buffers[position].id] = free_offsets[local]
        return offsets

    def _lower_bound_seconds(self) -> float:
        return min(self.budget * LOWER_BOUND_SHARE, LOWER_BOUND_SECONDS)

    def _left(self) -> float:
        return self.deadline - time.perf_counter()

    # ----------------------------------------------------------------------------------

    def _fit(self, capacity: int) -> Placement:
        if self.best_height <= capacity:
            return self._placement()
        if capacity < self.bound:
            # Nothing fits; the incumbent is what we can offer.
            return self._placement()
        if self.bound < capacity:
            if self._probe(self.bound, self._lower_bound_seconds()) == FOUND:
                return self._placement(proven=True)
        self._probe(capacity, self._left())
        return self._placement()

    def _minimise(self) -> Placement:
        step = self.step
        status = self._probe(self.proven_low, self._lower_bound_seconds())
        if status == FOUND:
            return self._placement(proven=True)
        if self._left() > 0:
            self._hill_climb(self.budget * HILL_CLIMB_SHARE)
        # Heights below ``low`` are not searched again: impossible, or a probe there timed
        # out (then only ``proven_low`` is proven).
        low = self.proven_low if status == INFEASIBLE else self.proven_low + step
        while self.best_height > self.proven_low and self._left() > 0:
            if low < self.best_height:
                # Short probes: many cheap tries lower the best height faster than a few
                # long ones; the proof at the end gets the time that is left.
                units = (self.best_height - low) // step
                seconds = min(self._left() / 2, max(self.budget * PROBE_SHARE, 1.0))
                middle = low + (units // 2) * step
            else:
                # Nothing left to bisect: try to prove the best height optimal.
                middle, seconds = self.best_height - step, self._left()
            middle = max(middle, self.proven_low)
            status = self._probe(middle, seconds)
            if status != FOUND:  # found: _offer lowered best_height to at most middle
                low = max(low, middle + step)
        return self._placement()
