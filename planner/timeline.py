"""Draw a plan as a picture: time across, address up, one rectangle per buffer.

Plain SVG text, so a browser shows it and nothing needs installing.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from planner.problem import Problem

WIDTH, HEIGHT, MARGIN, LEFT = 960, 480, 48, 96


def render_svg(
    problem: Problem,
    offsets: Mapping[str, int],
    *,
    title: str = "",
    peak_time: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """An SVG of ``problem`` placed at ``offsets``; ``peak_time`` draws the peak instant."""
    placed = [b for b in problem.buffers if b.id in offsets]
    start = min((b.lower for b in placed), default=0)
    end = max((b.upper for b in placed), default=1)
    top = max((offsets[b.id] + b.size for b in placed), default=1) or 1
    span = max(1, end - start)
    plot_w, plot_h = WIDTH - LEFT - MARGIN, HEIGHT - 2 * MARGIN

    def x(t: int) -> float:
        return LEFT + (t - start) / span * plot_w

    def y(address: int) -> float:
        return HEIGHT - MARGIN - address / top * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="{MARGIN - 18}" font-size="14">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" '
        f'y2="{HEIGHT - MARGIN}" stroke="#555"/>',
        f'<line x1="{LEFT}" y1="{MARGIN}" x2="{LEFT}" y2="{HEIGHT - MARGIN}" '
        f'stroke="#555"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 14}" text-anchor="middle">time (binding)</text>',
        f'<text x="{LEFT - 6}" y="{MARGIN + 4}" text-anchor="end">{top:,} B</text>',
        f'<text x="{LEFT - 6}" y="{HEIGHT - MARGIN}" text-anchor="end">0</text>',
    ]
    for index, buffer in enumerate(sorted(placed, key=lambda b: (b.lower, b.id))):
        offset = offsets[buffer.id]
        hue = (index * 47) % 360
        label = (labels or {}).get(buffer.id, "")
        tooltip = f"{buffer.id}: {buffer.size:,} B at {offset:,}, t=[{buffer.lower},{buffer.upper})"
        if label:
            tooltip += f", {label}"
        parts.append(
            f'<rect x="{x(buffer.lower):.1f}" y="{y(offset + buffer.size):.1f}" '
            f'width="{max(0.5, x(buffer.upper) - x(buffer.lower)):.1f}" '
            f'height="{max(0.5, y(offset) - y(offset + buffer.size)):.1f}" '
            f'fill="hsl({hue},60%,65%)" stroke="hsl({hue},60%,35%)" stroke-width="0.5">'
            f"<title>{escape(tooltip)}</title></rect>"
        )
    if peak_time is not None:
        parts.append(
            f'<line x1="{x(peak_time):.1f}" y1="{MARGIN}" x2="{x(peak_time):.1f}" '
            f'y2="{HEIGHT - MARGIN}" stroke="#d00" stroke-dasharray="4 3">'
            f"<title>peak instant t={peak_time}</title></line>"
        )
    parts.append("</svg>")
    return "\n".join(parts)
