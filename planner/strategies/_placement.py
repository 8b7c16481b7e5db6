"""Shared machinery of the placement heuristics: first / best fit without a conflict graph.

Two buffers conflict when their live intervals overlap and both have a non-zero size. A
greedy pass places buffers one by one, each against the already-placed buffers it
conflicts with. Listing those neighbours costs as much as the conflicting pairs, which on
real traces with long-lived tensors run into the hundreds of millions; so the placement
never lists them. Instead ``Occupancy`` keeps the placed blocks in a segment tree over time
(time compressed to the distinct interval ends): a block is stored at the O(log T) nodes
that cover its lifetime, and every node also keeps the *union* of the addresses used
anywhere below it, as sorted, coalesced intervals. A buffer's forbidden addresses are then
the union of a few of those lists (the nodes covering its lifetime, and the blocks stored
at their ancestors). Coalescing is what keeps the lists short: a well-packed region of
memory is one interval however many buffers fill it.

First fit and best fit look only at the *set* of forbidden addresses, so they give exactly
the plans a pass over the explicit neighbours gives (the tests check this against a
reference). The explicit conflict graph is still built, on demand, for the exact search and
for hill climbing on problems where it is small (``Instance.conflicts``).
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from planner.problem import Problem

UNPLACED = -1
# Hill climbing and the exact search use the explicit conflict graph only below this many
# conflicting pairs (about 16 bytes per pair and direction).
MAX_GRAPH_PAIRS = 4_000_000
# A placement pass looks at the clock every this many buffers.
CLOCK_EVERY = 256


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is >= ``value``."""
    if alignment == 1:
        return value
    return -(-value // alignment) * alignment


class Instance:
    """A problem as flat lists, indexed by the buffer's position in ``problem.buffers``.

    ``slot_lo[i]`` and ``slot_hi[i]`` are the buffer's lifetime in compressed time (the
    rank of its ``lower`` and ``upper`` among all distinct interval ends); zero-sized buffers
    conflict with nothing.
    """

    def __init__(self, problem: Problem) -> None:
        buffers = problem.buffers
        self.problem = problem
        self.lowers = [b.lower for b in buffers]
        self.uppers = [b.upper for b in buffers]
        self.sizes = [b.size for b in buffers]
        self.alignments = [b.alignment for b in buffers]
        self.fixed = [b.offset for b in buffers]
        lo = np.array(self.lowers, dtype=np.int64)
        hi = np.array(self.uppers, dtype=np.int64)
        points = np.unique(np.concatenate([lo, hi]))
        self.slots = max(len(points) - 1, 1)
        self.slot_lo = np.searchsorted(points, lo).tolist()
        self.slot_hi = np.searchsorted(points, hi).tolist()
        self._lo = lo
        self._hi = hi
        self._graph: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def of(cls, problem: Problem) -> Instance:
        return cls(problem)

    def __len__(self) -> int:
        return len(self.sizes)

    def _real(self) -> np.ndarray:
        return np.flatnonzero(np.array([s > 0 for s in self.sizes], dtype=bool))

    def degrees(self) -> list[int]:
        """How many non-zero-sized buffers each buffer conflicts with, by two binary
        searches each (no pair is listed)."""
        real = self._real()
        starts = np.sort(self._lo[real])
        ends = np.sort(self._hi[real])
        # Buffers overlapping [lo, hi): those that start before hi, less those that end by lo.
        counts = np.searchsorted(starts, self._hi, side="left") - np.searchsorted(
            ends, self._lo, side="right"
        )
        sizes = np.array([s > 0 for s in self.sizes], dtype=bool)
        counts = np.where(sizes, counts - 1, 0)
        return counts.tolist()

    def pair_count(self) -> int:
        """The number of conflicting pairs, without listing them."""
        return sum(self.degrees()) // 2

    def conflicts(self, max_pairs: int | None = MAX_GRAPH_PAIRS) -> tuple[np.ndarray, np.ndarray]:
        """The conflict graph as CSR arrays ``(indptr, indices)``, built once.

        Raises GraphTooLarge when it has more than ``max_pairs`` pairs.
        """
        if self._graph is None:
            if max_pairs is not None:
                pairs = self.pair_count()
                if pairs > max_pairs:
                    raise GraphTooLarge(pairs)
            self._graph = conflict_graph(self._lo, self._hi, self.sizes)
        return self._graph

    @property
    def indptr(self) -> np.ndarray:
        return self.conflicts()[0]

    @property
    def indices(self) -> np.ndarray:
        return self.conflicts()[1]

    def neighbours(self, index: int) -> list[int]:
        """The buffers ``index`` conflicts with (from the graph when it exists, else by
        scanning the buffers, O(n))."""
        if self._graph is not None:
            indptr, indices = self._graph
            return indices[indptr[index] : indptr[index + 1]].tolist()
        if not self.sizes[index]:
            return []
        mask = (self._lo < self.uppers[index]) & (self._hi > self.lowers[index])
        mask &= np.array([s > 0 for s in self.sizes], dtype=bool)
        mask[index] = False
        return np.flatnonzero(mask).tolist()

    def offsets_by_id(self, offsets: Sequence[int]) -> dict[str, int]:
        return {
            buffer.id: offset for buffer, offset in zip(self.problem.buffers, offsets, strict=True)
        }


class GraphTooLarge(Exception):
    """The conflict graph has more pairs than the caller allows."""

    def __init__(self, pairs: int) -> None:
        super().__init__(f"{pairs} conflicting pairs")
        self.pairs = pairs


def conflict_graph(
    lowers: Sequence[int] | np.ndarray, uppers: Sequence[int] | np.ndarray, sizes: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """CSR adjacency of the buffers whose intervals overlap (zero-sized buffers excluded).

    O(n log n + E) time and memory, E the number of pairs: only for small problems.
    """
    n = len(sizes)
    lo = np.asarray(lowers, dtype=np.int64)
    hi = np.asarray(uppers, dtype=np.int64)
    real = np.flatnonzero(np.array([s > 0 for s in sizes], dtype=bool))
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


# --------------------------------------------------------------------------------------------
# Interval lists: a flat sorted list [s0, e0, s1, e1, ...] of disjoint, non-touching
# intervals, so s0 < e0 < s1 < e1 < ... and a bisect finds the interval around an address.


def _add_interval(intervals: list[int], start: int, end: int) -> bool:
    """Merge ``[start, end)`` into the list; False when it was already covered."""
    i = bisect_left(intervals, start)
    j = bisect_right(intervals, end)
    if i & 1:  # start inside (or at the end of) interval (i - 1) / 2
        i -= 1
        start = intervals[i]
    if j & 1:  # end inside (or at the start of) interval (j - 1) / 2
        end = intervals[j]
        j += 1
    if j - i == 2 and intervals[i] == start and intervals[i + 1] == end:
        return False
    intervals[i:j] = (start, end)
    return True


def _merge(lists: list[list[int]]) -> list[int]:
    """The union of several interval lists, as one interval list."""
    if len(lists) == 1:
        return lists[0]
    pairs = []
    for intervals in lists:
        pairs.extend(zip(intervals[::2], intervals[1::2], strict=True))
    pairs.sort()
    merged: list[int] = []
    for start, end in pairs:
        if merged and start <= merged[-1]:
            if end > merged[-1]:
                merged[-1] = end
        else:
            merged.append(start)
            merged.append(end)
    return merged


# Above this many intervals in all, a query's union is found with numpy (when the addresses
# fit in int64), below it in plain Python.
NUMPY_FROM = 256
_INT64_SAFE = 1 << 62


def first_fit_in(lists: list[list[int]], size: int, alignment: int) -> int:
    """The lowest aligned offset where ``size`` bytes miss every interval of ``lists``."""
    if len(lists) > 2:
        total = sum(map(len, lists))
        if total > NUMPY_FROM:
            found = _fit_numpy(lists, size, alignment, best=False)
            if found is not None:
                return found
    candidate = 0
    moved = True
    while moved:
        moved = False
        for intervals in lists:
            k = bisect_right(intervals, candidate)
            if k & 1:  # candidate inside interval (k - 1) / 2
                candidate = align_up(intervals[k], alignment)
                moved = True
            elif k < len(intervals) and intervals[k] < candidate + size:
                candidate = align_up(intervals[k + 1], alignment)
                moved = True
    return candidate


def best_fit_in(lists: list[list[int]], size: int, alignment: int) -> int:
    """The aligned start of the smallest gap of the union of ``lists`` that holds ``size``
    bytes (ties: the lowest); on top of the highest interval when none does."""
    if len(lists) > 1 and sum(map(len, lists)) > NUMPY_FROM:
        found = _fit_numpy(lists, size, alignment, best=True)
        if found is not None:
            return found
    intervals = _merge(lists)
    best_offset = -1
    best_gap = -1
    reach = 0
    for k in range(0, len(intervals), 2):
        start = intervals[k]
        if start > reach:
            gap = start - reach
            if best_gap < 0 or gap < best_gap:
                candidate = align_up(reach, alignment)
                if candidate + size <= start:
                    best_gap = gap
                    best_offset = candidate
        reach = intervals[k + 1]
    if best_offset >= 0:
        return best_offset
    return align_up(reach, alignment)


def _fit_numpy(lists: list[list[int]], size: int, alignment: int, best: bool) -> int | None:
    """First or best fit over the union of many intervals, vectorised; None when the
    addresses are too large for int64 (the caller then does it in Python).

    Sorted separately, the k-th smallest end and the (k+1)-th smallest start bound a gap
    of the union exactly when the end is below the start: k intervals have started and
    all k have ended.
    """
    try:
        flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64)
    except OverflowError:
        return None
    starts = np.sort(flat[0::2])
    ends = np.sort(flat[1::2])
    top = int(ends[-1])
    if top + size + alignment >= _INT64_SAFE:
        return None
    gap_lo = np.concatenate(([0], ends))
    gap_hi = np.concatenate((starts, [top + size + alignment]))
    if alignment > 1:
        aligned = -(-gap_lo // alignment) * alignment
    else:
        aligned = gap_lo
    fits = (gap_lo < gap_hi) & (aligned + size <= gap_hi)
    if not best:
        # The top gap always fits, so there is a first one.
        return int(aligned[int(np.argmax(fits))])
    fits[-1] = False
    if not fits.any():
        return align_up(top, alignment)
    gaps = np.where(fits, gap_hi - gap_lo, np.iinfo(np.int64).max)
    return int(aligned[int(np.argmin(gaps))])


class Occupancy:
    """The placed blocks: which addresses are used at which times, for first / best fit.

    A segment tree over ``slots`` compressed time slots. ``stored[v]`` holds the address
    intervals of the blocks whose lifetime covers node ``v``'s span (and not its parent's);
    ``union[v]`` the addresses used anywhere in ``v``'s span. Both are interval lists
    (``_add_interval``), created on first use.
    """

    def __init__(self, slots: int) -> None:
        width = 1
        while width < slots:
            width *= 2
        self.width = width
        self.stored: list[list[int] | None] = [None] * (2 * width)
        self.union: list[list[int] | None] = [None] * (2 * width)

    def add(self, slot_lo: int, slot_hi: int, start: int, end: int) -> None:
        """Mark ``[start, end)`` used over the slots ``[slot_lo, slot_hi)``."""
        if start >= end or slot_lo >= slot_hi:
            return
        stored = self.stored
        union = self.union
        lo = slot_lo + self.width
        hi = slot_hi + self.width
        left, right = lo, hi - 1
        while lo < hi:
            if lo & 1:
                self._store(stored, lo, start, end)
                self._lift(union, lo, start, end)
                lo += 1
            if hi & 1:
                hi -= 1
                self._store(stored, hi, start, end)
                self._lift(union, hi, start, end)
            lo >>= 1
            hi >>= 1
        # The ancestors of the canonical nodes are those of the two end leaves.
        self._lift(union, left >> 1, start, end)
        self._lift(union, right >> 1, start, end)

    @staticmethod
    def _store(lists: list[list[int] | None], node: int, start: int, end: int) -> None:
        intervals = lists[node]
        if intervals is None:
            lists[node] = [start, end]
        else:
            _add_interval(intervals, start, end)

    @staticmethod
    def _lift(union: list[list[int] | None], node: int, start: int, end: int) -> None:
        # Walk up while the interval is new to the node's union: a union that already has
        # it is inside every ancestor's union too.
        while node:
            intervals = union[node]
            if intervals is None:
                union[node] = [start, end]
            elif not _add_interval(intervals, start, end):
                return
            node >>= 1

    def used(self, slot_lo: int, slot_hi: int) -> list[list[int]]:
        """Interval lists whose union is the addresses used somewhere in the slots."""
        stored = self.stored
        union = self.union
        lists = []
        lo = slot_lo + self.width
        hi = slot_hi + self.width
        # Blocks stored at nodes that contain a query end: ancestors of the end leaves.
        node = lo >> 1
        other = (hi - 1) >> 1
        while node:
            intervals = stored[node]
            if intervals:
                lists.append(intervals)
            if other != node:
                intervals = stored[other]
                if intervals:
                    lists.append(intervals)
            node >>= 1
            other >>= 1
        while lo < hi:
            if lo & 1:
                intervals = union[lo]
                if intervals:
                    lists.append(intervals)
                lo += 1
            if hi & 1:
                hi -= 1
                intervals = union[hi]
                if intervals:
                    lists.append(intervals)
            lo >>= 1
            hi >>= 1
        return lists


def place_in_order(
    instance: Instance,
    order: Iterable[int],
    fit: str = "first",
    offsets: list[int] | None = None,
    deadline: float | None = None,
) -> list[int]:
    """Place buffers one by one in ``order``, each against the placed buffers it conflicts
    with: at the lowest offset that fits (``fit="first"``) or in the smallest gap that holds
    it (``"best"``).

    Buffers with a fixed offset are placed first, at that offset, whatever ``order`` says;
    zero-sized buffers go to offset 0. With ``offsets`` (a partial plan, UNPLACED marking
    the free buffers), placement continues from it in place. Past ``deadline`` the buffers
    left are stacked above everything placed: a valid plan, returned at once.
    """
    choose = first_fit_in if fit == "first" else best_fit_in
    sizes = instance.sizes
    alignments = instance.alignments
    slot_lo = instance.slot_lo
    slot_hi = instance.slot_hi
    occupancy = Occupancy(instance.slots)
    if offsets is None:
        offsets = [UNPLACED] * len(sizes)
        for index, fixed in enumerate(instance.fixed):
            if fixed is not None:
                offsets[index] = fixed
    for index, offset in enumerate(offsets):
        if offset != UNPLACED and sizes[index]:
            occupancy.add(slot_lo[index], slot_hi[index], offset, offset + sizes[index])
    add = occupancy.add
    used = occupancy.used
    pending = list(order) if deadline is not None else order
    for count, index in enumerate(pending):
        if deadline is not None and not count % CLOCK_EVERY and time.perf_counter() > deadline:
            _stack_the_rest(instance, offsets, pending[count:])  # type: ignore[index]
            break
        if offsets[index] != UNPLACED:
            continue
        size = sizes[index]
        if size == 0:
            offsets[index] = 0
            continue
        lo = slot_lo[index]
        hi = slot_hi[index]
        lists = used(lo, hi)
        offset = choose(lists, size, alignments[index]) if lists else 0
        offsets[index] = offset
        add(lo, hi, offset, offset + size)
    return offsets


def _stack_the_rest(instance: Instance, offsets: list[int], rest: Iterable[int]) -> None:
    sizes = instance.sizes
    top = max(
        (offset + size for offset, size in zip(offsets, sizes, strict=True) if offset >= 0),
        default=0,
    )
    for index in rest:
        if offsets[index] != UNPLACED:
            continue
        if sizes[index] == 0:
            offsets[index] = 0
            continue
        offset = align_up(top, instance.alignments[index])
        offsets[index] = offset
        top = offset + sizes[index]


def place_against_neighbours(
    instance: Instance,
    order: Iterable[int],
    fit: str = "first",
    offsets: list[int] | None = None,
) -> list[int]:
    """``place_in_order`` against the explicit conflict graph (``Instance.conflicts``).

    The same plan, the way these heuristics used to be computed: cheaper for hill climbing,
    which re-places suffixes of an order many times on small problems, and the reference
    that the tests and the benchmark compare the sweep with.
    """
    choose = first_fit if fit == "first" else best_fit
    sizes = instance.sizes
    alignments = instance.alignments
    indptr_array, indices = instance.conflicts()
    indptr = indptr_array.tolist()
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


def plan_height(instance: Instance, offsets: Sequence[int]) -> int:
    sizes = instance.sizes
    return max((offset + size for offset, size in zip(offsets, sizes, strict=True)), default=0)
