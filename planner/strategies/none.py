"""``none``: no reuse at all, every buffer gets a slot of its own (the upper bound)."""

from __future__ import annotations

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies._placement import align_up

NAME = "none"
SUMMARY = "every buffer its own slot, no reuse (upper bound)"


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    """Stack the buffers in problem order above the highest fixed-offset buffer."""
    offsets: dict[str, int] = {}
    top = 0
    for buffer in problem.buffers:
        if buffer.offset is not None:
            offsets[buffer.id] = buffer.offset
            top = max(top, buffer.offset + buffer.size)
    for buffer in problem.buffers:
        if buffer.offset is None:
            offset = align_up(top, buffer.alignment)
            offsets[buffer.id] = offset
            top = offset + buffer.size
    return Placement(offsets)
