"""A micro-class board: C codegen, the static arena and the code size, against its SRAM."""

import pytest

from dashboard.models import Result, Run
from workers import boards
from workers.tasks import plan_run

pytestmark = pytest.mark.slow

TINY = {"channels": 4, "resolution": 16, "depth": 2}


def _measure(tmp_path, capacity):
    runner = boards.runner_for("mcu", {"mcu": {"kind": "micro", "memory_capacity": capacity}})
    return runner.measure(
        model_name="tiny-cnn", source="zoo:small_cnn", params=TINY,
        strategies=["tvm-stock", "greedy-by-size"], artifacts_dir=tmp_path, repeat=2,
    )


def test_it_flags_a_model_whose_arena_exceeds_the_boards_memory(tmp_path):
    reports = _measure(tmp_path, capacity=1024)

    for report in reports:
        assert report.error is None
        assert report.target.startswith('{"kind":"c"')
        footprint = report.board.to_json()
        assert footprint["sram_bytes"] >= report.planned_bytes > 1024
        assert footprint["over_capacity"] is True and report.over_capacity is True
        # The kernels were really compiled: the build has code, and weights are counted.
        assert footprint["code"]["text"] > 0
        assert footprint["weights_bytes"] > 0
        # Host timings say nothing about a microcontroller.
        assert report.latency_ms is None


def test_a_model_that_fits_is_not_flagged(tmp_path):
    reports = _measure(tmp_path, capacity=64 * 1024 * 1024)

    assert [r.over_capacity for r in reports] == [False, False]


@pytest.mark.django_db
def test_the_run_records_the_flag_and_the_board(commit_naming, settings):
    settings.PEAKWATCH_BOARDS = {"mcu": {"kind": "micro", "memory_capacity": 1024}}
    commit = commit_naming(["mcu"])
    run = Run.objects.create(repository=commit.repository, commit=commit)

    plan_run(run.pk)  # eager: the tests' Celery runs tasks in process

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    result = Result.objects.get(run=run, strategy__name="greedy-by-size")
    assert result.details["over_capacity"] is True
    assert result.details["board"]["memory_capacity"] == 1024
    assert result.board.kind == "micro" and result.board.memory_capacity == 1024
    assert result.board.info["status"] == "online"

    page = self_client_get(run)
    assert "over capacity" in page


def self_client_get(run):
    from django.test import Client

    return Client().get(run.get_absolute_url()).content.decode()
