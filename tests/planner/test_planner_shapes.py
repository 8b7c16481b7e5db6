"""Shape axes: what a manifest or the command line declares, and what is refused."""

from __future__ import annotations

import re

import pytest

from planner.report import InvalidReport, StrategyReport, parse_report
from planner.shapes import (
    MAX_POINTS,
    ShapeAxis,
    ShapeError,
    label,
    parse_cli,
    parse_cli_dims,
    parse_shapes,
)


def test_a_tied_symbol_follows_the_one_it_names():
    axis = parse_shapes({"h": [1024, 64, 256], "w": "h"})
    assert [label(p) for p in axis.points] == ["h=64,w=64", "h=256,w=256", "h=1024,w=1024"]
    assert axis.bounds == {"h": 1024, "w": 1024}


def test_independent_symbols_multiply_and_a_bound_may_lie_above_the_points():
    axis = parse_shapes({"batch": [1, 2], "seq": {"points": [128, 512], "bound": 4096}})
    assert len(axis.points) == 4 and axis.bounds == {"batch": 2, "seq": 4096}
    assert {"batch": 2, "seq": 128} in axis.points


def test_the_command_line_says_the_same_as_the_manifest():
    assert parse_cli(["h=64,256", "w=h"]) == parse_shapes({"h": [64, 256], "w": "h"})
    assert parse_cli(["seq=128,512:4096"]) == parse_shapes(
        {"seq": {"points": [128, 512], "bound": 4096}}
    )


def test_an_axis_survives_json_and_json_is_checked():
    axis = parse_shapes({"h": [8, 16], "w": [8]})
    assert ShapeAxis.from_json(axis.to_json()) == axis
    broken = axis.to_json()
    broken["points"][0]["h"] = 32
    with pytest.raises(ShapeError, match="above its bound"):
        ShapeAxis.from_json(broken)


@pytest.mark.parametrize("spec, message", [
    ({}, "table of symbols"),
    ({"w": "h"}, "names no symbol with points"),
    ({"a": "b", "b": "c", "c": [1]}, "follows another symbol itself"),
    ({"h": []}, "list of sizes"),
    ({"h": [0, 8]}, "positive integer"),
    ({"h": [True]}, "positive integer"),
    ({"h": [8, 8]}, "lists a point twice"),
    ({"h": {"points": [64], "bound": 32}}, "above the bound 32"),
    ({"h": {"points": [64], "upper": 128}}, "not 'upper'"),
    ({"h w": [1]}, "not a symbol name"),
    ({"h": list(range(1, 9)), "w": list(range(1, 10))}, f"at most {MAX_POINTS}"),
])
def test_bad_declarations_say_what_is_wrong(spec, message):
    with pytest.raises(ShapeError, match=message):
        parse_shapes(spec)


@pytest.mark.parametrize("options, message", [
    (["h"], "'h': expected SYMBOL=N,N,... or SYMBOL=OTHER"),
    (["h="], "'h=': expected SYMBOL=N,N,..."),
    (["h=8,x"], "points must be integers, e.g. h=64,256:1024"),
    (["h=8:y"], "points must be integers"),
    (["h=8", "h=16"], "--shape h is given twice"),
])
def test_bad_command_line_shapes_say_what_is_wrong(options, message):
    with pytest.raises(ShapeError, match=re.escape(message)):
        parse_cli(options)


@pytest.mark.parametrize("options, message", [
    (["seq"], "--dim 'seq': expected SYMBOL=INPUT:DIM, e.g. seq=input_ids:1"),
    (["seq=0:1", "seq=1:1"], "--dim seq is given twice; list its places: seq=0:1,1:1"),
    (["seq=ids"], "'ids' is not INPUT:DIM"),
])
def test_bad_command_line_dims_say_what_is_wrong(options, message):
    with pytest.raises(ShapeError, match=re.escape(message)):
        parse_cli_dims(options, parse_cli(["seq=8,16"]))


def test_command_line_dims_give_each_symbol_its_places():
    axis = parse_cli_dims(["seq=input_ids:1,1:1"], parse_cli(["seq=8,16"]))
    assert axis.dims == {"seq": ("input_ids:1", "1:1")}


@pytest.mark.parametrize("point", [{"h": 0}, {"h w": 8}, {"h": 1 << 41}, {"h": "8"}])
def test_a_report_cannot_claim_a_point_that_is_no_shape(point):
    def report(shape_point):
        # A failed report: the point is all there is to check.
        return StrategyReport(
            model="m", strategy="greedy-by-size", error="x", shape_point=shape_point
        ).to_json()

    assert parse_report(report({"h": 8})).shape_point == {"h": 8}
    with pytest.raises(InvalidReport, match="shape_point"):
        parse_report(report(point))
