"""Human units in templates: the ``bytes`` and ``ms`` filters."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from dashboard.templatetags.peakwatch import human_bytes


def render(source: str, **context) -> str:
    return Template("{% load peakwatch %}" + source).render(Context(context))


@pytest.mark.parametrize(
    "value, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (51_712, "50.5 KiB"),
        (1_572_864, "1.5 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (-4096, "-4.0 KiB"),
        (None, "—"),
    ],
)
def test_it_formats_sizes_in_binary_units(value, text):
    assert human_bytes(value) == text


def test_it_puts_the_exact_byte_count_in_the_title():
    assert render("{{ n|bytes }}", n=51_712) == (
        '<span class="bytes" title="51,712 bytes">50.5 KiB</span>'
    )


def test_it_shows_a_dash_for_a_missing_size():
    assert render("{{ n|bytes }}", n=None) == "—"


@pytest.mark.parametrize(
    "value, text", [(0.410827, "0.411 ms"), (12.34, "12.3 ms"), (2500.0, "2.50 s"), (None, "—")]
)
def test_it_formats_latency_by_magnitude(value, text):
    assert render("{{ v|ms }}", v=value) == text


@pytest.mark.parametrize(
    "source, value, html",
    [
        (
            "{{ v|signed_bytes }}", 4096,
            '<span class="change worse" title="+4,096 bytes">+4.0 KiB</span>',
        ),
        (
            "{{ v|signed_bytes }}", -1536,
            '<span class="change better" title="-1,536 bytes">−1.5 KiB</span>',
        ),
        ("{{ v|signed_bytes }}", 0, '<span class="change same" title="+0 bytes">±0 B</span>'),
        ("{{ v|signed_bytes }}", "", "—"),
        ("{{ v|percent }}", -0.125, '<span class="change better">-12.5%</span>'),
        ("{{ v|percent }}", None, "—"),
        ("{{ v|signed_ms }}", 0.25, '<span class="change worse">+0.250 ms</span>'),
    ],
)
def test_change_filters_write_the_cells_the_comparison_rows_write(source, value, html):
    assert Template("{% load tracking %}" + source).render(Context({"v": value})) == html


def test_it_lets_long_names_wrap_at_their_parts_and_still_escapes_them():
    assert render("{{ name|breakable }}", name="repo:planning/mine.py:plan") == (
        "repo:<wbr>planning/<wbr>mine.py:<wbr>plan"
    )
    assert render("{{ name|breakable }}", name="mobilenet_v3_large") == (
        "mobilenet_<wbr>v3_<wbr>large"
    )
    assert render("{{ name|breakable }}", name="<b>a_b</b>") == "&lt;b&gt;a_<wbr>b&lt;/<wbr>b&gt;"
