"""An exact search for a placement within a capacity, after MiniMalloc (Moffitt, ASPLOS 2023).

The search only builds *canonical* solutions: buffers are placed in non-decreasing order of
(offset, preorder rank), each at the lowest offset its placed conflicts allow. Every
feasible problem has such a solution (push every buffer down as far as it goes, then sort by
offset), so a failed search proves infeasibility. On top of that, as in MiniMalloc:

* *sections*: time is cut at every interval end; a section's *floor* is the lowest offset a
  future buffer may take there (the top of what is placed there, at least the last placed
  offset, at least the lowest minimum offset of the unplaced buffers live there). A partial
  plan is pruned when some section's floor plus the sizes still to be placed there exceeds
  the capacity;
* *dominance*: a buffer is not placed at or above the height where some other unplaced
  buffer would end if it went to its minimum offset: that buffer would fit into the gap;
* *dynamic decomposition*: when no unplaced buffer spans some instant any more, the two
  sides are solved independently;
* three static preorderings (MiniMalloc's WAT, TAW, TWA) searched side by side, each in its
  own state and in turns of a few nodes, so that one unlucky ordering does not use up the
  time; the first to finish answers (a proof of infeasibility from any of them is one).

Per node the work is done by numpy over the buffers and sections of the current partition.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from planner.strategies._placement import Instance, align_up

FOUND = "found"
INFEASIBLE = "infeasible"
ABORTED = "aborted"  # node limit reached
TIMEOUT = "timeout"

HEURISTICS = ("WAT", "TAW", "TWA")

# Above any capacity the search is used with (see optimal.EXACT_SEARCH_MAX).
_BIG = np.int64(1) << 62


# A search step: a generator that pauses (yields None) now and then, returning whether it
# found a placement.
Steps = Generator[None, None, bool]
PAUSE_EVERY = 32


@dataclass
class SearchResult:
    status: str
    offsets: list[int] | None
    nodes: int


class CanonicalSearch:
    """Searches placements within ``capacity`` for the free buffers of an instance.

    Free buffers are those with a non-zero size and no fixed offset; fixed-offset buffers
    are obstacles that a free buffer's minimum offset skips over.
    """

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        n = len(instance)
        free = [i for i in range(n) if instance.sizes[i] > 0 and instance.fixed[i] is None]
        self.free = np.array(free, dtype=np.int64)
        m = len(free)
        self.m = m
        self.sizes = np.array([instance.sizes[g] for g in free], dtype=np.int64)
        self.alignments = np.array([instance.alignments[g] for g in free], dtype=np.int64)
        self.aligned = bool((self.alignments > 1).any())
        lowers = np.array([instance.lowers[g] for g in free], dtype=np.int64)
        uppers = np.array([instance.uppers[g] for g in free], dtype=np.int64)
        self.widths = uppers - lowers

        # Sections: the spans between consecutive distinct interval ends, only those in
        # which some free buffer lives.
        points = np.unique(np.concatenate([lowers, uppers])) if m else np.zeros(0, np.int64)
        lo_idx = np.searchsorted(points, lowers)
        hi_idx = np.searchsorted(points, uppers)
        live = np.zeros(max(len(points), 1), dtype=np.int64)
        np.add.at(live, lo_idx, 1)
        np.add.at(live, hi_idx, -1)
        occupied = np.cumsum(live)[: max(len(points) - 1, 0)] > 0
        section_of_span = np.cumsum(occupied) - 1
        self.s_lo = section_of_span[lo_idx] if m else lo_idx
        self.s_hi = (section_of_span[hi_idx - 1] + 1) if m else hi_idx
        self.num_sections = int(occupied.sum())

        # Section membership (CSR, by section) for the unallocated floor.
        spans = self.s_hi - self.s_lo
        members = np.repeat(np.arange(m), spans)
        sections = (
            np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans)
        ) + np.repeat(self.s_lo, spans)
        by_section = np.argsort(sections, kind="stable")
        self.member_of = members[by_section]
        counts = np.bincount(sections, minlength=self.num_sections)
        self.member_ptr = np.zeros(self.num_sections + 1, dtype=np.int64)
        np.cumsum(counts, out=self.member_ptr[1:])
        self.member_ptr_list = self.member_ptr.tolist()
        self.size_list = self.sizes.tolist()
        self.s_lo_list = self.s_lo.tolist()
        self.s_hi_list = self.s_hi.tolist()
        self.initial_total = np.bincount(
            sections, weights=self.sizes[members], minlength=self.num_sections
        ).astype(np.int64)

        # Overlaps among free buffers, from the instance's conflict graph.
        indptr, indices = instance.conflicts()
        local_of = np.full(n, -1, dtype=np.int64)
        local_of[self.free] = np.arange(m)
        is_fixed = np.array([f is not None for f in instance.fixed], dtype=bool)
        self.overlaps: list[np.ndarray] = []
        fixed_blocks: list[list[tuple[int, int]]] = []
        for g in free:
            neighbours = indices[indptr[g] : indptr[g + 1]]
            mapped = local_of[neighbours]
            self.overlaps.append(mapped[mapped >= 0])
            blocks = [
                (instance.fixed[o], instance.fixed[o] + instance.sizes[o])
                for o in neighbours[is_fixed[neighbours]].tolist()
            ]
            fixed_blocks.append(sorted(blocks))
        self.fixed_blocks = fixed_blocks
        self.has_fixed = np.array([bool(b) for b in fixed_blocks], dtype=bool)
        self.any_fixed = bool(self.has_fixed.any())

        # Initial cut counts: how many buffers span the boundary after each section.
        cut_delta = np.zeros(self.num_sections + 1, dtype=np.int64)
        np.add.at(cut_delta, self.s_lo, 1)
        np.add.at(cut_delta, self.s_hi - 1, -1)
        self.initial_cuts = np.cumsum(cut_delta)[: max(self.num_sections - 1, 0)]

    # ----------------------------------------------------------------------------------

    def _lift(self, buffer: int, offset: int) -> int:
        """The lowest aligned offset >= ``offset`` that misses the fixed obstacles."""
        size = int(self.sizes[buffer])
        alignment = int(self.alignments[buffer])
        candidate = align_up(offset, alignment)
        for start, end in self.fixed_blocks[buffer]:
            if candidate + size <= start:
                break
            if end > candidate:
                candidate = align_up(end, alignment)
        return candidate

    def solve(self, capacity: int, deadline: float, node_limit: int | None = None) -> SearchResult:
        """Look for a placement of every free buffer within ``capacity``.

        Returns FOUND with the offsets of the free buffers (in the order of ``self.free``),
        INFEASIBLE when no placement exists, TIMEOUT at the deadline, or ABORTED after
        ``node_limit`` nodes.
        """
        self.capacity = capacity
        self.deadline = deadline
        self.nodes = 0
        if self.m == 0:
            return SearchResult(FOUND, [], 0)
        if int(self.sizes.max()) > capacity or int(self.initial_total.max()) > capacity:
            return SearchResult(INFEASIBLE, None, 0)
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, 10 * self.m + 1000))
        try:
            return self._interleave(node_limit)
        finally:
            sys.setrecursionlimit(old_limit)

    def _reset(self) -> None:
        m = self.m
        self.nodes = 0
        self.placed = np.zeros(m, dtype=bool)
        self.offsets = np.full(m, -1, dtype=np.int64)
        self.solution = np.full(m, -1, dtype=np.int64)
        self.min_offsets = np.zeros(m, dtype=np.int64)
        if self.any_fixed:
            for b in np.flatnonzero(self.has_fixed).tolist():
                self.min_offsets[b] = self._lift(b, 0)
        self.floor = np.zeros(self.num_sections, dtype=np.int64)
        self.total = self.initial_total.copy()
        self.cuts = self.initial_cuts.copy()

    def _interleave(self, node_limit: int | None) -> SearchResult:
        # One search per preordering, each with its own state, resumed in turns of
        # PAUSE_EVERY nodes: the first to finish answers. (MiniMalloc restarts them with a
        # doubling node limit instead, which repeats most of the work.)
        runs = []
        for heuristic in HEURISTICS:
            run = copy.copy(self)
            run._reset()
            run.heuristic = heuristic
            runs.append((run, run._sub_solve(np.arange(self.m), 0, self.num_sections)))
        while True:
            for run, steps in runs:
                try:
                    next(steps)
                except StopIteration as stop:
                    nodes = sum(r.nodes for r, _ in runs)
                    if stop.value:
                        return SearchResult(FOUND, run.solution.tolist(), nodes)
                    return SearchResult(INFEASIBLE, None, nodes)
            nodes = sum(r.nodes for r, _ in runs)
            if time.perf_counter() > self.deadline:
                return SearchResult(TIMEOUT, None, nodes)
            if node_limit is not None and nodes >= node_limit:
                return SearchResult(ABORTED, None, nodes)

    def _sub_solve(self, buffers: np.ndarray, s_lo: int, s_hi: int) -> Steps:
        """Solve the partition of ``buffers`` over sections [s_lo, s_hi), splitting it at
        the sections that no buffer spans; False if some part is infeasible."""
        cuts = self.cuts[s_lo : s_hi - 1]
        boundaries = (np.flatnonzero(cuts == 0) + s_lo + 1).tolist()
        starts = [s_lo, *boundaries]
        ends = [*boundaries, s_hi]
        for lo, hi in zip(starts, ends, strict=True):
            inside = buffers[(self.s_hi[buffers] > lo) & (self.s_lo[buffers] < hi)]
            if inside.size == 0:
                continue
            ordered = self._preorder(inside)
            if not (yield from self._search(ordered, lo, hi, -1, -1)):
                return False
        return True

    def _preorder(self, buffers: np.ndarray) -> np.ndarray:
        # MiniMalloc's static preorderings: W width, A area, T largest section total; all
        # descending, ties by index.
        widths = self.widths[buffers]
        sizes = self.sizes[buffers]
        areas = widths * sizes
        starts = self.s_lo[buffers]
        ends = self.s_hi[buffers]
        totals = np.array(
            [
                int(self.total[a:b].max())
                for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        keys = {"W": -widths, "A": -areas, "T": -totals}
        # np.lexsort sorts by the last key first.
        order = np.lexsort((buffers, *(keys[c] for c in reversed(self.heuristic))))
        return buffers[order]

    def _search(
        self, ordered: np.ndarray, s_lo: int, s_hi: int, last_offset: int, last_rank: int
    ) -> Steps:
        self.nodes += 1
        if not self.nodes % PAUSE_EVERY:
            yield
        placed = self.placed
        ranks = np.flatnonzero(~placed[ordered])
        if ranks.size == 0:
            self.solution[ordered] = self.offsets[ordered]
            return True
        candidates = ordered[ranks]
        offsets = self.min_offsets[candidates]
        min_height = int((offsets + self.sizes[candidates]).min())
        # Canonical: (offset, rank) never decreases. Dominance: nothing at or above the
        # height where some unplaced buffer would already end.
        keep = (offsets < min_height) & (
            (offsets > last_offset) | ((offsets == last_offset) & (ranks > last_rank))
        )
        # Section inference, the part that does not depend on which buffer goes next: once
        # a buffer is at ``offset``, every section's floor is at least ``offset`` (in its own
        # sections the floor becomes its top and what is left drops by its size, which comes
        # to the same), so ``offset`` plus the largest section total must fit.
        keep &= offsets <= self.capacity - int(self.total[s_lo:s_hi].max())
        if not keep.any():
            return False
        ranks = ranks[keep]
        offsets = offsets[keep]
        order = np.lexsort((ranks, offsets))
        sizes = self.size_list
        section_lo = self.s_lo_list
        section_hi = self.s_hi_list
        min_offsets = self.min_offsets
        floor = self.floor
        total = self.total
        for rank, offset in zip(ranks[order].tolist(), offsets[order].tolist(), strict=True):
            buffer = int(ordered[rank])
            size = sizes[buffer]
            top = offset + size
            placed[buffer] = True
            self.offsets[buffer] = offset
            # Recorded now: a decomposed branch's leaves only record their own partition.
            self.solution[buffer] = offset
            # A placed buffer no longer bounds the floor of its sections from below.
            min_offsets[buffer] = _BIG
            # Raise the minimum offsets of the unplaced overlapping buffers.
            neighbours = self.overlaps[buffer]
            neighbours = neighbours[~placed[neighbours]]
            old_min = min_offsets[neighbours]
            if self.aligned:
                bar = -(-top // self.alignments[neighbours]) * self.alignments[neighbours]
                new_min = np.maximum(old_min, bar)
            else:
                new_min = np.maximum(old_min, top)
            if self.any_fixed:
                for k in np.flatnonzero(self.has_fixed[neighbours] & (new_min > old_min)):
                    new_min[k] = self._lift(int(neighbours[k]), int(new_min[k]))
            min_offsets[neighbours] = new_min
            b_lo = section_lo[buffer]
            b_hi = section_hi[buffer]
            old_floor = floor[b_lo:b_hi].copy()
            floor[b_lo:b_hi] = top
            total[b_lo:b_hi] -= size
            # Only the sections of this buffer and of the buffers it raised can newly break
            # the bound (elsewhere it held before, and ``offset`` was checked above).
            raised = neighbours[new_min > old_min]
            if raised.size:
                c_lo = max(s_lo, min(b_lo, int(self.s_lo[raised].min())))
                c_hi = min(s_hi, max(b_hi, int(self.s_hi[raised].max())))
            else:
                c_lo, c_hi = b_lo, b_hi
            found = False
            if self._check(c_lo, c_hi):
                # Dynamic decomposition: the boundaries this buffer alone still spanned.
                cuts = self.cuts[b_lo : b_hi - 1]
                cuts -= 1
                if cuts.size and not cuts.all():
                    found = yield from self._sub_solve(ordered[~placed[ordered]], s_lo, s_hi)
                else:
                    found = yield from self._search(ordered, s_lo, s_hi, offset, rank)
                cuts += 1
            total[b_lo:b_hi] += size
            floor[b_lo:b_hi] = old_floor
            min_offsets[neighbours] = old_min
            min_offsets[buffer] = offset
            self.offsets[buffer] = -1
            placed[buffer] = False
            if found:
                return True
        return False

    def _check(self, s_lo: int, s_hi: int) -> bool:
        """Section inference with the unallocated floor: nothing goes below the lowest
        minimum offset of the unplaced buffers live in a section, and what is left there
        must fit above it. (The bound with ``offset`` as the floor was checked by
        ``_search``; placed buffers have a minimum offset of _BIG here.)"""
        ptr = self.member_ptr_list
        p_lo = ptr[s_lo]
        lowest = np.minimum.reduceat(
            self.min_offsets[self.member_of[p_lo : ptr[s_hi]]], self.member_ptr[s_lo:s_hi] - p_lo
        )
        # A section with nothing left to place has total 0: capping keeps it from failing.
        np.minimum(lowest, self.capacity, out=lowest)
        np.maximum(lowest, self.floor[s_lo:s_hi], out=lowest)
        lowest += self.total[s_lo:s_hi]
        return int(lowest.max()) <= self.capacity
