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

import functools
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from planner.problem import Problem, lower_bound

UNPLACED = -1
# Hill climbing and the exact search use the explicit conflict graph only below this many
# conflicting pairs (about 16 bytes per pair and direction).
MAX_GRAPH_PAIRS = 4_000_000
# A placement pass looks at the clock every this many buffers (a buffer placed in the tree
# takes 10 µs to a few ms on dense traces, far more than reading the clock).
CLOCK_EVERY = 32
# Turning a plan into the answer (offsets by id, its height, validation aside) takes about
# this long per buffer: placement stops that much before its deadline to answer on time.
FINISH_SECONDS_PER_BUFFER = 1e-6


# Freeing the tree of ``place_in_order`` (its interval lists, a few per block) takes 1-4 µs
# per block placed in it, measured on traces of 20k-100k buffers: that pass stops this much
# earlier, since it frees the tree after its deadline, on its way out.
TEARDOWN_SECONDS_PER_BLOCK = 3e-6


# On a loaded machine turning a plan into the answer (mostly a dict of the ids) takes longer
# than that: building the instance, work of the same kind timed on the spot, scales the
# reserve too. Answering took 1.2 times the build on a quiet 16-core machine and about 2
# times on the loaded 2-core VM (a million buffers).
ANSWER_PER_BUILD = 2.0


def finishing_by(
    deadline: float | None, buffers: int, instance: Instance | None = None
) -> float | None:
    """When work for ``buffers`` buffers must stop to answer by ``deadline``."""
    if deadline is None:
        return None
    reserve = FINISH_SECONDS_PER_BUFFER * buffers
    if instance is not None and len(instance):
        scaled = ANSWER_PER_BUILD * instance.build_seconds * buffers / len(instance)
        reserve = max(reserve, scaled)
    return deadline - reserve


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is >= ``value``."""
    if alignment == 1:
        return value
    return -(-value // alignment) * alignment

def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``: sorted, each value once (np.unique itself took 2 s on two
    million int64 with numpy 2.4, a sort 0.1 s)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def argsort_keys(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys[::-1])`` (sorted by the first key first, stable), faster: the keys
    are folded into one int64 key when their ranges allow, and that one is argsorted."""
    if not keys:
        raise ValueError("no keys")
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    span = 1
    parts = []
    for key in reversed(keys):  # the least significant first
        low = int(key.min())
        width = int(key.max()) - low + 1
        parts.append((key, low, span))
        span *= width
        if span >= 1 << 63:
            return np.lexsort(keys[::-1])
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for key, low, scale in parts:
        combined += (key - low) * scale
    return np.argsort(combined, kind="stable")


def _max_live(slot_lo: np.ndarray, slot_hi: np.ndarray, sizes: np.ndarray) -> int:
    """The largest total size live in one compressed time slot (sums within int64): what
    the event sweep of ``lower_bound`` finds, since within one instant its running sum
    only falls (the ends) and then rises (the starts)."""
    if not len(sizes):
        return 0
    delta = np.zeros(int(max(slot_hi.max(), slot_lo.max())) + 2, dtype=np.int64)
    np.add.at(delta, slot_lo, sizes)
    np.add.at(delta, slot_hi, -sizes)
    return max(int(np.cumsum(delta).max()), 0)



