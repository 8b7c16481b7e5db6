"""What a micro board's run adds to a compile's report (no toolchain needed)."""

from __future__ import annotations

import zipfile

from planner.report import StrategyReport
from planner.tvm.micro.report import board_figures, board_of, compile_options, merge
from planner.tvm.micro.run import MicroResult


def _result(**fields) -> MicroResult:
    defaults = dict(
        model="tiny", strategy="greedy-by-size", board="stm32f746", machine="mps2-an500",
        outputs_match=True, host_outputs_match=True, max_abs_diff=0.0, ram_bytes=7160,
        flash_bytes=6500, instructions=210033, sram_capacity=4096, flash_capacity=1 << 20,
        over_capacity=True,
    )
    return MicroResult(**{**defaults, **fields})


def test_a_board_mismatch_fails_the_report_and_says_who_is_at_fault(tmp_path):
    report = StrategyReport(model="tiny", strategy="greedy-by-size", outputs_match=True)
    result = _result(
        outputs_match=False, max_abs_diff=3.5,
        error="outputs differ from TVM's stock build (host build matches: True; the target "
              "is at fault)",
    )

    merge(report, result, tmp_path)

    assert report.outputs_match is False and report.max_abs_diff == 3.5
    assert report.error.startswith("micro board stm32f746 (mps2-an500): outputs differ")
    assert "the target is at fault" in report.error
    assert report.board.figures["host_outputs_match"] is True


def test_a_model_too_big_for_the_board_fails_its_report_and_names_the_capacity(tmp_path):
    report = StrategyReport(model="tiny", strategy="greedy-by-size", outputs_match=True,
                            planned_bytes=5000)

    merge(report, _result(stack_bytes=1024), tmp_path)

    assert not report.ok
    assert report.error == (
        "micro board stm32f746 (mps2-an500): does not fit: needs 7,160 B of RAM with a "
        "1,024 B stack, and the board has 4,096 B"
    )
    # Its figures stand: the plan is measured, only the board cannot run it.
    assert report.planned_bytes == 5000 and report.board.figures["ram_bytes"] == 7160
    assert report.over_capacity


def test_a_model_that_fits_keeps_its_report_ok(tmp_path):
    report = StrategyReport(model="tiny", strategy="greedy-by-size", outputs_match=True)

    merge(report, _result(over_capacity=False, sram_capacity=8192), tmp_path)

    assert report.ok


def test_the_board_figures_are_flat_and_labelled(tmp_path):
    figures = board_figures(_result()).to_json()

    assert figures["kind"] == "micro"
    assert figures["memory_capacity"] == figures["sram_capacity"] == 4096
    assert figures["over_capacity"] is True
    assert figures["ram_bytes"] == 7160 and figures["instructions"] == 210033
    assert "not time" in figures["instructions_label"]


def test_the_export_folder_becomes_a_zip_artifact(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.c").write_text("int peakwatch_run(void);\n")
    report = StrategyReport(model="tiny", strategy="greedy-by-size")

    merge(report, _result(export_dir=str(export)), tmp_path / "artifacts")

    with zipfile.ZipFile(report.artifacts["export.zip"]) as archive:
        assert archive.namelist() == ["model.c"]


def test_a_micro_job_compiles_the_c_build_without_host_timings():
    assert compile_options({}) == {"target": "c", "repeat": 0, "memory_configs": ()}
    board = board_of({"machine": "mps2-an386", "sram_bytes": 1024})
    assert (board.name, board.cpu, board.sram_bytes) == ("mps2-an386", "cortex-m4", 1024)
