"""``python -m planner compile``, run as a user would run it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def planner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )


def test_it_prints_a_table_and_writes_every_strategys_report(tmp_path):
    out = tmp_path / "report.json"

    proc = planner("compile", "zoo:small_cnn", "--param", "channels=4", "--param",
                   "resolution=16", "--strategy", "tvm-stock", "--strategy", "best-fit",
                   "--repeat", "2", "--artifacts", str(tmp_path / "a"), "--json", str(out))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].split()[:2] == ["strategy", "planned"]
    reports = json.loads(out.read_text())
    assert [r["strategy"] for r in reports] == ["tvm-stock", "best-fit"]
    for report in reports:
        assert report["outputs_match"] is True
        assert report["planned_bytes"] > 0 and report["measured_peak_bytes"] > 0
        held = report["intermediate_bytes"] + report["kernel_workspace_bytes"]
        assert report["lower_bound_bytes"] <= held
        assert set(report["latency_ms"]) >= {"median", "p90"}
        assert report["compile_seconds"] > 0
        assert Path(report["artifacts"]["plan.json"]).is_file()
        assert Path(report["artifacts"]["model.so"]).is_file()


def test_it_exits_2_naming_the_problem_with_a_bad_model():
    proc = planner("compile", "zoo:resnet-9000")
    assert proc.returncode == 2
    assert "unknown zoo model 'resnet-9000'" in proc.stderr


def test_it_exits_2_on_an_unknown_strategy():
    proc = planner("compile", "zoo:small_cnn", "--strategy", "magic")
    assert proc.returncode == 2
    assert "unknown strategy magic" in proc.stderr


def test_the_table_shows_the_bound_of_the_problem_really_planned():
    from planner.report import StrategyReport
    from planner.tvm.cli import format_table

    plain = StrategyReport(model="m", strategy="best-fit", lower_bound_bytes=1000)
    merged = StrategyReport(
        model="m", strategy="best-fit+rewrites", lower_bound_bytes=1000,
        rewritten_lower_bound_bytes=640,
    )
    reordered = StrategyReport(
        model="m", strategy="best-fit+reorder", lower_bound_bytes=1000,
        chosen_order_lower_bound_bytes=800, order={"kept": "chosen order"},
    )
    kept = StrategyReport(
        model="m", strategy="best-fit+reorder", lower_bound_bytes=1000,
        chosen_order_lower_bound_bytes=800, order={"kept": "program order"},
    )

    lines = format_table([plain, merged, reordered, kept]).splitlines()

    assert "bound planned" in lines[0]
    assert [line.split()[4] for line in lines[1:5]] == ["=", "640", "800", "="]
    assert lines[5].startswith("bound planned: the lower bound of the problem")
    assert "bound planned:" not in format_table([plain, kept])
