"""Template filters for changes: signed sizes, signed milliseconds, percentages."""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from dashboard import compare
from dashboard.templatetags.peakwatch import MISSING, bytes_cell, human_bytes, ms

register = template.Library()


def _class(value) -> str:
    return "worse" if value > 0 else "better" if value < 0 else "same"


def _change_cell(value, text: str) -> str:
    return f'<span class="change {_class(value)}">{text}</span>'


# The cells below are plain HTML built from numbers alone, so nothing needs escaping; the
# comparison rows call them directly, the filters mark them safe.
def signed_bytes_cell(value: int | None) -> str:
    if value is None:
        return MISSING
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return (
        f'<span class="change {_class(value)}" title="{value:+,} bytes">'
        f"{sign}{human_bytes(abs(value))}</span>"
    )


def percent_cell(value: float | None) -> str:
    return MISSING if value is None else _change_cell(value, f"{value:+.1%}")


def ms_change_cell(value: float | None) -> str:
    return MISSING if value is None else _change_cell(value, f"{value:+.3f} ms")


@register.filter
def signed_bytes(value) -> str:
    if value is None or value == "":
        return MISSING
    return mark_safe(signed_bytes_cell(int(value)))


@register.filter
def signed_ms(value) -> str:
    if value is None or value == "":
        return MISSING
    return mark_safe(ms_change_cell(float(value)))


@register.filter
def percent(value) -> str:
    if value is None or value == "":
        return MISSING
    return mark_safe(percent_cell(float(value)))


@register.filter
def subtract(value, other):
    """``value - other``; empty when either is missing."""
    if value is None or other is None or value == "" or other == "":
        return None
    return value - other


@register.filter
def grouped(value) -> str:
    """An integer with thousands separators (an offset, a step): 1,048,576."""
    if value is None or value == "":
        return "—"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


_PART_WORDS = {"arena": "arena", "workspace": "kernel workspace", "outputs": "outputs"}


def _parts_html(before, after) -> str:
    """Planned bytes in their parts (``compare.Breakdown``s; None for a side that has no
    result), each part's change where both sides have one, and whether the kernel
    workspace was measured or estimated. Plain HTML of numbers and fixed words."""
    both = before is not None and after is not None
    pieces = []
    for part in compare.breakdown_change(before, after):
        key = part["key"]
        if key == "planned":
            continue
        label = _PART_WORDS[key]
        if key == "workspace":
            how = [h or "not recorded how" for h, side in zip(part["how"], (before, after),
                                                                  strict=True) if side]
            label += f" ({' → '.join(dict.fromkeys(how))})"
        value = _before_after(part, both, after is not None)
        pieces.append(f'<span data-part="{key}">{label} {value}</span>')
    return f'<span class="sub" data-parts>{" · ".join(pieces)}</span>'


def _before_after(part: dict, both: bool, has_after: bool) -> str:
    """A part's bytes: before → after and the change where both sides have it and it
    moved, else the one side's."""
    a, b = part["before"], part["after"]
    if both and a != b:
        return f"{bytes_cell(a)} → {bytes_cell(b)} {signed_bytes_cell(part['change'])}"
    return bytes_cell(b if has_after else a)


def _llm_html(row, parts: list[dict]) -> str:
    """An LLM deployment's ``parts`` (``row.llm_parts``: parameters, KV cache and each
    function's planned bytes) on both sides, and the function that moved. Fixed words,
    function names from a fixed list (``planner.report.LLM_FUNCTIONS``) and numbers."""
    both = row.base is not None and row.head is not None
    pieces = []
    for part in parts:
        value = _before_after(part, both, row.head is not None)
        pieces.append(f'<span data-llm-part="{escape(part["key"])}">{escape(part["label"])} '
                      f"{value}</span>")
    note = row.llm_note
    if note:
        pieces.append(f'<span data-llm-note>{escape(note)}</span>')
    return f'<span class="sub" data-llm-parts>{" · ".join(pieces)}</span>'


@register.simple_tag
def planned_parts(before, after) -> str:
    """What planned bytes are made of, for Results ``before`` and ``after`` (either may be
    None): see ``_parts_html``."""
    return mark_safe(_parts_html(
        compare.Breakdown.of(before) if before is not None else None,
        compare.Breakdown.of(after) if after is not None else None,
    ))


_REUSED = (
    ' <span class="muted" title="not recompiled: same model, strategy, TVM and target as an'
    ' earlier run">cached</span>'
)


#: Stand-ins for two result ids in a reversed URL, replaced by each row's own.
_BASE_MARK, _HEAD_MARK = 9_999_999_901, 9_999_999_902


@register.simple_tag
def comparison_rows(rows, by_toolchain: bool = False, points: bool = False) -> str:
    """The body rows of a comparison table (``compare.ComparisonRow``s), as the filters
    above would write them. Built here rather than in a template loop: a commit compares
    hundreds of series, and the template engine (and ``format_html``'s escaping of
    numbers) spent most of the page's time on them. ``by_toolchain``: the toolchain is what
    the table compares, so rows do not name it. ``points``: the table has a column naming
    each row's shape point (the rows come ordered by the point's values)."""
    # One reverse() for every row's link: it was a third of the rows' time.
    diff_url = reverse("plan-diff", args=[_BASE_MARK, _HEAD_MARK])
    html = []
    for row in rows:
        name = escape(row.strategy)
        if row.toolchain and not by_toolchain:
            name += f' <span class="muted small" data-row-toolchain>{escape(row.toolchain)}</span>'
        delta, relative = row.bytes_delta, row.bytes_relative
        latency, latency_relative = row.latency_delta, row.latency_relative
        links = ""
        if row.base is not None and row.head is not None:
            url = diff_url.replace(str(_BASE_MARK), str(row.base.pk)).replace(
                str(_HEAD_MARK), str(row.head.pk)
            )
            links = f'<a href="{url}">diff</a>'
        if row.head is not None and row.head.is_reused:
            links += _REUSED
        cells = (
            bytes_cell(row.base_bytes), bytes_cell(row.head_bytes), signed_bytes_cell(delta),
            percent_cell(relative), ms(row.base_latency), ms(row.head_latency),
            ms_change_cell(latency), percent_cell(latency_relative),
        )
        numbers = "".join(
            f'<td class="num" data-bytes-delta="{"" if delta is None else delta}">{cell}</td>'
            if i == 2 else f'<td class="num">{cell}</td>'
            for i, cell in enumerate(cells)
        )
        point = ""
        if points:
            label = escape(row.shape_label)
            point = (
                f'<td data-point="{label}"><code>{label}</code></td>' if label
                else f'<td data-point="">{MISSING}</td>'
            )
        html.append(
            f'<tr><th scope="row">{name}</th>{point}<td>{escape(row.board)}</td>{numbers}'
            f"<td>{links}</td></tr>"
        )
        parts = [side.breakdown if side else None for side in (row.base, row.head)]
        if any(p is not None and p.known for p in parts):
            html.append(
                f'<tr class="parts-row"><td colspan="{2 + int(points) + len(cells) + 1}">'
                f"{_parts_html(*parts)}</td></tr>"
            )
        llm_parts = row.llm_parts
        if llm_parts:
            html.append(
                f'<tr class="parts-row"><td colspan="{2 + int(points) + len(cells) + 1}">'
                f"{_llm_html(row, llm_parts)}</td></tr>"
            )
    return mark_safe("\n".join(html))  # text escaped above; the rest is numbers