class Instance:
    """A problem as flat lists, indexed by the buffer's position in ``problem.buffers``.

    ``slot_lo[i]`` and ``slot_hi[i]`` are the buffer's lifetime in compressed time (the
    rank of its ``lower`` and ``upper`` among all distinct interval ends); zero-sized buffers
    conflict with nothing.

    Building it, and what the strategies derive from it before placing anything (orders,
    bounds, counts), is done by numpy on arrays made once: no strategy cuts that setup
    short, so on a million buffers it must take a small share of a time limit.
    """

    def __init__(self, problem: Problem) -> None:
        started = time.perf_counter()
        buffers = problem.buffers
        self.problem = problem
        self.lowers = [b.lower for b in buffers]
        self.uppers = [b.upper for b in buffers]
        self.sizes = [b.size for b in buffers]
        self.alignments = [b.alignment for b in buffers]
        self.fixed = [b.offset for b in buffers]
        # Turning a plan into the answer comes after the deadline: the ids are listed here.
        self.ids = [b.id for b in buffers]
        lo = np.array(self.lowers, dtype=np.int64)
        hi = np.array(self.uppers, dtype=np.int64)
        points = _distinct(np.concatenate([lo, hi]))
        self.slots = max(len(points) - 1, 1)
        self.slot_lo_array = np.searchsorted(points, lo)
        self.slot_hi_array = np.searchsorted(points, hi)
        self._lo = lo
        self._hi = hi
        self._graph: tuple[np.ndarray, np.ndarray] | None = None
        self._pairs: int | None = None
        self._degrees: np.ndarray | None = None
        self._real_mask: np.ndarray | None = None
        self._batch_state: tuple[_Windows, np.ndarray, np.ndarray | None] | None | bool = False
        self._lowest_height: int | None = None
        self._max_live: int | None = None
        self._size_array: np.ndarray | None | bool = False
        # Buffers with a fixed offset are usually none: listed once, they cost nothing after.
        if self.fixed.count(None) == len(self.fixed):
            self.fixed_positions: list[int] = []
        else:
            self.fixed_positions = [i for i, f in enumerate(self.fixed) if f is not None]
        self.fixed_top = max(
            (self.fixed[i] + self.sizes[i] for i in self.fixed_positions), default=0
        )
        # How long this took: a measure of this machine's speed now (see ``finishing_by``).
        self.build_seconds = time.perf_counter() - started

    @classmethod
    def of(cls, problem: Problem) -> Instance:
        return cls(problem)

    def __len__(self) -> int:
        return len(self.sizes)

    @functools.cached_property
    def slot_lo(self) -> list[int]:
        return self.slot_lo_array.tolist()

    @functools.cached_property
    def slot_hi(self) -> list[int]:
        return self.slot_hi_array.tolist()

    def size_array(self) -> np.ndarray | None:
        """The sizes as int64, built once; None when one does not fit int64."""
        if self._size_array is False:
            if max(self.sizes, default=0) >= 1 << 63:
                self._size_array = None
            else:
                self._size_array = np.array(self.sizes, dtype=np.int64)
        return self._size_array  # type: ignore[return-value]

    def _real_flags(self) -> np.ndarray:
        """Which buffers have a non-zero size, found once."""
        if self._real_mask is None:
            sizes = self.size_array()
            if sizes is None:
                self._real_mask = np.array([s > 0 for s in self.sizes], dtype=bool)
            else:
                self._real_mask = sizes > 0
        return self._real_mask

    def _real(self) -> np.ndarray:
        return np.flatnonzero(self._real_flags())

    def degree_array(self) -> np.ndarray:
        """``degrees`` as an int64 array, found once."""
        if self._degrees is None:
            sizes = self._real_flags()
            starts = np.sort(self._lo[sizes])
            ends = np.sort(self._hi[sizes])
            # Buffers overlapping [lo, hi): those that start before hi, less those that end
            # by lo.
            counts = np.searchsorted(starts, self._hi, side="left") - np.searchsorted(
                ends, self._lo, side="right"
            )
            self._degrees = np.where(sizes, counts - 1, 0).astype(np.int64)
        return self._degrees

    def degrees(self) -> list[int]:
        """How many non-zero-sized buffers each buffer conflicts with, by two binary
        searches each (no pair is listed)."""
        return self.degree_array().tolist()

    def pair_count(self) -> int:
        """The number of conflicting pairs, without listing them."""
        if self._pairs is None:
            self._pairs = int(self.degree_array().sum()) // 2
        return self._pairs

    def sort_keys(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``-size`` and ``lower - upper`` (both: larger first) as int64 arrays, for
        sorting with numpy; None when they do not fit int64."""
        sizes = self.size_array()
        if sizes is None:
            return None
        if len(self) and int(self._hi.max()) - int(self._lo.min()) >= 1 << 63:
            return None
        return -sizes, self._lo - self._hi

    def sorted_by(self, *keys: np.ndarray) -> list[int]:
        """Positions sorted by ``keys`` (the first key first), then by buffer id."""
        order = argsort_keys(*keys)
        tied = np.ones(max(len(order) - 1, 0), dtype=bool)
        for key in keys:
            ranked = key[order]
            tied &= ranked[1:] == ranked[:-1]
        if not tied.any():
            return order.tolist()
        # Only runs of equal keys are sorted again, by id, in Python (so exactly as str
        # compares them). Most runs are pairs, ordered by one comparison each.
        positions = order.tolist()
        ids = self.ids
        edges = np.flatnonzero(np.diff(np.concatenate(([False], tied, [False])).astype(np.int8)))
        starts = edges[0::2]
        ends = edges[1::2]
        pairs = ends - starts == 1
        first = starts[pairs].tolist()
        for start, swap in zip(
            first,
            [ids[positions[k]] > ids[positions[k + 1]] for k in first],
            strict=True,
        ):
            if swap:
                positions[start], positions[start + 1] = positions[start + 1], positions[start]
        for start, end in zip(starts[~pairs].tolist(), ends[~pairs].tolist(), strict=True):
            positions[start : end + 1] = sorted(positions[start : end + 1], key=ids.__getitem__)
        return positions

    def max_live(self) -> int:
        """The max-live bound (``planner.problem.lower_bound``), found once: by numpy over
        the compressed time slots where the sums fit int64."""
        if self._max_live is None:
            sizes = self.size_array()
            if sizes is not None and sum(self.sizes) < 1 << 63:
                self._max_live = _max_live(self.slot_lo_array, self.slot_hi_array, sizes)
            else:
                self._max_live = lower_bound(self.problem)
        return self._max_live

    def lowest_height(self) -> int:
        """No plan is lower than this: the max-live bound (``planner.problem.lower_bound``),
        or the top of the fixed-offset buffers when that is higher."""
        if self._lowest_height is None:
            self._lowest_height = max(self.max_live(), self.fixed_top)
        return self._lowest_height

    def batch_state(self) -> tuple[_Windows, np.ndarray, np.ndarray | None] | None:
        """What ``place_in_batches`` needs (windows, sizes, alignments or None when all are
        1), built once; None when a plan's addresses could leave int64."""
        if self._batch_state is False:
            # No greedy plan is higher than every buffer stacked, each after its padding.
            top = sum(self.sizes) + sum(self.alignments) + self.fixed_top
            sizes = self.size_array()
            if top >= 1 << 61 or sizes is None:
                self._batch_state = None
            else:
                alignments = None
                if self.alignments.count(1) != len(self.alignments):
                    alignments = np.array(self.alignments, dtype=np.int64)
                windows = _Windows(self.slot_lo_array, self.slot_hi_array, np.flatnonzero(sizes))
                self._batch_state = (windows, sizes, alignments)
        return self._batch_state  # type: ignore[return-value]

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
        mask &= self._real_flags()
        mask[index] = False
        return np.flatnonzero(mask).tolist()

    def offsets_by_id(self, offsets: Sequence[int]) -> dict[str, int]:
        return dict(zip(self.ids, offsets, strict=True))


class PassAbandoned(Exception):
    """A placement pass given a ``ceiling`` reached it: its plan cannot be lower."""


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
    # The gaps of the union as ``_fit_numpy`` reads them (the k-th smallest end below the
    # (k+1)-th smallest start), with list operations that run in C rather than a merge.
    if len(lists) == 1:
        intervals = lists[0]
        starts = intervals[0::2]
        ends = intervals[1::2]
    else:
        flat = list(chain.from_iterable(lists))
        starts = flat[0::2]
        starts.sort()
        ends = flat[1::2]
        ends.sort()
    top = ends[-1]
    # Gap k runs from ends[k] to starts[k]; zip drops the top end, which bounds no gap.
    ends.insert(0, 0)
    if alignment == 1:
        fitting = [(hi - lo, lo) for lo, hi in zip(ends, starts, strict=False) if hi - lo >= size]
        return min(fitting)[1] if fitting else top
    best_offset = -1
    best_gap = -1
    for lo, hi in zip(ends, starts, strict=False):
        gap = hi - lo
        if gap >= size and (best_gap < 0 or gap < best_gap):
            candidate = -(-lo // alignment) * alignment
            if candidate + size <= hi:
                best_gap = gap
                best_offset = candidate
    if best_offset >= 0:
        return best_offset
    return align_up(top, alignment)


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
    ``union[v]`` the addresses of the blocks stored at ``v`` or below it (those used
    somewhere in ``v``'s span, less the blocks stored at its ancestors, which a query
    collects from ``stored``). Both are interval lists (``_add_interval``), created on
    first use.
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
        # Each canonical node's union takes the interval, and so do its ancestors' (all on
        # the paths from the two end leaves up), as far as the first that already has it.
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

    @staticmethod
    def _store(lists: list[list[int] | None], node: int, start: int, end: int) -> None:
        intervals = lists[node]
        if intervals is None:
            lists[node] = [start, end]
            return
        # ``_add_interval``, inlined (this and ``_lift`` run a few times per tree level).
        i = bisect_left(intervals, start)
        j = bisect_right(intervals, end)
        if i & 1:
            i -= 1
            start = intervals[i]
        if j & 1:
            end = intervals[j]
            j += 1
        intervals[i:j] = (start, end)

    @staticmethod
    def _lift(union: list[list[int] | None], node: int, start: int, end: int) -> None:
        # Walk up while the interval is new to the node's union: a union that already has
        # it is inside every ancestor's union too. ``_add_interval``, inlined.
        while node:
            intervals = union[node]
            if intervals is None:
                union[node] = [start, end]
            else:
                i = bisect_left(intervals, start)
                j = bisect_right(intervals, end)
                low, high = start, end
                if i & 1:
                    i -= 1
                    low = intervals[i]
                if j & 1:
                    high = intervals[j]
                    j += 1
                if j - i == 2 and intervals[i] == low and intervals[i + 1] == high:
                    return
                intervals[i:j] = (low, high)
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
        while other != node:
            intervals = stored[node]
            if intervals:
                lists.append(intervals)
            intervals = stored[other]
            if intervals:
                lists.append(intervals)
            node >>= 1
            other >>= 1
        # From where the two paths meet, one path.
        while node:
            intervals = stored[node]
            if intervals:
                lists.append(intervals)
            node >>= 1
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
    *,
    ceiling: int | None = None,
) -> list[int]:
    """Place buffers one by one in ``order``, each against the placed buffers it conflicts
    with: at the lowest offset that fits (``fit="first"``) or in the smallest gap that holds
    it (``"best"``).

    With ``ceiling``, the pass raises PassAbandoned as soon as a buffer it places reaches
    ``ceiling`` (its plan would be at least that high), before the deadline's stacking.

    Buffers with a fixed offset are placed first, at that offset, whatever ``order`` says;
    zero-sized buffers go to offset 0. With ``offsets`` (a partial plan, UNPLACED marking
    the free buffers), placement continues from it in place. Past ``deadline`` the buffers
    left are stacked above everything placed: a valid plan, returned at once.
    """
    if offsets is None and batches_apply(instance):
        return place_in_batches(instance, order, fit, deadline, ceiling=ceiling)
    deadline = finishing_by(deadline, len(instance), instance)
    choose = first_fit_in if fit == "first" else best_fit_in
    sizes = instance.sizes
    alignments = instance.alignments
    slot_lo = instance.slot_lo
    slot_hi = instance.slot_hi
    occupancy = Occupancy(instance.slots)
    if offsets is None:
        offsets = [UNPLACED] * len(sizes)
        for index in instance.fixed_positions:
            offsets[index] = instance.fixed[index]
    pending = list(order) if deadline is not None else order
    blocks = 0
    for index, offset in enumerate(offsets):
        if offset != UNPLACED and sizes[index]:
            occupancy.add(slot_lo[index], slot_hi[index], offset, offset + sizes[index])
            blocks += 1
            # Continuing a large partial plan takes a while before the first buffer.
            if (
                deadline is not None
                and not blocks % CLOCK_EVERY
                and time.perf_counter() > deadline - TEARDOWN_SECONDS_PER_BLOCK * blocks
            ):
                _stack_the_rest(instance, offsets, pending, _top_of(instance, offsets))
                return offsets
    add = occupancy.add
    used = occupancy.used
    limit = float("inf") if ceiling is None else ceiling
    for count, index in enumerate(pending):
        if (
            deadline is not None
            and not count % CLOCK_EVERY
            and time.perf_counter() > deadline - TEARDOWN_SECONDS_PER_BLOCK * (blocks + count)
        ):
            # Every placed block is in the tree, so its root's union ends at their top.
            root = occupancy.union[1]
            top = root[-1] if root else 0
            _stack_the_rest(instance, offsets, pending[count:], top)  # type: ignore[index]
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
        if offset + size >= limit:
            raise PassAbandoned
        offsets[index] = offset
        add(lo, hi, offset, offset + size)
    return offsets


# --------------------------------------------------------------------------------------------
# Batched placement: the same plans as the one-by-one pass, with numpy doing the work.
#
# A buffer's place depends only on the earlier buffers (in the order) it conflicts with. Take
# the order in chunks: within a chunk of K buffers of a large problem few buffers conflict
# with each other, so the chunk is placed in a few *waves* (wave w holds the buffers whose
# earlier conflicts in the chunk are all in lower waves), and a wave is placed at once: its
# buffers' placed conflicts are listed by numpy (by time windows over the buffers sorted by
# start, one window per class of lifetime length), padded into a matrix with a row per
# buffer, sorted along the rows, and the gaps of each row's union read off as in
# ``_fit_numpy``. Listing costs as much as the conflicting pairs, so this is for problems
# whose buffers each conflict with a bounded number of others; dense traces keep the tree.

# Problems with fewer buffers, or more conflicts per buffer on average, use the tree.
BATCH_FROM = 20_000
BATCH_MAX_DEGREE = 256
# Chunks start with about this many listed pairs, and grow while they need few waves.
BATCH_PAIRS = 1 << 17
BATCH_WAVES = 6
# Waves of fewer buffers are placed one by one.
BATCH_ROWS = 32
_PAD = np.int64(1) << 62


class _Windows:
    """The non-zero-sized buffers numbered by class of lifetime length (powers of two, in
    slots), then start: any sorted subset of those numbers is in turn grouped by class and
    sorted by start, and a query interval's conflicts in a class all start within a window
    of the class's longest lifetime before the query's end."""

    def __init__(self, slot_lo: np.ndarray, slot_hi: np.ndarray, real: np.ndarray) -> None:
        lengths = slot_hi[real] - slot_lo[real]
        classes = np.floor(np.log2(np.maximum(lengths, 1))).astype(np.int64)
        by_start = argsort_keys(classes, slot_lo[real])
        self.index = real[by_start]
        self.lo = slot_lo[self.index]
        self.hi = slot_hi[self.index]
        ranked = classes[by_start]
        # Where each class starts (``np.unique(..., return_index=True)``, without its cost).
        first = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))[: len(ranked)]
        self.bounds = first
        self.longest = np.maximum.reduceat(lengths[by_start], first).tolist() if len(first) else []

    def live_together(
        self, ids: np.ndarray, starts: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (query row, k) such that buffer ``ids[k]`` is live together with the query
        interval ``[lo[row], hi[row])``, grouped by row; ``ids`` sorted, ``starts`` their
        ``self.lo``."""
        bounds = np.searchsorted(ids, self.bounds).tolist() + [len(ids)]
        first = np.empty((len(lo), len(self.longest)), dtype=np.int64)
        last = np.empty_like(first)
        for k, longest in enumerate(self.longest):
            base, end = bounds[k], bounds[k + 1]
            window = starts[base:end]
            first[:, k] = base + np.searchsorted(window, lo - longest, side="right")
            last[:, k] = base + np.searchsorted(window, hi, side="left")
        counts = np.maximum(last - first, 0)
        flat = counts.ravel()
        shift = first.ravel() - (np.cumsum(flat) - flat)
        positions = np.arange(int(flat.sum())) + np.repeat(shift, flat)
        per_row = counts.sum(axis=1)
        keep = self.hi[ids[positions]] > np.repeat(lo, per_row)
        rows = np.repeat(np.arange(len(lo)), per_row)
        return rows[keep], positions[keep]


def batches_apply(instance: Instance) -> bool:
    """Whether ``place_in_batches`` is the faster way for this problem (and its numbers fit
    int64 with room to spare)."""
    n = len(instance)
    if n < BATCH_FROM:
        return False
    if instance.batch_state() is None:
        return False
    return 2 * instance.pair_count() <= BATCH_MAX_DEGREE * n


def _fit_rows(
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    row_count: int,
    sizes: np.ndarray,
    alignments: np.ndarray | None,
    best: bool,
) -> np.ndarray:
    """First or best fit of ``row_count`` buffers at once; ``(starts[k], ends[k])`` is a
    placed block that row ``rows[k]`` must miss (``rows`` sorted)."""
    counts = np.bincount(rows, minlength=row_count)
    offsets = np.zeros(row_count, dtype=np.int64)
    if not len(rows):
        return offsets
    # Rows are padded to a power of two of their block count, so that a few busy rows do
    # not pad every row to their length; rows (and their blocks) are grouped by that power,
    # a small number, which a stable sort orders in linear time.
    buckets = np.zeros(row_count, dtype=np.uint8)
    busy = counts > 0
    buckets[busy] = np.ceil(np.log2(counts[busy])).astype(np.uint8) + 1
    row_order = np.argsort(buckets, kind="stable")
    row_runs = np.searchsorted(buckets[row_order], np.arange(buckets.max() + 2)).tolist()
    local = np.empty(row_count, dtype=np.int64)
    local[row_order] = np.arange(row_count)
    block_order = np.argsort(buckets[rows], kind="stable")
    rows = rows[block_order]
    starts, ends = starts[block_order], ends[block_order]
    # Blocks are still grouped by row within a bucket: a block's column is its position
    # after its row's first block.
    first_block = np.cumsum(counts[row_order]) - counts[row_order]
    column = np.arange(len(rows)) - first_block[local[rows]]
    block_runs = np.concatenate(([0], np.cumsum(counts[row_order])))[row_runs].tolist()
    for bucket in range(1, len(row_runs) - 1):
        row_lo, row_hi = row_runs[bucket], row_runs[bucket + 1]
        if row_lo == row_hi:
            continue
        members = row_order[row_lo:row_hi]
        width = 1 << (bucket - 1)
        block_lo, block_hi = block_runs[bucket], block_runs[bucket + 1]
        cell = (local[rows[block_lo:block_hi]] - row_lo) * (width + 1) + column[block_lo:block_hi]
        low = np.full((len(members), width + 1), _PAD, dtype=np.int64)
        high = np.full((len(members), width + 1), _PAD, dtype=np.int64)
        # Sorted separately, the k-th smallest end and the (k+1)-th smallest start bound a
        # gap of the union when the end is below the start (see _fit_numpy).
        high.ravel()[cell] = starts[block_lo:block_hi]
        low.ravel()[cell + 1] = ends[block_lo:block_hi]
        high[:, :width].sort(axis=1)
        low[:, 1:].sort(axis=1)
        low[:, 0] = 0
        size = sizes[members][:, None]
        if alignments is None:
            aligned = low
        else:
            align = alignments[members][:, None]
            aligned = -(-low // align) * align
        fits = (low < high) & (aligned + size <= high)
        ways = np.arange(len(members))
        if not best:
            offsets[members] = aligned[ways, fits.argmax(axis=1)]
            continue
        top = counts[members]
        fits[ways, top] = False  # the gap above everything is the fallback, not a gap
        gaps = np.where(fits, high - low, _PAD)
        chosen = gaps.argmin(axis=1)
        found = fits[ways, chosen]
        topmost = aligned[ways, top]
        offsets[members] = np.where(found, aligned[ways, chosen], topmost)
    return offsets


def place_in_batches(
    instance: Instance,
    order: Iterable[int],
    fit: str = "first",
    deadline: float | None = None,
    *,
    ceiling: int | None = None,
) -> list[int]:
    """``place_in_order`` from scratch, in chunks of the order placed wave by wave (see
    above): the same plan. Past ``deadline`` the buffers left are stacked on top; with
    ``ceiling``, PassAbandoned is raised after a chunk that reaches it."""
    state = instance.batch_state()
    assert state is not None
    windows, all_sizes, all_alignments = state
    deadline = finishing_by(deadline, len(instance), instance)
    best = fit == "best"
    n = len(instance)
    offsets = np.full(n, UNPLACED, dtype=np.int64)
    rank = np.full(n, n, dtype=np.int64)
    for buffer in instance.fixed_positions:
        offsets[buffer] = instance.fixed[buffer]
        rank[buffer] = -1
    sequence = np.fromiter(order, dtype=np.int64)
    free = offsets[sequence] == UNPLACED
    pending = sequence[free & (all_sizes[sequence] > 0)]
    offsets[sequence[free & (all_sizes[sequence] == 0)]] = 0
    rank[pending] = np.arange(len(pending))
    # The work is done on the buffers renumbered in the windows' order, so that the
    # conflicts of a buffer (close in time) are close in memory.
    index = windows.index
    where = np.full(n, -1, dtype=np.int64)
    where[index] = np.arange(len(index))
    pending = where[pending]
    placed = offsets[index]
    ranks = rank[index]
    sizes = all_sizes[index]
    alignments = None if all_alignments is None else all_alignments[index]
    # The placed buffers (by number, sorted) and their starts, for the windows.
    done = np.flatnonzero(ranks < 0)
    done_starts = windows.lo[done]
    degree = 2 * instance.pair_count() / max(n, 1)
    largest = int(max(16 * BATCH_PAIRS / (degree + 1), 16))
    chunk = min(int(max(BATCH_PAIRS / (degree + 1), 16)), largest)
    position = 0
    # The next chunk's time, foreseen from the last one's: a chunk that would end past the
    # deadline is not started.
    foreseen = 0.0
    while position < len(pending):
        chunk_started = time.perf_counter()
        if deadline is not None and chunk_started + foreseen > deadline:
            offsets[index] = placed
            _stack_in_batches(offsets, all_sizes, all_alignments, index[pending[position:]])
            return offsets.tolist()
        members = pending[position : position + chunk]
        # Rows in order of time, so that the windows are read in order, not at random;
        # ``turn[row]`` is the row's place in the order within the chunk.
        turn = np.argsort(windows.lo[members], kind="stable")
        members = members[turn]
        lo, hi = windows.lo[members], windows.hi[members]
        rows, picked = windows.live_together(done, done_starts, lo, hi)
        others = done[picked]
        numbered = np.argsort(members)
        inner_rows, inner = windows.live_together(members[numbered], lo[numbered], lo, hi)
        inner = numbered[inner]
        earlier = turn[inner] < turn[inner_rows]
        inner_rows, inner = inner_rows[earlier], inner[earlier]
        waves = _waves(inner_rows, inner, len(members))
        count = int(waves.max()) + 1 if len(members) else 0
        for in_wave, wave_rows, blocks in _by_wave(
            waves, count, rows, others, inner_rows, inner, members
        ):
            starts = placed[blocks]
            ends = starts + sizes[blocks]
            if len(in_wave) < BATCH_ROWS:
                # Chains of buffers in the order that follow each other in time make many
                # small waves, where numpy's cost per call outweighs its speed.
                placed[in_wave] = _fit_rows_one_by_one(
                    starts, ends, wave_rows, len(in_wave), sizes[in_wave], in_wave, alignments, fit
                )
                continue
            placed[in_wave] = _fit_rows(
                starts,
                ends,
                wave_rows,
                len(in_wave),
                sizes[in_wave],
                None if alignments is None else alignments[in_wave],
                best,
            )
        if ceiling is not None and int((placed[members] + sizes[members]).max()) >= ceiling:
            raise PassAbandoned
        position += len(members)
        members.sort()
        at = np.searchsorted(done, members)
        done = np.insert(done, at, members)
        done_starts = np.insert(done_starts, at, windows.lo[members])
        if count <= BATCH_WAVES:
            chunk = min(chunk * 2, largest)
        foreseen = (time.perf_counter() - chunk_started) * chunk / len(members)
    offsets[index] = placed
    return offsets.tolist()


def _fit_rows_one_by_one(
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    row_count: int,
    sizes: np.ndarray,
    members: np.ndarray,
    alignments: np.ndarray | None,
    fit: str,
) -> list[int]:
    """``_fit_rows`` in plain Python, for a handful of rows."""
    choose = first_fit if fit == "first" else best_fit
    bounds = np.searchsorted(rows, np.arange(row_count + 1)).tolist()
    starts_list, ends_list = starts.tolist(), ends.tolist()
    aligns = [1] * row_count if alignments is None else alignments[members].tolist()
    offsets = []
    for row, size in enumerate(sizes.tolist()):
        low, high = bounds[row], bounds[row + 1]
        blocks = list(zip(starts_list[low:high], ends_list[low:high], strict=True))
        offsets.append(choose(blocks, size, aligns[row]) if blocks else 0)
    return offsets


def _by_wave(
    waves: np.ndarray,
    count: int,
    rows: np.ndarray,
    others: np.ndarray,
    inner_rows: np.ndarray,
    inner: np.ndarray,
    members: np.ndarray,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per wave: its buffers, and the (row within the wave, buffer) pairs of the blocks
    they must miss, grouped by row: the placed conflicts (``rows``, ``others``) and those
    in the chunk (rows ``inner_rows`` and ``inner``, all in lower waves)."""
    if count == 1:
        return [(members, rows, others)]
    # Waves are small numbers, which a stable sort orders in linear time.
    small = waves.astype(np.uint16 if count < 1 << 16 else np.int64)
    by_wave = np.argsort(small, kind="stable")
    row_runs = np.searchsorted(small[by_wave], np.arange(count + 1))
    row_of = np.empty(len(members), dtype=np.int64)
    row_of[by_wave] = np.arange(len(members)) - row_runs[waves[by_wave]]
    pair_waves = small[rows]
    pair_order = np.argsort(pair_waves, kind="stable")
    pair_runs = np.searchsorted(pair_waves[pair_order], np.arange(count + 1))
    inner_waves = small[inner_rows]
    inner_order = np.argsort(inner_waves, kind="stable")
    inner_runs = np.searchsorted(inner_waves[inner_order], np.arange(count + 1))
    result = []
    for wave in range(count):
        mine = pair_order[pair_runs[wave] : pair_runs[wave + 1]]
        wave_rows = row_of[rows[mine]]
        blocks = others[mine]
        chunk_pairs = inner_order[inner_runs[wave] : inner_runs[wave + 1]]
        if len(chunk_pairs):
            wave_rows = np.concatenate((wave_rows, row_of[inner_rows[chunk_pairs]]))
            blocks = np.concatenate((blocks, members[inner[chunk_pairs]]))
            grouped = np.argsort(wave_rows, kind="stable")
            wave_rows, blocks = wave_rows[grouped], blocks[grouped]
        result.append((members[by_wave[row_runs[wave] : row_runs[wave + 1]]], wave_rows, blocks))
    return result


def _waves(rows: np.ndarray, earlier_rows: np.ndarray, count: int) -> np.ndarray:
    """The wave of each chunk row: one more than the highest wave among the chunk's rows
    that come before it in the order and conflict with it (row ``earlier_rows[k]`` for row
    ``rows[k]``)."""
    waves = np.zeros(count, dtype=np.int64)
    while len(rows):
        raised = np.zeros(count, dtype=np.int64)
        np.maximum.at(raised, rows, waves[earlier_rows] + 1)
        if np.array_equal(raised, waves):
            break
        waves = raised
    return waves


def _top_of(instance: Instance, offsets: list[int]) -> int:
    """The top of the placed buffers."""
    pairs = zip(offsets, instance.sizes, strict=True)
    return max((offset + size for offset, size in pairs if offset >= 0), default=0)


def _stack_the_rest(instance: Instance, offsets: list[int], rest: Iterable[int], top: int) -> None:
    """Stack the unplaced buffers of ``rest`` above ``top`` (that of the placed ones)."""
    sizes = instance.sizes
    for index in rest:
        if offsets[index] != UNPLACED:
            continue
        if sizes[index] == 0:
            offsets[index] = 0
            continue
        offset = align_up(top, instance.alignments[index])
        offsets[index] = offset
        top = offset + sizes[index]


def _stack_in_batches(
    offsets: np.ndarray, sizes: np.ndarray, alignments: np.ndarray | None, rest: np.ndarray
) -> None:
    """``_stack_the_rest`` on arrays (``batch_state`` keeps every sum within int64); this
    runs after the deadline, on up to every buffer, so it avoids a Python loop where it can."""
    placed = offsets >= 0
    top = int((offsets[placed] + sizes[placed]).max()) if placed.any() else 0
    rest = rest[offsets[rest] == UNPLACED]
    empty = sizes[rest] == 0
    offsets[rest[empty]] = 0
    rest = rest[~empty]
    if alignments is None or not (alignments[rest] != 1).any():
        ends = top + np.cumsum(sizes[rest])
        offsets[rest] = ends - sizes[rest]
        return
    for index, size, alignment in zip(
        rest.tolist(), sizes[rest].tolist(), alignments[rest].tolist(), strict=True
    ):
        offset = align_up(top, alignment)
        offsets[index] = offset
        top = offset + size


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
