"""A remote board over TVM RPC, played by a real RPC server (and tracker) on loopback."""

import importlib.util
import json

import numpy as np
import pytest

from dashboard.models import Board, Result, Run
from planner.report import StrategyReport
from planner.tvm.measure import remote
from tests.boards.conftest import free_port
from tests.workers.conftest import wait_for
from workers import boards
from workers.boards.config import split_address

pytestmark = pytest.mark.slow

TINY = {"channels": 4, "resolution": 16, "depth": 2}
STRATEGIES = ["tvm-stock", "greedy-by-size"]


def _measure(runner, tmp_path):
    return runner.measure(
        model_name="tiny-cnn", source="zoo:small_cnn", params=TINY,
        strategies=STRATEGIES, artifacts_dir=tmp_path, repeat=2,
    )


def _assert_measured_remotely(reports, address):
    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert len(report.latency_ms["samples"]) == 2
        assert report.board.figures["remote"] == address
        assert report.planned_bytes > 0
        assert "no allocator statistics" in report.measured["note"]


def test_it_runs_and_times_every_strategy_on_the_remote_server(rpc_server, tmp_path):
    runner = boards.runner_for("loop", {"loop": {"kind": "rpc", "rpc": rpc_server}})
    assert runner.health().online

    reports = _measure(runner, tmp_path)

    _assert_measured_remotely(reports, rpc_server)


def test_each_shape_point_is_checked_on_the_board_against_its_own_stock_build(
    rpc_server, tmp_path
):
    from planner.shapes import parse_shapes

    runner = boards.runner_for("loop", {"loop": {"kind": "rpc", "rpc": rpc_server}})
    axis = parse_shapes({"h": [8, 16], "w": "h"})

    reports = runner.measure(
        model_name="pool", source="zoo:pool_reuse",
        params={"resolution": 16, "channels": 4, "dynamic": True},
        strategies=STRATEGIES, artifacts_dir=tmp_path, repeat=2, shapes=axis.to_json(),
    )

    # Before, the board kept one report per strategy and left the other point unchecked.
    assert sorted((r.strategy, r.shape_point["h"]) for r in reports) == sorted(
        (s, h) for s in STRATEGIES for h in (8, 16)
    )
    _assert_measured_remotely(reports, rpc_server)


@pytest.mark.skipif(importlib.util.find_spec("tornado") is None,
                    reason="TVM's RPC tracker needs the tornado package")
def test_it_asks_the_tracker_for_the_device_by_key(spawn, tmp_path):
    tracker_port = free_port()
    spawn("tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(tracker_port),
          "--port-end", str(tracker_port + 1), port=tracker_port)
    server_port = free_port()
    spawn("tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(server_port),
          "--port-end", str(server_port + 1), "--tracker", f"127.0.0.1:{tracker_port}",
          "--key", "loopback-board", port=server_port)
    tracker = f"127.0.0.1:{tracker_port}"
    runner = boards.runner_for(
        "loop", {"loop": {"kind": "rpc", "tracker": tracker, "key": "loopback-board"}}
    )
    wait_for(lambda: runner.health().online, 30, "the server to register with the tracker")

    reports = _measure(runner, tmp_path)

    _assert_measured_remotely(reports, tracker)


def test_an_unreachable_board_is_offline():
    runner = boards.runner_for("gone", {"gone": {"kind": "rpc", "rpc": f"127.0.0.1:{free_port()}"}})

    health = runner.health()

    assert not health.online and "unreachable" in health.reason


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_real_workers_run_a_suite_on_the_cpu_and_a_remote_board(
    commit_naming, start_worker, rpc_server, monkeypatch
):
    # The worker's host configures how to reach its board; the manifest only names it.
    monkeypatch.setenv(
        "PEAKWATCH_BOARDS", json.dumps({"rpc-loopback": {"kind": "rpc", "rpc": rpc_server}})
    )
    commit = commit_naming(["cpu", "rpc-loopback"])
    worker = start_worker(queues="peakwatch,board.cpu,board.rpc-loopback")

    from dashboard import actions

    run = actions.start_run(commit)

    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 240, "the run to finish",
             [worker.log_path])
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    remote = Result.objects.filter(run=run, board__name="rpc-loopback")
    assert remote.count() == 2 and Result.objects.filter(run=run).count() == 4
    for result in remote:
        assert result.status == "ok", result.error
        assert result.latency_median_ms > 0 and result.outputs_match
        assert result.details["board"]["remote"] == rpc_server
    board = Board.objects.get(name="rpc-loopback")
    assert board.kind == "rpc" and board.info["status"] == "online"
    assert board.info["rpc"]["address"] == rpc_server
    assert board.info["versions"]["tvm"].startswith("0.27")
    assert "board rpc-loopback done" in run.log


def _hostile_inputs(path, attack: str):
    if attack == "pickle":
        # An object array: np.load would unpickle it if pickles were allowed.
        np.savez(path, np.array([{"run": "os.system"}], dtype=object), allow_pickle=True)
    elif attack == "members":
        np.savez(path, *[np.zeros(1, "float32")] * 5000)
    elif attack == "names":
        np.savez(path, x=np.zeros(4, "float32"))
    return path


@pytest.mark.parametrize(("attack", "reason"), [
    ("pickle", "not a numeric one"), ("members", "more than 4096"),
    ("names", "not named arr_0"), ("missing", "no inputs"),
])
def test_inputs_the_sandbox_wrote_are_checked_before_the_board_runs_them(
    rpc_server, tmp_path, attack, reason
):
    inputs = "" if attack == "missing" else str(_hostile_inputs(tmp_path / "inputs.npz", attack))
    reports = {
        strategy: StrategyReport(
            model="tiny-cnn", strategy=strategy, inputs_file=inputs,
            artifacts={"model.so": str(tmp_path / f"{strategy}.so")},
        )
        for strategy in STRATEGIES
    }

    remote.check_remotely(
        remote.connect(rpc_address=split_address(rpc_server, "loop")), "cpu", reports, 1
    )

    for report in reports.values():
        assert not report.ok and "the model's inputs were refused" in report.error
        assert reason in report.error and report.latency_ms is None


@pytest.mark.skipif(importlib.util.find_spec("tornado") is None,
                    reason="TVM's RPC tracker needs the tornado package")
def test_a_board_gone_from_its_tracker_fails_its_results_in_bounded_time(spawn, tmp_path):
    # A tracker with no server for the key: TVM's request would wait for one forever.
    tracker_port = free_port()
    spawn("tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(tracker_port),
          "--port-end", str(tracker_port + 1), port=tracker_port)
    tracker = f"127.0.0.1:{tracker_port}"
    runner = boards.runner_for("loop", {"loop": {
        "kind": "rpc", "tracker": tracker, "key": "gone-board", "timeout": 3}})

    reports = _measure(runner, tmp_path)

    assert [r.strategy for r in reports] == STRATEGIES
    for report in reports:
        assert report.error.startswith(
            f"RPC board loop ({tracker}, key 'gone-board'): BoardGone: no server with key "
            f"'gone-board' answered the tracker {tracker} within 3 s"), report.error
        # The compile's own figures stand: only the board's part is missing.
        assert report.planned_bytes > 0
