"""The registry of planning strategies, and ``solve``, which runs one and checks its plan.

Every strategy is a module of this package exposing ``NAME``, ``SUMMARY`` and

    plan(problem, *, capacity=None, time_limit=None, seed=0) -> Placement

where ``Placement`` holds the offsets by buffer id and whether they are proven optimal.
Heuristics ignore ``capacity``; ``time_limit`` (seconds) bounds every strategy (a heuristic
caught by it stacks the buffers it has not placed yet on top, so the plan stays valid) and
None means the strategy's own default (none for the heuristics).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from planner.plan import InvalidPlan, Placement, Solution, height, validate_plan
from planner.problem import Problem, ProblemError, lower_bound
from planner.strategies import (
    best_fit,
    greedy_by_conflicts,
    greedy_by_size,
    hill_climb,
    none,
    optimal,
    tvm_token_reuse,
)

__all__ = ["Strategy", "UnknownStrategy", "get_strategy", "solve", "strategy_names"]

PlanFunction = Callable[..., Placement]


class UnknownStrategy(KeyError, ValueError):
    """No strategy has this name; the message lists the known ones."""

    def __str__(self) -> str:
        # KeyError would show the message quoted like a repr.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    plan: PlanFunction

    def __call__(
        self,
        problem: Problem,
        *,
        capacity: int | None = None,
        time_limit: float | None = None,
        seed: int = 0,
    ) -> Placement:
        return self.plan(problem, capacity=capacity, time_limit=time_limit, seed=seed)


def _strategy(module: ModuleType) -> Strategy:
    return Strategy(name=module.NAME, summary=module.SUMMARY, plan=module.plan)


_STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in map(
        _strategy,
        (
            none,
            tvm_token_reuse,
            greedy_by_size,
            greedy_by_conflicts,
            best_fit,
            hill_climb,
            optimal,
        ),
    )
}


def strategy_names() -> list[str]:
    """The known strategy names, cheapest first."""
    return list(_STRATEGIES)


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name``; UnknownStrategy (a KeyError and ValueError) if none is."""
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; known strategies: {', '.join(_STRATEGIES)}"
        ) from None


def _check_fixed_offsets(problem: Problem) -> None:
    fixed = tuple(buffer for buffer in problem.buffers if buffer.offset is not None)
    if not fixed:
        return
    try:
        validate_plan(Problem(fixed), {buffer.id: buffer.offset for buffer in fixed})
    except InvalidPlan as error:
        raise ProblemError(f"the fixed offsets cannot all be kept: {error}") from None


def solve(
    problem: Problem,
    strategy: str,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Solution:
    """Plan ``problem`` with the named strategy and return the validated solution.

    The plan is always validated (InvalidPlan if a strategy is wrong). A plan higher than
    ``capacity`` is not an error: ``fits`` is then False. ``seconds`` is the strategy's own
    time; ``proven_optimal`` is also set when the height equals the max-live lower bound.
    Raises UnknownStrategy, and ProblemError when the fixed offsets overlap each other.
    """
    chosen = get_strategy(strategy)
    if capacity is not None and capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    if time_limit is not None and time_limit < 0:
        raise ValueError(f"time limit must be >= 0, got {time_limit}")
    _check_fixed_offsets(problem)
    started = time.perf_counter()
    placement = chosen(problem, capacity=capacity, time_limit=time_limit, seed=seed)
    seconds = time.perf_counter() - started
    offsets = dict(placement.offsets)
    validate_plan(problem, offsets)
    top = height(problem, offsets)
    bound = lower_bound(problem)
    return Solution(
        strategy=chosen.name,
        offsets=offsets,
        height=top,
        lower_bound=bound,
        seconds=seconds,
        proven_optimal=placement.proven_optimal or top == bound,
        fits=None if capacity is None else top <= capacity,
        capacity=capacity,
        proven_lower_bound=max(bound, min(placement.lower_bound or 0, top)),
    )
