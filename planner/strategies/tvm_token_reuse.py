"""``tvm-token-reuse``: whole-buffer reuse as TVM Relax's StaticPlanBlockMemory does it.

Re-implements ``TokenAllocator1D::RequestReuse`` of src/relax/transform/
static_plan_block_memory.cc over our problems. Time is swept in order; a buffer whose interval
has ended gives its storage token back to the free pool (a multimap keyed by token size).
A new buffer of ``size`` bytes looks at the free tokens with sizes in
``[size / 16, size * 16]``:

1. the smallest free token of at least ``size`` bytes (the first released among equal
   sizes), else
2. the largest free token smaller than ``size`` (the last released among equal sizes),
   which is grown to ``size``, else
3. a new token.

Tokens never share memory, so the plan lays them out one after another: a buffer's offset
is its token's offset and the height is the sum of the token sizes (TVM allocates one
storage object per token instead). TVM keeps one pool per dtype; our buffers have none, so
there is one pool. Buffers with a fixed offset keep it, and the tokens start above them.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort

from planner.plan import Placement
from planner.problem import Problem
from planner.strategies._placement import align_up

NAME = "tvm-token-reuse"
SUMMARY = "TVM Relax StaticPlanBlockMemory: reuse a whole freed buffer (token), grow if needed"

# TVM's TokenAllocator1D::match_range_.
MATCH_RANGE = 16


def assign_tokens(problem: Problem) -> tuple[list[int], list[int], list[int]]:
    """Give each planned buffer a token.

    Returns ``(token_of, token_sizes, token_alignments)`` where ``token_of[i]`` is the token
    of ``problem.buffers[i]`` (-1 for fixed-offset and zero-sized buffers).
    """
    buffers = problem.buffers
    token_of = [-1] * len(buffers)
    token_sizes: list[int] = []
    token_alignments: list[int] = []
    planned = [i for i, b in enumerate(buffers) if b.offset is None and b.size > 0]
    # At one instant, the buffers that end there release their tokens before the buffers that
    # start there request one: the intervals are half-open.
    events = [(buffers[i].lower, 1, i) for i in planned]
    events += [(buffers[i].upper, 0, i) for i in planned]
    events.sort()
    # The free pool: (size, release sequence, token), sorted. Ties in size keep the release
    # order, as std::multimap does with equal keys.
    pool: list[tuple[int, int, int]] = []
    released = 0
    for _, kind, index in events:
        if kind == 0:
            insort(pool, (token_sizes[token_of[index]], released, token_of[index]))
            released += 1
            continue
        size = buffers[index].size
        # The multimap bounds: begin = lower_bound(size / 16), mid = lower_bound(size),
        # end = upper_bound(size * 16). (TVM divides int64 sizes, hence //.)
        begin = bisect_left(pool, (size // MATCH_RANGE, -1, -1))
        mid = bisect_left(pool, (size, -1, -1))
        end = bisect_left(pool, (size * MATCH_RANGE + 1, -1, -1))
        if mid != end:
            _, _, token = pool.pop(mid)
        elif mid != begin:
            _, _, token = pool.pop(mid - 1)
            token_sizes[token] = size
        else:
            token = len(token_sizes)
            token_sizes.append(size)
            token_alignments.append(1)
        token_of[index] = token
        token_alignments[token] = math.lcm(token_alignments[token], buffers[index].alignment)
    return token_of, token_sizes, token_alignments


def plan(
    problem: Problem,
    *,
    capacity: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> Placement:
    token_of, token_sizes, token_alignments = assign_tokens(problem)
    top = max((b.offset + b.size for b in problem.buffers if b.offset is not None), default=0)
    token_offsets = []
    for size, alignment in zip(token_sizes, token_alignments, strict=True):
        offset = align_up(top, alignment)
        token_offsets.append(offset)
        top = offset + size
    offsets: dict[str, int] = {}
    for buffer, token in zip(problem.buffers, token_of, strict=True):
        if buffer.offset is not None:
            offsets[buffer.id] = buffer.offset
        elif token < 0:
            offsets[buffer.id] = 0
        else:
            offsets[buffer.id] = token_offsets[token]
    return Placement(offsets)
