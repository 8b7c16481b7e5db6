"""A peak formula at points where sizes are below the arena's 64-byte alignment (issue 33).

zoo:pool_reuse with one float16 channel: its buffers are 2*h*w bytes, 8 B at h = w = 2, so
each is rounded up at the small points and a polynomial through the rounded sizes does not
exist. The formula keeps the rounding, and each point's check reads that point's own plan
and bound.
"""

import pytest

from planner.shapes import parse_cli
from planner.tvm.cli import format_shape_notes
from planner.tvm.shape_axis import compile_shapes
from planner.tvm.zoo import ModelSource

pytestmark = pytest.mark.slow

SOURCE = ModelSource("zoo:pool_reuse", {"resolution": 8, "channels": 1, "dynamic": True})
POINTS = ["h=2,w=2", "h=4,w=4", "h=8,w=8"]


@pytest.fixture(scope="module")
def reports():
    return compile_shapes(
        SOURCE, ["tvm-stock", "best-fit"], parse_cli(["h=2,4,8", "w=h"]),
        repeat=1, memory_configs=(),
    )


def test_a_formula_holds_where_sizes_are_rounded_up(reports):
    best = {",".join(f"{k}={v}" for k, v in r.shape_point.items()): r
            for r in reports if r.strategy == "best-fit"}
    formula = best["h=2,w=2"].peak_formula

    # The input in NHWC (3 float16 channels, 6*h*w B) and the first convolution's output
    # (2*h*w B) live at once, each rounded up to 64 B.
    assert formula["expression"] == "64*ceil(3*h**2/32) + 64*ceil(h**2/32)", formula
    for point in POINTS:
        check, own = formula["checked"][point], best[point]
        assert check["valid_plan"] is True
        assert check["planned"] == own.intermediate_bytes
        # The point's own bound, not the formula's value at the point.
        assert check["lower_bound"] == own.lower_bound_bytes
        assert check["formula"] >= check["planned"] >= check["lower_bound"]
    assert formula["checked"]["h=2,w=2"]["formula"] == 128


def test_the_command_line_says_why_a_strategy_has_no_formula(reports):
    notes = format_shape_notes(reports)

    assert "best-fit: intermediates = 64*ceil(3*h**2/32) + 64*ceil(h**2/32)" in notes
    assert "tvm-stock: no peak formula: TVM's planner plans the symbolic build once" in notes
    stock = next(r for r in reports if r.strategy == "tvm-stock")
    assert "at the bound" in stock.peak_formula["missing"]
