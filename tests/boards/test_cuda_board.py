"""The CUDA board: offline without a GPU (this is tested everywhere), CUDA code either way."""

import json

import pytest
import tvm

from dashboard.models import Board, Result, Run
from planner.tvm.build import cuda
from planner.tvm.compile import compile_model
from planner.tvm.sources import ModelSource
from workers import boards, sandbox
from workers.boards.config import BoardConfigError
from workers.boards.cuda import runs_on
from workers.tasks import plan_run

HAS_GPU = tvm.cuda(0).exist
TINY = ModelSource("zoo:small_cnn", {"channels": 4, "resolution": 16, "depth": 2})


@pytest.mark.skipif(HAS_GPU, reason="this host has a CUDA device")
def test_without_a_gpu_the_board_reports_itself_offline_with_the_drivers_reason():
    health = boards.runner_for("cuda", limits=sandbox.Limits()).health()

    assert not health.online
    assert "no CUDA device usable by a job" in health.reason
    # Asked in the job's own sandbox: the runtime's own words, and the limits a job has.
    assert "cuda" in health.reason.lower() and "limits in force" in health.reason


def test_a_gpu_job_runs_without_an_address_space_limit_and_any_other_job_with_one(tmp_path):
    limits = sandbox.Limits()

    gpu = sandbox.run_probe(
        "planner.tvm.build.cuda", tmp_path / "gpu", limits=limits, devices=True
    )
    cpu = sandbox.run_probe(
        "planner.tvm.build.cuda", tmp_path / "cpu", limits=limits, devices=False
    )

    if HAS_GPU:
        assert gpu["ok"] is True, gpu
        assert gpu["arch"] == cuda.device_arch()
        # Under the address-space limit every other job has, CUDA does not initialise, and
        # the answer names the runtime's error and the limit.
        assert cpu["ok"] is False
        assert "cudaError" in cpu["error"] and "RLIMIT_AS) 8 GiB" in cpu["error"], cpu
    else:
        assert "address space (RLIMIT_AS) unlimited" in gpu["error"], gpu
        assert "address space (RLIMIT_AS) 8 GiB" in cpu["error"], cpu


def test_the_boards_target_names_the_configured_architecture_whatever_the_host_has():
    runner = boards.runner_for("h100", {"h100": {"kind": "cuda", "arch": "sm_90"}})

    assert json.loads(runner.target) == {"kind": "cuda", "arch": "sm_90"}
    assert runner.compile_options(None).cuda.arch == "sm_90"
    assert runner.compile_options(None).devices is True


@pytest.mark.parametrize(("entry", "words"), [
    ({"kind": "cuda", "arch": "90"}, "'90' is not a CUDA architecture"),
    ({"kind": "cuda", "arch": "sm_80", "target": {"kind": "cuda", "arch": "sm_90"}},
     "arch sm_80 but target arch sm_90"),
])
def test_a_cuda_board_with_a_bad_architecture_is_refused(entry, words):
    with pytest.raises(boards.UnknownBoard, match=words):
        boards.runner_for("gpu", {"gpu": entry})
    assert issubclass(BoardConfigError, ValueError)


@pytest.mark.parametrize(("arch", "device", "runs"), [
    ("sm_80", "sm_80", True), ("sm_80", "sm_86", True), ("sm_86", "sm_80", False),
    ("sm_80", "sm_90", False), ("sm_90a", "sm_90", True), ("sm_90a", "sm_100", False),
])
def test_kernels_run_on_their_major_version_at_their_minor_or_later(arch, device, runs):
    assert runs_on(arch, device) is runs


@pytest.mark.slow
def test_a_cuda_target_without_an_architecture_is_refused_before_anything_is_built():
    # TVM itself would take device 0's architecture, or sm_50 where there is none.
    for target in ("cuda", json.dumps({"kind": "cuda"})):
        with pytest.raises(cuda.ArchError, match="names no architecture"):
            compile_model(
                TINY, ["best-fit"], target=target, check_locally=False, memory_configs=(),
            )


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
def test_with_a_gpu_the_board_measures_every_strategy_to_the_byte(tmp_path):
    runner = boards.runner_for("cuda", limits=sandbox.Limits())
    assert runner.health().online, runner.health().reason

    reports = runner.measure(
        model_name="tiny-cnn", source=TINY.source, params=TINY.params,
        strategies=["tvm-stock", "greedy-by-size", "best-fit+rewrites"],
        artifacts_dir=tmp_path, repeat=3,
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.latency_ms["median"] > 0
        assert json.loads(report.target)["arch"] == cuda.device_arch()
        counted = report.measured["cuda"]
        assert counted["untracked_allocations"] == 0 and counted["unknown_frees"] == 0
        # Every storage the plan made, counted at cudaMalloc: the planned sum to the byte.
        assert counted["storage_bytes"] == report.planned_bytes - counted["workspace_bytes"]
        assert report.kernel_workspace_bytes == counted["workspace_bytes"]
        if report.strategy != "tvm-stock":
            # One arena held throughout, the workspace and the outputs: the peak is the plan.
            assert report.measured_peak_bytes == report.planned_bytes, counted
