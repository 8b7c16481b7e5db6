"""``optimal``: exact search (MiniMalloc-style), anytime when minimising.

The best plan of the fast heuristics is the incumbent. Then a canonical-solution branch and
bound (see ``_canonical_search``) answers "is there a plan within C bytes?":

* with a ``capacity``: if no heuristic fits, first a short try at the max-live lower bound
  (often enough, and then the plan is proven optimal), then the search at the capacity,
  which either finds a plan within it or proves that none exists;
* without one: a short try at the lower bound, then a bisection between the largest height
  known impossible and the best height found, each probe with a share of the time left.
  Probes that time out count as "not proven"; the plan is reported proven optimal only when
  every height below it was shown impossible (or it meets the lower bound).

Heights are searched in multiples of the gcd of the sizes and alignments, since canonical
plans only have such heights.
"""

from __future__ import annotations

import math
import time

from planner.plan import Placement
from planner.problem import Problem, lower_bound
from planner.strategies import best_fit, greedy_by_conflicts, greedy_by_size, tvm_token_reuse
from planner.strategies._canonical_search import FOUND, INFEASIBLE, CanonicalSearch
from planner.strategies._placement import Instance, plan_height
from planner.strategies.hill_climb import climb

NAME = "optimal"
SUMMARY = "exact canonical branch and bound (MiniMalloc-style), anytime under a time limit"

DEFAULT_TIME_LIMIT = 10.0
# The first try at the lower bound gets this share of the time, at most LOWER_BOUND_SECONDS;
# hill climbing (when minimising) gets HILL_CLIMB_SHARE.
LOWER_BOUND_SHARE = 0.1
LOWER_BOUND_SECONDS = 2.0
HILL_CLIMB_SHARE = 0.1


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
        self.instance = Instance.of(problem)
        fixed_top = max(
            (b.offset + b.size for b in problem.buffers if b.offset is not None), default=0
        )
        self.bound = max(lower_bound(problem), fixed_top)
        self.step = (
            math.gcd(
                *(b.size for b in problem.buffers),
                *(b.alignment for b in problem.buffers),
                *(b.offset for b in problem.buffers if b.offset is not None),
            )
            or 1
        )
        self.best: dict[str, int] = {}
        self.best_height = -1
        self.search: CanonicalSearch | None = None

    # ----------------------------------------------------------------------------------

    def run(self, capacity: int | None) -> Placement:
        self._take_heuristics()
        if self.best_height <= self.bound:
            return Placement(self.best, proven_optimal=True)
        if capacity is not None:
            return self._fit(capacity)
        return self._minimise()

    def _offer(self, offsets: dict[str, int]) -> None:
        top = max((offsets[b.id] + b.size for b in self.problem.buffers), default=0)
        if self.best_height < 0 or top < self.best_height:
            self.best, self.best_height = offsets, top

    def _take_heuristics(self) -> None:
        for module in (best_fit, greedy_by_size, greedy_by_conflicts, tvm_token_reuse):
            self._offer(module.plan(self.problem).offsets)

    def _hill_climb(self, seconds: float) -> None:
        import random

        instance = self.instance
        offsets = climb(
            instance,
            greedy_by_size.size_order(instance),
            random.Random(self.seed),
            min(self.deadline, time.perf_counter() + seconds),
            max_iterations=10**9,
            target=self.bound,
        )
        if plan_height(instance, offsets) < self.best_height:
            self._offer(instance.offsets_by_id(offsets))

    def _probe(self, capacity: int, seconds: float) -> str:
        """Search for a plan within ``capacity``; keep it if found. Returns the status."""
        if self.search is None:
            self.search = CanonicalSearch(self.instance)
        deadline = min(self.deadline, time.perf_counter() + max(seconds, 0.0))
        result = self.search.solve(capacity, deadline)
        if result.status == FOUND:
            self._offer(self._complete(result.offsets))
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
            return Placement(self.best, proven_optimal=False)
        if capacity < self.bound:
            # Nothing fits; the incumbent is what we can offer.
            return Placement(self.best)
        if self.bound < capacity:
            if self._probe(self.bound, self._lower_bound_seconds()) == FOUND:
                return Placement(self.best, proven_optimal=True)
        status = self._probe(capacity, self._left())
        proven = status == FOUND and self.best_height <= self.bound
        return Placement(self.best, proven_optimal=proven)

    def _minimise(self) -> Placement:
        status = self._probe(self.bound, self._lower_bound_seconds())
        if status == FOUND:
            return Placement(self.best, proven_optimal=True)
        if self._left() > 0:
            self._hill_climb(self.budget * HILL_CLIMB_SHARE)
        step = self.step
        # Heights below ``low`` are impossible (proven unless ``proven`` is False).
        low = self.bound + 1 if status == INFEASIBLE else self.bound
        proven = status == INFEASIBLE
        low = -(-low // step) * step
        while low < self.best_height and self._left() > 0:
            units = (self.best_height - low) // step
            middle = low + (units // 2) * step
            status = self._probe(middle, self._left() / 2)
            if status == FOUND:
                continue  # _offer lowered best_height to at most middle
            proven = proven and status == INFEASIBLE
            low = middle + step
        return Placement(self.best, proven_optimal=proven and low >= self.best_height)
