"""Plans (an offset per buffer): their height, their validation, and the solution record."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.problem import Problem

__all__ = [
    "CapacityError",
    "InvalidPlan",
    "Placement",
    "Solution",
    "height",
    "validate_plan",
]


class InvalidPlan(ValueError):
    """A plan that breaks the problem: overlap, misalignment, a moved fixed buffer, ..."""


class CapacityError(InvalidPlan):
    """A plan, otherwise valid, that is higher than the capacity it was checked against."""


def height(problem: Problem, offsets: Mapping[str, int]) -> int:
    """The highest address in use, ``max(offset + size)``; 0 for an empty problem."""
    return max((offsets[buffer.id] + buffer.size for buffer in problem.buffers), default=0)


def validate_plan(
    problem: Problem, offsets: Mapping[str, int], capacity: int | None = None
) -> None:
    """Raise InvalidPlan unless ``offsets`` is a valid plan for ``problem``.

    Checks that every buffer (and nothing else) has a non-negative integer offset that is a
    multiple of its alignment, that fixed offsets are kept, that no two buffers live at the
    same instant share an address, and (with ``capacity``) that the plan fits; the capacity
    overflow raises CapacityError. The overlap check is a sweep over time that keeps the live
    buffers sorted by address and compares each new buffer with its two address neighbours:
    O(n log n) comparisons (plus list shifts that are memmoves).
    """
    missing = [buffer.id for buffer in problem.buffers if buffer.id not in offsets]
    if missing:
        shown = ", ".join(repr(name) for name in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InvalidPlan(f"no offset for buffer(s) {shown}{more}")
    if len(offsets) != len(problem.buffers):
        extra = sorted(set(offsets) - {buffer.id for buffer in problem.buffers})
        raise InvalidPlan(f"offset(s) for unknown buffer(s) {', '.join(map(repr, extra[:5]))}")

    for buffer in problem.buffers:
        offset = offsets[buffer.id]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise InvalidPlan(
                f"buffer {buffer.id!r}: offset must be a non-negative integer, got {offset!r}"
            )
        if offset % buffer.alignment:
            raise InvalidPlan(
                f"buffer {buffer.id!r}: offset {offset} is not a multiple of its alignment "
                f"{buffer.alignment}"
            )
        if buffer.offset is not None and offset != buffer.offset:
            raise InvalidPlan(
                f"buffer {buffer.id!r}: has the fixed offset {buffer.offset} but was moved "
                f"to {offset}"
            )

    _check_overlaps(problem, offsets)

    if capacity is not None:
        top = height(problem, offsets)
        if top > capacity:
            highest = max(problem.buffers, key=lambda b: offsets[b.id] + b.size)
            raise CapacityError(
                f"plan height {top} exceeds the capacity {capacity} "
                f"(buffer {highest.id!r} ends at {offsets[highest.id] + highest.size})"
            )


def _check_overlaps(problem: Problem, offsets: Mapping[str, int]) -> None:
    # Zero-sized buffers occupy no address and cannot collide.
    events: list[tuple[int, int, int]] = []
    buffers = problem.buffers
    for index, buffer in enumerate(buffers):
        if buffer.size:
            # At equal times ends (kind 0) come before starts (kind 1): intervals are half-open.
            events.append((buffer.lower, 1, index))
            events.append((buffer.upper, 0, index))
    events.sort()
    # The live buffers never overlap each other, so their starts are distinct and sorting by
    # start also sorts them by end.
    starts: list[int] = []
    ends: list[int] = []
    owners: list[int] = []
    for _, kind, index in events:
        buffer = buffers[index]
        start = offsets[buffer.id]
        if kind == 0:
            position = bisect_left(starts, start)
            del starts[position], ends[position], owners[position]
            continue
        end = start + buffer.size
        position = bisect_left(starts, start)
        if position > 0 and ends[position - 1] > start:
            _raise_overlap(problem, offsets, owners[position - 1], index)
        if position < len(starts) and starts[position] < end:
            _raise_overlap(problem, offsets, owners[position], index)
        starts.insert(position, start)
        ends.insert(position, end)
        owners.insert(position, index)


def _raise_overlap(problem: Problem, offsets: Mapping[str, int], first: int, second: int) -> None:
    a, b = problem.buffers[first], problem.buffers[second]
    raise InvalidPlan(
        f"buffers {a.id!r} and {b.id!r} are both live over "
        f"[{max(a.lower, b.lower)}, {min(a.upper, b.upper)}) and share addresses: "
        f"{a.id!r} at [{offsets[a.id]}, {offsets[a.id] + a.size}), "
        f"{b.id!r} at [{offsets[b.id]}, {offsets[b.id] + b.size})"
    )


@dataclass(frozen=True)
class Placement:
    """What a strategy returns: an offset per buffer id, whether it is proven optimal, and
    (searching strategies) a proven lower bound on the height of any plan."""

    offsets: dict[str, int]
    proven_optimal: bool = False
    lower_bound: int | None = None


@dataclass
class Solution:
    """A validated plan and how it was made.

    ``fits`` is None when no capacity was given, else whether ``height <= capacity``.
    ``lower_bound`` is the max-live bound; ``proven_lower_bound`` the best bound known (the
    height itself when proven optimal, what a search proved, else the max-live bound).
    """

    strategy: str
    offsets: dict[str, int]
    height: int
    lower_bound: int
    seconds: float
    proven_optimal: bool
    fits: bool | None
    capacity: int | None = field(default=None, repr=False)
    proven_lower_bound: int = -1

    def __post_init__(self) -> None:
        if self.proven_lower_bound < 0:
            self.proven_lower_bound = self.lower_bound
        if self.proven_optimal:
            self.proven_lower_bound = self.height

    @property
    def ratio(self) -> float:
        """Height over the max-live lower bound (1.0 for an empty problem)."""
        return self.height / self.lower_bound if self.lower_bound else 1.0

    @property
    def gap(self) -> float:
        """How far the height may be above the optimum, as a share of the height (as MIP
        solvers report it): 0.0 when proven optimal."""
        if not self.height:
            return 0.0
        return (self.height - self.proven_lower_bound) / self.height

    def to_json(self) -> dict[str, Any]:
        """The summary line the CLI prints; ``buffers`` is the number of buffers planned."""
        return {
            "strategy": self.strategy,
            "buffers": len(self.offsets),
            "height": self.height,
            "lower_bound": self.lower_bound,
            "proven_lower_bound": self.proven_lower_bound,
            "gap": round(self.gap, 6),
            "seconds": round(self.seconds, 6),
            "proven_optimal": self.proven_optimal,
            "fits": self.fits,
        }
