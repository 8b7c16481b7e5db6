"""Template filters for changes: signed sizes, signed milliseconds, percentages."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

from dashboard.templatetags.peakwatch import MISSING, human_bytes

register = template.Library()


def _class(value) -> str:
    return "worse" if value > 0 else "better" if value < 0 else "same"


@register.filter
def signed_bytes(value) -> str:
    if value is None or value == "":
        return MISSING
    value = int(value)
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return format_html(
        '<span class="change {}" title="{} bytes">{}{}</span>',
        _class(value), f"{value:+,}", sign, human_bytes(abs(value)),
    )


@register.filter
def signed_ms(value) -> str:
    if value is None or value == "":
        return MISSING
    return format_html('<span class="change {}">{}</span>', _class(value), f"{value:+.3f} ms")


@register.filter
def percent(value) -> str:
    if value is None or value == "":
        return MISSING
    return format_html('<span class="change {}">{}</span>', _class(value), f"{value:+.1%}")


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
