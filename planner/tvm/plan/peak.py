"""The instant where a plan holds the most bytes, and the tensors that hold them."""

from __future__ import annotations

from planner.tvm.plan.extract import Extraction


def peak_breakdown(extraction: Extraction, offsets: dict[str, int], top: int = 20) -> dict:
    """The instant where the plan, as applied, holds the most bytes, and who holds them.

    Tensors a rewrite merged (an in-place chain, a concatenation's inputs in their slices)
    share their bytes: at an instant they count once, as the union of the address ranges
    of the live tensors, and are listed as one entry with every producer. Without offsets
    (a stock plan that could not be read) each tensor counts on its own. The tensors of that
    instant (and the operators producing them) are what a user has to change to need less.
    """
    placed = bool(offsets) and all(t.name in offsets for t in extraction.tensors)
    events = sorted(
        [(t.lower, 1, i) for i, t in enumerate(extraction.tensors)]
        + [(t.upper, 0, i) for i, t in enumerate(extraction.tensors)]
    )
    live: set[int] = set()
    best, best_time = -1, None
    for index, (when, starting, which) in enumerate(events):
        (live.add if starting else live.discard)(which)
        # Measured once every event of an instant is in: ends before starts at one time.
        if index + 1 < len(events) and events[index + 1][0] == when:
            continue
        held = sum(size for size, _ in _regions(extraction, live, offsets, placed))
        if live and held > best:
            best, best_time = held, when
    if best_time is None:
        return {"time": None, "bytes": 0, "tensors": []}
    at_peak = {i for i, t in enumerate(extraction.tensors) if t.lower <= best_time < t.upper}
    regions = sorted(
        _regions(extraction, at_peak, offsets, placed), key=lambda region: -region[0]
    )
    entries = []
    for size, members in regions[:top]:
        first = members[0]
        producers = list(dict.fromkeys(filter(None, map(_producer_of, members))))
        entry = {
            "id": first.name, "size": size, "producer": " → ".join(producers),
            "offset": offsets.get(first.name),
        }
        if len(members) > 1:
            entry["merged"] = [t.name for t in members]
        entries.append(entry)
    return {
        "time": best_time,
        "bytes": best,
        "tensors": entries,
        "more": max(0, len(regions) - top),
    }


def _producer_of(tensor) -> str:
    """The operator writing ``tensor``; a lifted kernel temporary (``kernel.buffer``) is
    written by its kernel."""
    if tensor.producer:
        return tensor.producer
    kernel, dot, _ = tensor.name.partition(".")
    return f"{kernel} (temporary)" if dot else ""


def _regions(extraction: Extraction, indices, offsets: dict[str, int], placed: bool):
    """(bytes, tensors) per stretch of the arena that the tensors ``indices`` occupy:
    tensors whose address ranges overlap share one stretch."""
    tensors = [extraction.tensors[i] for i in sorted(indices)]
    if not placed:
        return [(t.size, [t]) for t in tensors]
    regions: list[tuple[int, list]] = []
    end = -1
    for tensor in sorted(tensors, key=lambda t: (offsets[t.name], -t.size)):
        start = offsets[tensor.name]
        if regions and start < end:
            size, members = regions[-1]
            grown = max(end, start + tensor.size)
            regions[-1] = (size + grown - end, [*members, tensor])
            end = grown
        else:
            regions.append((tensor.size, [tensor]))
            end = start + tensor.size
    return regions
