"""Template filters for showing measurements in human units."""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

register = template.Library()

_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]
MISSING = "—"


def human_bytes(value: int | None) -> str:
    """``51712`` -> ``"50.5 KiB"``: binary units, one decimal above bytes.

    frontend/src/format.js formats the same way, so a chart tooltip and a table cell
    agree.
    """
    if value is None:
        return MISSING
    size = float(value)
    unit = 0
    while abs(size) >= 1024 and unit < len(_UNITS) - 1:
        size /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)} B"
    return f"{size:.1f} {_UNITS[unit]}"


def bytes_cell(value: int | None) -> str:
    """A human size with the exact byte count on hover, as plain HTML (numbers only, so
    nothing to escape): the filter below and the comparison rows both write it."""
    if value is None:
        return MISSING
    return f'<span class="bytes" title="{value:,} bytes">{human_bytes(value)}</span>'


@register.filter(name="bytes")
def bytes_with_exact_title(value: int | None) -> str:
    """A human size with the exact byte count on hover."""
    if value is None or value == "":
        return MISSING
    return mark_safe(bytes_cell(int(value)))  # numbers only


@register.filter
def ms(value: float | None) -> str:
    """Milliseconds with precision that suits the magnitude."""
    if value is None or value == "":
        return MISSING
    value = float(value)
    if value < 10:
        return f"{value:.3f} ms"
    if value < 1000:
        return f"{value:.1f} ms"
    return f"{value / 1000:.2f} s"


@register.filter
def plain_bytes(value: int | None) -> str:
    """A human size as plain text, for attributes (``aria-label``, ``title``)."""
    if value is None or value == "":
        return MISSING
    return human_bytes(int(value))


_PART_END = re.compile(r"([_:/+])(?=.)")


@register.filter
def breakable(value) -> str:
    """``value``, escaped, with a line break allowed after each ``_ : / +``, so a long model
    or strategy name (``repo:planning/mine.py:plan``) wraps at its parts in a narrow column
    instead of widening its table; browsers already break after a hyphen."""
    return mark_safe(_PART_END.sub(r"\1<wbr>", str(conditional_escape(value))))
