"""Shared machinery of the placement heuristics: the conflict graph and first/best fit.

Two buffers conflict when their live intervals overlap and both have a non-zero size. The
graph is built with numpy in O(n log n + E), E being the number of conflicting pairs; it is
stored as CSR arrays (``indptr``, ``indices``). Placing a buffer then only looks at its
already-placed neighbours, so a whole greedy pass costs O(n log n + E log D), D the largest
degree. Realistic traces have few buffers live at once, so E stays a small multiple of n.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.problem import Problem

UNPLACED = -1


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is >= ``value``."""
    if alignment == 1:
        return value
    return -(-value // alignment) * alignment


@dataclass(frozen=True)
class Instance:
    """A problem as flat lists, indexed by the buffer's position in ``problem.buffers``."""

    problem: Problem
    lowers: list[int]
    uppers: list[int]
    sizes: list[int]
    alignments: list[int]
    fixed: list[int | None]
    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def of(cls, problem: Problem) -> Instance:
        buffers = problem.buffers
        lowers = [b.lower for b in buffers]
        uppers = [b.upper for b in buffers]
        sizes = [b.size for b in buffers]
        indptr, indices = conflict_graph(lowers, uppers, sizes)
        return cls(
            problem=problem,
            lowers=lowers,
            uppers=uppers,
            sizes=sizes,
            alignments=[b.alignment for b in buffers],
            fixed=[b.offset for b in buffers],
            indptr=indptr,
            indices=indices,
        )

    def __len__(self) -> int:
        return len(self.sizes)

    def neighbours(self, index: int) -> list[int]:
        return self.indices[self.indptr[index] : self.indptr[index + 1]].tolist()

    def degrees(self) -> list[int]:
        return np.diff(self.indptr).tolist()

    def offsets_by_id(self, offsets: Sequence[int]) -> dict[str, int]:
        return {
            buffer.id: offset for buffer, offset in zip(self.problem.buffers, offsets, strict=True)
        }


def conflict_graph(
    lowers: Sequence[int], uppers: Sequence[int], sizes: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """CSR adjacency of the buffers whose intervals overlap (zero-sized buffers excluded)."""
    n = len(sizes)
    lo = np.asarray(lowers, dtype=np.int64)
    hi = np.asarray(uppers, dtype=np.int64)
    real = np.flatnonzero(np.asarray(sizes, dtype=np.int64) > 0)
    order = real[np.argsort(lo[real], kind="stable")]
    sorted_lo = lo[order]
    # Sorted by start, buffer p overlaps exactly the later buffers q with start(q) < end(p).
    ends = np.searchsorted(sorted_lo, hi[order], side="left")
    positions = np.arange(len(order))
    counts = ends - positions - 1
    total = int(counts.sum())
    if total == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    source = np.repeat(positions, counts)
    first = np.cumsum(counts) - counts
    target = source + 1 + (np.arange(total) - np.repeat(first, counts))
    a = order[source]
    b = order[target]
    rows = np.concatenate([a, b])
    cols = np.concatenate([b, a])
    by_row = np.argsort(rows, kind="stable")
    indices = cols[by_row]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, indices


def first_fit(blocks: list[tuple[int, int]], size: int, alignment: int) -> int:
    """The lowest aligned offset where ``size`` bytes miss every ``(start, end)`` block."""
    blocks.sort()
    candidate = 0
    for start, end in blocks:
        if candidate + size <= start:
            break
        if end > candidate:
            candidate = align_up(end, alignment)
    return candidate


def best_fit(blocks: list[tuple[int, int]], size: int, alignment: int) -> int:
    """The aligned start of the smallest gap between blocks that holds ``size`` bytes.

    Ties go to the lowest gap; when no gap between blocks is big enough the buffer goes on
    top of the highest block.
    """
    blocks.sort()
    best_offset = -1
    best_gap = -1
    reach = 0
    for start, end in blocks:
        if start > reach:
            candidate = align_up(reach, alignment)
            gap = start - reach
            if candidate + size <= start and (best_gap < 0 or gap < best_gap):
                best_gap = gap
                best_offset = candidate
        if end > reach:
            reach = end
    if best_offset >= 0:
        return best_offset
    return align_up(reach, alignment)


def place_in_order(
    instance: Instance,
    order: Iterable[int],
    fit: str = "first",
    offsets: list[int] | None = None,
) -> list[int]:
    """Place buffers one by one in ``order`` against their placed neighbours.

    Buffers with a fixed offset are placed first, at that offset, whatever ``order`` says;
    zero-sized buffers go to offset 0. With ``offsets`` (a partial plan, UNPLACED marking the
    free buffers), placement continues from it in place.
    """
    choose = first_fit if fit == "first" else best_fit
    sizes = instance.sizes
    alignments = instance.alignments
    indptr = instance.indptr.tolist()
    indices = instance.indices
    if offsets is None:
        offsets = [UNPLACED] * len(sizes)
        for index, fixed in enumerate(instance.fixed):
            if fixed is not None:
                offsets[index] = fixed
    for index in order:
        if offsets[index] != UNPLACED:
            continue
        size = sizes[index]
        if size == 0:
            offsets[index] = 0
            continue
        blocks = []
        for other in indices[indptr[index] : indptr[index + 1]].tolist():
            start = offsets[other]
            if start != UNPLACED:
                blocks.append((start, start + sizes[other]))
        offsets[index] = choose(blocks, size, alignments[index]) if blocks else 0
    return offsets


def plan_height(instance: Instance, offsets: Sequence[int]) -> int:
    sizes = instance.sizes
    return max((offset + size for offset, size in zip(offsets, sizes, strict=True)), default=0)
