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
from planner.tvm.sources import ModelSource

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


def test_a_formula_is_stated_over_the_points_that_compiled_naming_those_left_out():
    from pathlib import Path

    from planner.shapes import parse_cli_dims
    from planner.tvm.cli import formula_lines

    models = Path(__file__).with_name("torch_models.py")
    axis = parse_cli_dims(["seq=x:1"], parse_cli(["seq=4,8,16"]))
    reports = compile_shapes(
        ModelSource(f"{models}:wrong_at", {"at": 16}), ["best-fit"], axis, repeat=0,
        memory_configs=(),
    )

    assert [r.ok for r in reports] == [True, True, False]
    formula = reports[0].peak_formula
    # seq=16 failed: the formula claims nothing there, and says it left it out.
    assert formula["range"] == {"seq": [4, 8]}
    assert formula["left_out"] == ["seq=16"]
    assert formula["checked"]["seq=16"]["point_failed"] is True
    assert formula["checked"]["seq=8"]["point_failed"] is False
    lines = formula_lines("best-fit", formula)
    expression = formula["expression"]
    assert lines[0].startswith(f"best-fit: intermediates = {expression} for seq in [4, 8]")
    assert lines[0].endswith("plan valid at every point compiled: yes")
    assert lines[1] == "  left out, their own compile failed: seq=16"


def test_a_formula_above_a_points_own_plan_says_by_how_much_and_why():
    from planner.tvm.cli import formula_lines

    formula = {
        "expression": "2048*seq", "range": {"seq": [16, 128]}, "left_out": [],
        "checked": {
            "seq=16": {"formula": 32_768, "planned": 32_768, "valid_plan": True},
            "seq=128": {"formula": 2_327_552, "planned": 2_294_784, "valid_plan": True},
        },
    }

    lines = formula_lines("best-fit", formula)

    assert lines[1].startswith("  at seq=128 the formula gives 2,327,552 B, 32,768 B above "
                               "the point's own plan (2,294,784 B): one placement serves")
    assert len(lines) == 2
