"""A symbolic model compiled at each point of its shape axis (issue 25), with real TVM.

The users' case 1 (conv -> avg_pool at symbolic h, w; planner/tvm/zoo/pool_reuse.py) at
8x8, 16x16 and 32x32, channels small so that every strategy runs in seconds.
"""

import json
from pathlib import Path

import pytest

from planner.job_spec import JobSpec
from planner.peak_formula import Polynomial, SymbolicBuffer, fit, symbolic_plan
from planner.report import parse_report, point_folder
from planner.shapes import ShapeError, parse_cli, parse_shapes
from planner.tvm.compile import STOCK, strategy_names
from planner.tvm.job import run_compile
from planner.tvm.shape_axis import compile_shapes
from planner.tvm.sources import ModelSource
from tests.tvm.test_compile_cli import planner

pytestmark = pytest.mark.slow

SOURCE = ModelSource("zoo:pool_reuse", {"resolution": 32, "channels": 4, "dynamic": True})
AXIS = parse_cli(["h=8,16,32", "w=h"])
POINTS = ["h=8,w=8", "h=16,w=16", "h=32,w=32"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    artifacts = tmp_path_factory.mktemp("points")
    reports = compile_shapes(
        SOURCE, strategy_names(), AXIS, repeat=0, memory_configs=(), artifacts_dir=artifacts
    )
    return reports, artifacts


def by_point(reports, strategy):
    return {",".join(f"{k}={v}" for k, v in r.shape_point.items()): r
            for r in reports if r.strategy == strategy}


def test_every_strategy_is_built_and_checked_at_every_point(compiled):
    reports, artifacts = compiled

    assert len(reports) == len(strategy_names()) * len(POINTS)
    for report in reports:
        assert report.ok, (report.strategy, report.shape_point, report.error)
        assert report.outputs_match is True
        folder = point_folder(artifacts, report.shape_point)
        assert Path(report.artifacts["plan.json"]).is_relative_to(folder)
        # The worker's side takes the report as the sandbox writes it.
        parse_report(json.loads(json.dumps(report.to_json())))


def test_each_points_plan_grows_with_the_point_and_stays_below_the_reservation(compiled):
    reports, _ = compiled
    reserved = {r.reserved_at_bound_bytes for r in reports}

    assert len(reserved) == 1 and reserved.pop() == 16_384
    for strategy in strategy_names():
        points = by_point(reports, strategy)
        figures = [points[p].intermediate_bytes for p in POINTS]
        assert figures == sorted(figures) and figures[0] < figures[-1], (strategy, figures)
        for below in POINTS[:-1]:
            assert points[below].intermediate_bytes < points[below].reserved_at_bound_bytes
    # TVM plans the symbolic build at the bound as it plans the static one there.
    assert by_point(reports, STOCK)["h=32,w=32"].intermediate_bytes == 16_384


def test_a_plain_strategys_peak_is_a_formula_checked_at_every_point(compiled):
    reports, _ = compiled

    for strategy in ("greedy-by-size", "best-fit", "optimal"):
        points = by_point(reports, strategy)
        formula = points["h=8,w=8"].peak_formula
        # Two conv outputs of 4 float16 channels live at once: 2 * 4 * 2 * h * w bytes.
        assert formula["expression"] == "16*h**2", formula
        assert formula["ties"] == {"w": "h"} and formula["range"] == {"h": [8, 32]}
        assert set(formula["checked"]) == set(POINTS)
        for point, check in formula["checked"].items():
            assert check["valid_plan"] is True
            assert check["formula"] >= check["lower_bound"]
            assert check["planned"] == points[point].intermediate_bytes
            assert check["formula"] == check["planned"], (strategy, point)
    # Rewritten and reordered plans change the problem per point: no formula, said so.
    rewritten = by_point(reports, "best-fit+rewrites")["h=8,w=8"]
    assert "expression" not in rewritten.peak_formula
    assert "rewrites merge tensors" in rewritten.peak_formula["missing"]


def test_a_formula_keeps_a_plan_valid_where_the_sizes_shrink_unevenly():
    # a (8*h) and then b (h + 64) sit at 0, one after the other in time; c lives across both
    # and sits on the higher of them, which is a at the bound but b below h = 64/7.
    h = ("h",)
    a, b = Polynomial.of(h, {(1,): 8}), Polynomial.of(h, {(0,): 64, (1,): 1})
    c = Polynomial.constant(h, 64)
    buffers = [SymbolicBuffer("a", 0, 2, a), SymbolicBuffer("b", 2, 4, b),
               SymbolicBuffer("c", 1, 3, c)]

    plan = symbolic_plan(buffers, {"a": 0, "b": 0, "c": 256}, {"h": 32}, {"h": 1})

    assert plan.expression() == "max(8*h + 64, h + 128)"
    for value in (1, 4, 9, 16, 32):
        offsets = plan.offsets_at({"h": value})
        assert offsets["c"] == max(8 * value, value + 64)
        assert plan.peak_at({"h": value}) == offsets["c"] + 64


def test_sizes_are_fitted_exactly():
    size = fit(("h", "w"), (1, 2), [[8, 16, 24], [8, 16, 24]], lambda v: 6 * v["h"] * v["w"] ** 2)

    assert size.text() == "6*h*w**2"
    assert size({"h": 100, "w": 7}) == 6 * 100 * 49


def test_an_axis_naming_an_unknown_or_missing_symbol_is_a_clear_error():
    with pytest.raises(ShapeError, match="c is no symbol of pool_reuse"):
        compile_shapes(SOURCE, [STOCK], parse_cli(["h=8", "w=h", "c=4"]))
    with pytest.raises(ShapeError, match="no points for w of pool_reuse"):
        compile_shapes(SOURCE, [STOCK], parse_cli(["h=8,16"]))


def test_a_compile_job_takes_the_shape_axis(tmp_path):
    job = {
        "model": "pool", "source": SOURCE.source, "params": SOURCE.params,
        "strategies": [STOCK, "best-fit"], "repeat": 0, "memory_configs": [],
        "shapes": parse_cli(["h=8,16:32", "w=h"]).to_json(),
    }

    reports = run_compile(JobSpec.from_json(job))

    assert [(r.strategy, r.shape_point["h"]) for r in reports] == [
        (STOCK, 8), ("best-fit", 8), (STOCK, 16), ("best-fit", 16)]
    assert all(r.ok and r.reserved_at_bound_bytes == 16_384 for r in reports)
    assert reports[1].peak_formula["checked"]["h=16,w=16"]["valid_plan"] is True


def test_the_command_line_prints_a_row_per_strategy_and_point(tmp_path):
    out = tmp_path / "reports.json"
    model = ["compile", "zoo:pool_reuse", "--param", "channels=4", "--param", "dynamic=true"]

    proc = planner(*model, "--shape", "h=8,16,32", "--shape", "w=h", "--strategy", STOCK,
                   "--strategy", "best-fit", "--repeat", "0", "--no-memory",
                   "--json", str(out))

    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[:2] for line in proc.stdout.splitlines()[1:7]]
    assert rows == [[p, s] for p in POINTS for s in (STOCK, "best-fit")]
    assert "reserved at the bound: 16,384 B" in proc.stdout
    assert "best-fit: intermediates = 16*h**2 for h in [8, 32], w = h" in proc.stdout
    assert len(json.loads(out.read_text())) == 6

    bad = planner(*model, "--shape", "h=8,x")
    assert bad.returncode == 2 and "points must be integers" in bad.stderr
    unknown = planner(*model, "--shape", "h=8", "--shape", "w=h", "--shape", "c=3")
    assert unknown.returncode == 2 and "c is no symbol of pool_reuse" in unknown.stderr


def test_a_torchvision_network_is_measured_at_each_resolution():
    # A network nobody here wrote: torch.export names its symbols, the source renames them.
    reports = compile_shapes(
        ModelSource("torchvision:mobilenet_v3_small", {"image": 64, "dynamic": True}),
        ["tvm-stock", "best-fit"], parse_shapes({"h": [32, 64], "w": "h"}),
        repeat=0, memory_configs=(),
    )

    by = {(r.strategy, r.shape_point["h"]): r for r in reports}
    assert set(by) == {(s, h) for s in ("tvm-stock", "best-fit") for h in (32, 64)}
    assert all(r.error is None and r.outputs_match for r in reports), [r.error for r in reports]
    for strategy in ("tvm-stock", "best-fit"):
        assert by[strategy, 64].intermediate_bytes > by[strategy, 32].intermediate_bytes
    assert by["best-fit", 64].peak_formula["symbols"] == ["h"]
