"""The CUDA board: offline without a GPU (this is tested everywhere), CUDA code either way."""

import pytest
import tvm

from dashboard.models import Board, Result, Run
from planner.tvm import cuda
from planner.tvm.zoo import ModelSource
from workers import boards
from workers.tasks import plan_run

HAS_GPU = tvm.cuda(0).exist
TINY = ModelSource("zoo:small_cnn", {"channels": 4, "resolution": 16, "depth": 2})


@pytest.mark.skipif(HAS_GPU, reason="this host has a CUDA device")
def test_without_a_gpu_the_board_reports_itself_offline():
    health = boards.runner_for("cuda").health()

    assert not health.online
    assert "no CUDA device" in health.reason


@pytest.mark.skipif(HAS_GPU, reason="this host has a CUDA device")
@pytest.mark.django_db
def test_a_run_on_an_offline_gpu_fails_every_result_with_the_reason(commit_naming):
    commit = commit_naming(["cuda"])
    run = Run.objects.create(repository=commit.repository, commit=commit)

    plan_run(run.pk)  # eager: the tests' Celery runs tasks in process

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "board cuda is offline: no CUDA device" in run.error
    results = Result.objects.filter(run=run)
    assert results.count() == 2 and run.progress_done == 2
    assert {r.status for r in results} == {"failed"}
    assert all(r.error.startswith("board offline: no CUDA device") for r in results)
    board = Board.objects.get(name="cuda")
    assert board.kind == "cuda" and board.last_seen is not None
    assert board.info["status"] == "offline" and board.info["current_run"] is None


@pytest.mark.slow
def test_the_cuda_target_compiles_a_model_to_kernels_without_a_gpu():
    source = cuda.kernel_source(TINY, cuda.cuda_target("sm_80"))

    assert "__global__" in source
    assert "threadIdx.x" in source  # scheduled for the GPU, not a serial loop nest


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device on this host")
def test_with_a_gpu_the_board_measures_every_strategy(tmp_path):
    runner = boards.runner_for("cuda")
    assert runner.health().online

    reports = runner.measure(
        model_name="tiny-cnn", source=TINY.source, params=TINY.params,
        strategies=["tvm-stock", "greedy-by-size"], artifacts_dir=tmp_path, repeat=3,
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.latency_ms["median"] > 0
        assert '"kind":"cuda"' in report.target.replace(" ", "")
