"""Random planning problems for the planner tests: drawn by hypothesis, or from a seed."""

import random

from hypothesis import strategies as st

from planner.problem import Buffer, Problem


@st.composite
def problems(
    draw,
    max_buffers: int = 8,
    *,
    min_buffers: int = 1,
    max_start: int = 12,
    max_length: int = 8,
    max_size: int = 12,
    alignments: tuple[int, ...] = (1, 1, 1, 2, 4, 8),
    fixed: bool = True,
):
    """Up to ``max_buffers`` buffers of random lifetime, size and alignment; with ``fixed``,
    sometimes one of them at a fixed offset (one alone can always be kept)."""
    count = draw(st.integers(min_buffers, max_buffers))
    buffers = []
    for k in range(count):
        lower = draw(st.integers(0, max_start))
        upper = lower + draw(st.integers(1, max_length))
        size = draw(st.integers(0, max_size))
        alignment = draw(st.sampled_from(alignments))
        buffers.append(Buffer(f"b{k}", lower, upper, size, alignment))
    if fixed and buffers and draw(st.booleans()):
        k = draw(st.integers(0, len(buffers) - 1))
        b = buffers[k]
        offset = draw(st.integers(0, 8)) * b.alignment
        buffers[k] = Buffer(b.id, b.lower, b.upper, b.size, b.alignment, offset)
    return Problem(tuple(buffers))


def seeded_problem(
    seed: int, count: int, *, span: int, lengths: tuple[int, int], sizes: tuple[int, int]
) -> Problem:
    """``count`` buffers starting in ``[0, span)``, lengths and sizes uniform in the
    (inclusive) ranges given: the same problem for the same arguments."""
    rng = random.Random(seed)
    buffers = []
    for k in range(count):
        lower = rng.randrange(0, span)
        buffers.append(Buffer(f"b{k}", lower, lower + rng.randint(*lengths), rng.randint(*sizes)))
    return Problem(tuple(buffers))
