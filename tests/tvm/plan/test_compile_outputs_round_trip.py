"""A compile's outputs read back as what they say: problem.csv is the problem alone, and
planned bytes do not depend on whether memory was measured."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.problem import read_csv

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow

MODEL = ["zoo:residual_cnn", "--param", "channels=4", "--param", "resolution=16"]
STRATEGIES = ["tvm-stock", "best-fit", "best-fit+rewrites"]


def planner(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *map(str, args)], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
    )


def compile_reports(tmp_path, name, *options) -> dict[str, dict]:
    out = tmp_path / f"{name}.json"
    strategies = [arg for s in STRATEGIES for arg in ("--strategy", s)]
    proc = planner("compile", *MODEL, *strategies, "--repeat", "0", "--json", out, *options)
    assert proc.returncode == 0, proc.stderr
    return {r["strategy"]: r for r in json.loads(out.read_text())}


def test_problem_csv_solves_again_under_each_strategy(tmp_path):
    reports = compile_reports(tmp_path, "report", "--no-memory", "--artifacts", tmp_path / "a")
    problem_csv = Path(reports["best-fit"]["artifacts"]["problem.csv"])

    heights = {}
    for strategy in ("none", "best-fit"):
        proc = planner("solve", problem_csv, "--strategy", strategy)
        assert proc.returncode == 0, proc.stderr
        heights[strategy] = json.loads(proc.stdout)["height"]

    assert heights["none"] > heights["best-fit"]
    assert "offset" not in problem_csv.read_text().splitlines()[0]
    # The offsets are plan.json's, and they are a plan of that problem.
    plan = json.loads(Path(reports["best-fit"]["artifacts"]["plan.json"]).read_text())
    problem = read_csv(problem_csv)
    assert {t["id"] for t in plan["tensors"]} == {b.id for b in problem}
    assert heights["best-fit"] <= plan["arena_bytes"]


def test_no_memory_changes_nothing_but_the_measurement(tmp_path):
    measured = compile_reports(tmp_path, "measured")
    unmeasured = compile_reports(tmp_path, "unmeasured", "--no-memory")

    for strategy in STRATEGIES:
        assert measured[strategy]["measured_peak_bytes"] is not None
        assert unmeasured[strategy]["measured_peak_bytes"] is None
        for figure in ("planned_bytes", "intermediate_bytes", "kernel_workspace_bytes"):
            assert measured[strategy][figure] == unmeasured[strategy][figure], (
                strategy, figure)
    # What the pool really held is still reported, beside planned bytes.
    assert measured["tvm-stock"]["measured"]["workspace_bytes"] > 0
