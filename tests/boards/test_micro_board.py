"""A micro board: each plan exported as C, built for a Cortex-M and run on QEMU, sandboxed."""

import io
import zipfile

import pytest
from django.test import Client

from dashboard.models import Result, Run
from planner.job_spec import MicroOptions
from planner.tvm.micro.build import micro_toolchain_missing
from workers import boards
from workers.tasks import plan_run

pytestmark = pytest.mark.slow

#: Small enough to export, build and emulate in about a second per strategy.
TINY = {"channels": 4, "resolution": 8, "depth": 2}
STRATEGIES = ["tvm-stock", "greedy-by-size", "best-fit+rewrites"]


@pytest.fixture(scope="module")
def toolchain():
    missing = micro_toolchain_missing()
    if missing:
        pytest.skip(f"micro toolchain missing: {missing}")


def _runner(**entry):
    return boards.runner_for("mcu", {"mcu": {"kind": "micro", **entry}})


@pytest.fixture(scope="module")
def reports(toolchain, tmp_path_factory):
    runner = _runner(machine="mps2-an500", memory_capacity=327680, flash_capacity=1048576)
    measured = runner.measure(
        model_name="tiny-cnn", source="zoo:small_cnn", params=TINY,
        strategies=STRATEGIES, artifacts_dir=tmp_path_factory.mktemp("mcu"), repeat=2,
    )
    return dict(zip(STRATEGIES, measured, strict=True))


def test_every_strategy_runs_on_the_emulated_board_with_matching_outputs(reports):
    for strategy, report in reports.items():
        assert report.error is None, (strategy, report.error)
        board = report.board.to_json()
        assert board["kind"] == "micro" and board["machine"] == "mps2-an500"
        assert board["outputs_match"] is True and board["host_outputs_match"] is True
        assert report.outputs_match is True
        assert report.target.startswith('{"kind":"c"')
        # Host timings say nothing about a microcontroller.
        assert report.latency_ms is None


def test_the_figures_come_from_the_built_image_and_the_run(reports):
    for report in reports.values():
        board = report.board.to_json()
        assert board["ram_bytes"] == board["static_ram_bytes"] + board["stack_bytes"]
        assert board["static_ram_bytes"] >= board["arena_bytes"] + board["workspace_bytes"]
        assert board["stack_bytes"] > 0
        assert board["flash_bytes"] > board["weights_bytes"] > 0
        assert board["instructions"] > 10_000
        assert "instructions" in board["instructions_label"]
        assert board["memory_capacity"] == board["sram_capacity"] == 327680
        assert board["flash_capacity"] == 1048576
        assert board["over_capacity"] is False and report.over_capacity is False
    # Lifted temporaries move the kernels' workspace into the arena.
    plain, lifted = reports["greedy-by-size"].board, reports["best-fit+rewrites"].board
    assert lifted.figures["workspace_bytes"] < plain.figures["workspace_bytes"]


def test_each_strategys_export_is_a_zip_of_its_c_project(reports):
    for report in reports.values():
        with zipfile.ZipFile(report.artifacts["export.zip"]) as archive:
            names = set(archive.namelist())
        assert {"model.c", "kernels.c", "main.c", "Makefile"} <= names


def test_the_board_is_offline_without_the_toolchain(monkeypatch):
    from workers.boards import micro

    monkeypatch.setattr(
        micro, "micro_toolchain_missing",
        lambda: "qemu-system-arm is not installed (Debian: qemu-system-arm)",
    )
    health = _runner().health()

    assert health.online is False
    assert "qemu-system-arm" in health.reason


def test_the_boards_own_sizes_stand_unless_configured():
    runner = _runner(board="stm32f746")

    assert runner.memory_capacity == 320 * 1024
    assert runner.compile_options(None).micro == MicroOptions(
        board="stm32f746", machine="mps2-an500", sram_bytes=320 * 1024, flash_bytes=1024 * 1024,
    )
    assert runner.target == "c"


def test_an_unknown_machine_is_a_configuration_error():
    with pytest.raises(boards.UnknownBoard, match="unknown machine"):
        _runner(machine="mps2-an999")


@pytest.mark.django_db
def test_a_run_records_the_board_figures_the_flag_and_the_export(
    toolchain, commit_naming, settings
):
    settings.PEAKWATCH_BOARDS = {
        "mcu": {"kind": "micro", "machine": "mps2-an386", "memory_capacity": 1024}
    }
    commit = commit_naming(["mcu"])
    run = Run.objects.create(repository=commit.repository, commit=commit)

    plan_run(run.pk)  # eager: the tests' Celery runs tasks in process

    run.refresh_from_db()
    # Nothing fits in 1 KiB: every Result fails, and the run says so.
    assert run.status == Run.Status.FAILED, run.status_text
    result = Result.objects.get(run=run, strategy__name="greedy-by-size")
    board = result.details["board"]
    assert result.status == Result.Status.FAILED
    assert f"needs {board['ram_bytes']:,} B of RAM" in result.error
    assert "and the board has 1,024 B" in result.error
    # The figures stand: the plan was measured, on the board too.
    assert result.planned_bytes > 0
    assert board["machine"] == "mps2-an386" and board["outputs_match"] is True
    assert board["ram_bytes"] > 1024 and board["instructions"] > 0
    # The figure a micro board's trend and alerts follow, in a column of its own.
    assert result.board_ram_bytes == board["ram_bytes"]
    assert result.details["over_capacity"] is True
    assert result.board.kind == "micro" and result.board.memory_capacity == 1024
    assert result.board.info["status"] == "online"

    client = Client()
    page = client.get(run.get_absolute_url()).content.decode()
    assert "over capacity" in page and 'data-board-fits="no"' in page
    figures = client.get(f"/api/results/{result.pk}/").json()["board_figures"]
    assert figures["ram_bytes"] == board["ram_bytes"] and figures["over_capacity"] is True
    assert client.get(f"/api/results/{result.pk}/").json()["board_ram_bytes"] == board["ram_bytes"]
    export = result.artifacts.get(name="export.zip")
    response = client.get(export.get_absolute_url())
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert "model.c" in archive.namelist()


def test_each_shape_point_gets_firmware_of_its_own(toolchain, tmp_path):
    from planner.shapes import parse_shapes

    axis = parse_shapes({"h": [8, 16], "w": "h"})
    reports = _runner(machine="mps2-an500").measure(
        model_name="pool", source="zoo:pool_reuse",
        params={"resolution": 16, "channels": 4, "dynamic": True, "dtype": "float32"},
        strategies=STRATEGIES[:2], artifacts_dir=tmp_path, repeat=0, shapes=axis.to_json(),
    )

    assert sorted((r.strategy, r.shape_point["h"]) for r in reports) == sorted(
        (s, h) for s in STRATEGIES[:2] for h in (8, 16)
    )
    arena = {}
    for report in reports:
        assert report.error is None, (report.strategy, report.shape_point, report.error)
        board = report.board.to_json()
        assert board["outputs_match"] is True
        arena[report.strategy, report.shape_point["h"]] = board["arena_bytes"]
    # Each image was built for its own shape: four times the pixels, a larger arena.
    for strategy in STRATEGIES[:2]:
        assert arena[strategy, 16] > arena[strategy, 8]
