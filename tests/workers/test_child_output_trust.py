"""What a sandboxed child hands back is checked before the worker takes any of it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from planner.report import InvalidReport, StrategyReport, parse_report
from workers import trust


def honest(**fields) -> dict:
    report = StrategyReport(
        model="m", strategy="greedy-by-size", planned_bytes=1280, intermediate_bytes=1024,
        output_bytes=256, kernel_workspace_bytes=0, measured_peak_bytes=4096,
        latency_ms={"median": 1.5, "p90": 2.0, "samples": [1.5, 2.0]},
    ).to_json()
    return {**report, **fields}


def test_an_honest_report_is_taken():
    assert parse_report(honest()).planned_bytes == 1280


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"planned_bytes": -1}, "planned_bytes is not a byte count"),
        ({"measured_peak_bytes": True}, "measured_peak_bytes is not a byte count"),
        ({"measured_peak_bytes": 1 << 70}, "measured_peak_bytes is not a byte count"),
        ({"planned_bytes": 1}, "planned_bytes 1 is not the arena"),
        ({"latency_ms": {"median": float("nan")}}, "median is not a finite"),
        ({"latency_ms": {"median": 1, "p90": 1, "samples": ["x"]}}, "samples is not a finite"),
        ({"outputs_match": "yes"}, "outputs_match is not true"),
        ({"owner": "me"}, "unknown fields: owner"),
        ({"strategy": ""}, "strategy is not a text"),
        ({"kernel_workspace_source": "trust me"}, "kernel_workspace_source"),
        ({"environment": {"a": [[[[[[[[[[[[[[1]]]]]]]]]]]]]]}}, "nested deeper"),
        ({"peak": {"tensors": ["x" * 3_000_000]}}, "larger than"),
        ({"board": {"memory_capacity": -5}}, "memory_capacity is not a byte count"),
    ],
)
def test_a_report_that_breaks_its_contract_is_refused(fields, message):
    with pytest.raises(InvalidReport, match=message):
        parse_report(honest(**fields))


def test_a_refused_report_becomes_a_failed_report_that_says_why(tmp_path):
    path = tmp_path / "reports.json"
    path.write_text(json.dumps([honest(planned_bytes=1), honest(strategy="tvm-stock")]))

    first, second = trust.read_reports(path)

    assert first.error.startswith("the compile's report was refused: planned_bytes 1")
    assert first.planned_bytes is None and first.strategy == "greedy-by-size"
    assert second.ok


def test_reports_that_are_a_link_or_not_a_list_are_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("[]")
    link = tmp_path / "reports.json"
    link.symlink_to(secret)
    with pytest.raises(trust.HandoverError, match="link"):
        trust.read_reports(link)
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(trust.HandoverError, match="nests arrays and objects deeper than 64"):
        trust.read_reports(nested)
    scalar = tmp_path / "scalar.json"
    scalar.write_text("{}")
    with pytest.raises(trust.HandoverError, match="not a list"):
        trust.read_reports(scalar)


def test_reports_are_matched_to_the_strategies_asked_for():
    reports = [
        parse_report(honest(strategy="tvm-stock")),
        parse_report(honest(strategy="best-fit")),  # not asked for
        parse_report(honest(model="other", strategy="greedy-by-size")),
    ]

    stock, greedy, none = trust.match(
        reports, model="m", source="zoo:x", strategies=["tvm-stock", "greedy-by-size", "none"]
    )

    assert stock.ok and stock.model_source == "zoo:x"
    assert "no report for this strategy" in greedy.error and "'other'" in greedy.error
    assert not none.ok
    [twice] = trust.match(
        [reports[0], reports[0]], model="m", source="", strategies=["tvm-stock"]
    )
    assert "two reports" in twice.error


def test_artifacts_are_taken_by_name_from_the_workers_folder_only(tmp_path):
    out = tmp_path / "out"
    folder = out / "m" / "greedy-by-size"
    folder.mkdir(parents=True)
    secret = tmp_path / "secret_key"
    secret.write_text("host secret")
    (folder / "plan.json").write_text("{}")
    (folder / "module.py").symlink_to(secret)
    os.link(secret, folder / "problem.csv")
    np.savez(out / "m" / "inputs.npz", np.zeros(2, "float32"))
    report = parse_report(honest(artifacts={
        "plan.json": str(secret), "../../../../root/x.txt": str(secret), "model.so": "/etc/x",
    }))

    trust.collect_artifacts(report, out, model="m", limit=1 << 20)

    assert report.artifacts == {"plan.json": str(folder / "plan.json")}
    assert report.inputs_file == str(out / "m" / "inputs.npz")
    warnings = "\n".join(report.warnings)
    assert "module.py skipped: it is a link" in warnings
    assert "problem.csv skipped: it is a hard link" in warnings
    assert "'../../../../root/x.txt' is not one Peakwatch writes" in warnings
    assert "model.so was named but not written" in warnings


def test_a_folder_replaced_by_a_link_hands_over_nothing(tmp_path):
    elsewhere = tmp_path / "host"
    elsewhere.mkdir()
    (elsewhere / "module.json").write_text("host file")
    handed = tmp_path / "import" / "network"
    handed.parent.mkdir()
    handed.symlink_to(elsewhere)

    with pytest.raises(trust.HandoverError, match="module.json: its folder is a link"):
        trust.copy_plain_files(handed, tmp_path / "received", ["module.json"], 1 << 20)
    assert not (tmp_path / "received" / "module.json").exists()


@pytest.mark.parametrize(("arrays", "reason"), [
    # Thousands of members, none an input's name: np.load read each and dropped it.
    ({f"w{i}": np.zeros(1, "float32") for i in range(5000)}, "more than 4096"),
    ({"x": np.array([{"a": 1}], dtype=object)}, "not a numeric one"),
], ids=["too-many-members", "pickled"])
def test_fixed_inputs_the_import_handed_over_are_checked_before_they_are_read(
    tmp_path, arrays, reason
):
    pytest.importorskip("tvm")
    from planner.tvm.sources.handover import FIXED_FILE, ImportedError, _fixed_inputs

    path = tmp_path / FIXED_FILE
    np.savez(path, allow_pickle=True, **arrays)

    with pytest.raises(ImportedError, match=f"{FIXED_FILE} was refused: .*{reason}"):
        _fixed_inputs(path, ["x"], [(1,)], ["float32"])


DEEP_REPORTS = """import os
import sys
from pathlib import Path


