import xml.etree.ElementTree as ET

from planner.problem import Buffer, Problem
from planner.timeline import render_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_it_draws_one_rectangle_per_placed_buffer_stacked_by_offset():
    problem = Problem((Buffer("a", 0, 4, 100), Buffer("b", 2, 6, 50)))

    svg = render_svg(problem, {"a": 0, "b": 100}, title="demo <plan>", peak_time=2)

    root = ET.fromstring(svg)
    rects = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert [r.find(f"{SVG}title").text.split(":")[0] for r in rects] == ["a", "b"]
    a, b = (float(r.get("y")) for r in rects)
    assert b < a  # b sits above a: higher addresses are drawn higher
    assert "demo &lt;plan&gt;" in svg
    assert any("peak instant t=2" in (t.text or "") for t in root.iter(f"{SVG}title"))
