"""Tiny inline SVG lines of a series' last commits, drawn on the server for the overview."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sparkline:
    """A polyline in a ``width`` x ``height`` box; the template writes the SVG."""

    points: str  # "x,y x,y ..." for <polyline points>
    last_x: float
    last_y: float
    width: int
    height: int
    low: int
    high: int
    count: int

    @property
    def flat(self) -> bool:
        return self.low == self.high


def sparkline(values: list[float | None], *, width: int = 96, height: int = 22,
              pad: float = 2.0) -> Sparkline | None:
    """``values`` oldest first (None: no result at that commit, skipped); None if empty.

    Each line gets its own vertical scale, so a 1 % step in a large model still shows; a
    constant series is drawn as a flat line through the middle.
    """
    present = [(i, v) for i, v in enumerate(values) if v is not None]
    if not present:
        return None
    low, high = min(v for _, v in present), max(v for _, v in present)
    steps = max(1, len(values) - 1)

    def x(i: int) -> float:
        return round(pad + (width - 2 * pad) * i / steps, 1)

    def y(v: float) -> float:
        if high == low:
            return height / 2
        return round(height - pad - (height - 2 * pad) * (v - low) / (high - low), 1)

    coordinates = [(x(i), y(v)) for i, v in present]
    if len(coordinates) == 1:
        # One point still draws a short flat stroke rather than nothing.
        coordinates.insert(0, (pad, coordinates[0][1]))
    return Sparkline(
        points=" ".join(f"{cx},{cy}" for cx, cy in coordinates),
        last_x=coordinates[-1][0],
        last_y=coordinates[-1][1],
        width=width,
        height=height,
        low=int(low),
        high=int(high),
        count=len(present),
    )