def build():
    # Below the interpreter's recursion limit json would parse; 10,000 is far above it.
    Path(sys.argv[2]).write_text("[" * 10_000 + "{}" + "]" * 10_000)
    os._exit(0)
"""


@pytest.mark.slow
def test_a_child_handing_back_deeply_nested_reports_fails_its_results_with_why(tmp_path):
    from workers import sandbox
    from workers.boards.cpu import CpuBoard

    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")
    tree = tmp_path / "tree"
    (tree / "models").mkdir(parents=True)
    (tree / "models" / "deep.py").write_text(DEEP_REPORTS)
    (tmp_path / "out").mkdir()

    reports = CpuBoard().measure(
        model_name="deep", source="models/deep.py:build", params={},
        strategies=["tvm-stock", "greedy-by-size"], artifacts_dir=tmp_path / "out", repeat=0,
        tree=tree,
    )

    assert [r.strategy for r in reports] == ["tvm-stock", "greedy-by-size"]
    for report in reports:
        assert not report.ok and report.planned_bytes is None
        assert "reports.json nests arrays and objects deeper than 64 levels" in report.error
        assert "recursion" not in report.error


def test_reports_are_matched_per_strategy_and_shape_point():
    small, large = {"h": 8, "w": 8}, {"h": 16, "w": 16}
    reports = [
        parse_report(honest(strategy="tvm-stock", shape_point=small, planned_bytes=1280)),
        parse_report(honest(strategy="tvm-stock", shape_point=large)),
        parse_report(honest(strategy="greedy-by-size", shape_point=small)),
        # A point nobody asked for is not taken, whatever its figures.
        parse_report(honest(strategy="greedy-by-size", shape_point={"h": 32, "w": 32})),
    ]

    matched = trust.match(
        reports, model="m", source="zoo:x", strategies=["tvm-stock", "greedy-by-size"],
        points=[small, large],
    )

    assert [(r.strategy, r.shape_point) for r in matched] == [
        ("tvm-stock", small), ("greedy-by-size", small),
        ("tvm-stock", large), ("greedy-by-size", large),
    ]
    assert [r.ok for r in matched] == [True, True, True, False]
    missing = matched[3]
    assert missing.error.startswith(
        "the compile returned no report for this strategy at h=16,w=16"
    )
    assert "'greedy-by-size' at h=32,w=32" in missing.error
    assert missing.model_source == "zoo:x"


def test_a_report_without_a_point_does_not_stand_for_one():
    [at_point] = trust.match(
        [parse_report(honest())], model="m", source="", strategies=["greedy-by-size"],
        points=[{"seq": 128}],
    )
    assert not at_point.ok and at_point.shape_point == {"seq": 128}
    assert "at seq=128" in at_point.error


def test_a_points_artifacts_are_taken_from_its_own_folder(tmp_path):
    from planner.report import point_folder

    out = tmp_path / "out"
    point = {"h": 8, "w": 8}
    folder = point_folder(out, point) / "m" / "greedy-by-size"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text("{}")
    np.savez(point_folder(out, point) / "m" / "inputs.npz", np.zeros(2, "float32"))
    # The same names with no point: another point's (or no point's) files, not this one's.
    (out / "m" / "greedy-by-size").mkdir(parents=True)
    (out / "m" / "greedy-by-size" / "module.py").write_text("x")
    report = parse_report(honest(shape_point=point))

    trust.collect_artifacts(report, out, model="m", limit=1 << 20)

    assert report.artifacts == {"plan.json": str(folder / "plan.json")}
    assert report.inputs_file == str(point_folder(out, point) / "m" / "inputs.npz")
