"""A strategy that fails at a shape point says why, in the child's words (issue 31): a
report the worker refuses stays at its own point, and one that went missing carries the
error of the report that came back in its place."""

import json

from planner.report import StrategyReport
from workers import trust

SEQ_8, SEQ_16 = {"seq": 8}, {"seq": 16}


def failed(**fields) -> dict:
    report = StrategyReport.failed("m", "tvm-stock", "build failed: ShapeError: no seq")
    return {**report.to_json(), **fields}


def test_a_refused_report_stays_at_its_point_and_keeps_the_childs_error(tmp_path):
    path = tmp_path / "reports.json"
    # Refused for a field the child got wrong; its point and its error are still readable.
    path.write_text(json.dumps([
        failed(shape_point=SEQ_8, measured_peak_bytes=-1),
        failed(shape_point=SEQ_16),
    ]))

    at_8, at_16 = trust.match(
        trust.read_reports(path), model="m", source="m.py:build", strategies=["tvm-stock"],
        points=[SEQ_8, SEQ_16],
    )

    assert at_8.shape_point == SEQ_8
    assert at_8.error.startswith("the compile's report was refused: measured_peak_bytes")
    assert "the compile said: build failed: ShapeError: no seq" in at_8.error
    assert at_16.error == "build failed: ShapeError: no seq"


def test_a_missing_report_carries_the_error_of_the_one_that_came_instead():
    # A failed report with no point (a whole-model failure) stands for none of the points.
    instead = StrategyReport.failed("m", "tvm-stock", "export failed: Dim seq is specialised")

    [at_8] = trust.match(
        [instead], model="m", source="m.py:build", strategies=["tvm-stock"], points=[SEQ_8],
    )

    assert not at_8.ok and at_8.shape_point == SEQ_8
    assert at_8.error.startswith("export failed: Dim seq is specialised [")
    assert "the compile returned no report for this strategy at seq=8" in at_8.error


def test_a_refused_report_whose_error_is_too_long_is_cut_not_lost(tmp_path):
    path = tmp_path / "reports.json"
    path.write_text(json.dumps([failed(shape_point=SEQ_8, error="x" * 30_000)]))

    [refused] = trust.read_reports(path)

    assert refused.shape_point == SEQ_8
    assert "error is not a text" in refused.error and "the compile said: xxx" in refused.error
    assert len(refused.error) < 3000
