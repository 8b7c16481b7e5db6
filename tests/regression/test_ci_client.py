"""``dashboard/ci_client.py``, which docs/dashboard.md's GitHub Actions workflow runs: against a
live server over HTTP, as a CI machine reaches Peakwatch. A stand-in worker records each run the
server starts, with the figures the test chose, so the client polls a real run to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import actions, ci_client, queue
from dashboard.models import Alert, Run
from tests.conftest import report_of
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(ci_client.__file__)


@pytest.fixture
def worker(monkeypatch):
    """Records every planned run with ``worker.figures`` ({(model, strategy): report}) and
    finishes it, as a board's worker would; every other task still runs in process."""
    send = queue.send

    def work(name, *args, **kwargs):
        if name != queue.PLAN_RUN:
            return send(name, *args, **kwargs)
        run = Run.objects.get(pk=args[0])
        actions.begin_run(
            run, models=[(m, "zoo:small_cnn") for m, _ in work.figures],
            strategies=sorted({s for _, s in work.figures}), boards=["cpu"],
            total=len(work.figures),
        )
        for (model, strategy), report in work.figures.items():
            actions.record_result(run, model=model, strategy=strategy, board="cpu",
                                  report=report)
        actions.finish_run(run)

    work.figures = {}
    monkeypatch.setattr(queue, "send", work)
    return work


@pytest.fixture
def tracked():
    """A repository whose commit 0 planned 50,000 B, and commit 1, not run yet."""
    repository = actions.track_repository("tracked", "/nonexistent")
    base = record_run(repository, 0, {("tiny", "greedy-by-size"): bytes_only(50_000)})
    actions.record_commit(repository, sha="01" + "c" * 38, parent_sha=base.commit.sha,
                          branch="main", committed_at="2026-11-01T01:00Z")
    return repository


@pytest.fixture
def token(tracked):
    return actions.create_api_token("ci", tracked)[1]


def ci(live_server, token, monkeypatch, capsys, *options: str) -> tuple[int, str]:
    """The client's exit status and what it printed, run as the job in docs/dashboard.md runs it."""
    monkeypatch.setenv("PEAKWATCH_TOKEN", token)
    code = ci_client.main(
        ["--url", live_server.url, "--repository", "tracked", "--sha", "01" + "c" * 38,
         "--branch", "main", "--interval", "0.01", *options],
        sleep=lambda seconds: None,
    )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_it_fails_the_job_on_an_open_bytes_alert(
    live_server, token, worker, monkeypatch, capsys, settings
):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example"
    worker.figures = {("tiny", "greedy-by-size"): bytes_only(58_192)}

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 3, printed
    run = Run.objects.get(commit__sha="01" + "c" * 38)
    assert f"run {run.pk} of 01cccccccc succeeded: https://peakwatch.example/runs/{run.pk}/" \
        in printed
    assert "  bytes tiny / greedy-by-size / cpu / worker environment (tvm 0.27.0.post1): " \
        "48.8 KiB → 56.8 KiB (+8,192 B, +16.4%)  [new]" in printed
    assert "failing: 1 open bytes alert(s)" in printed
    assert "https://peakwatch.example/alerts/?repository=tracked&commit=01" in printed


def test_an_alert_at_a_shape_point_names_the_point_once(
    live_server, tracked, token, worker, monkeypatch, capsys
):
    at = {"shape_point": {"seq": 32}}
    record_run(tracked, 0, {("decoder", "greedy-by-size"): bytes_only(40_000, **at)})
    worker.figures = {("decoder", "greedy-by-size"): bytes_only(48_192, **at)}

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 3, printed
    [line] = [line for line in printed.splitlines() if line.startswith("  bytes decoder")]
    assert line.count("seq=32") == 1, line
    assert line.startswith("  bytes decoder / greedy-by-size / cpu / ")
    assert " at seq=32: 39.1 KiB → 47.1 KiB (+8,192 B, +20.5%)  [new]" in line


def test_it_passes_a_commit_that_moved_nothing(
    live_server, token, worker, monkeypatch, capsys, settings
):
    settings.PEAKWATCH_BASE_URL = ""
    worker.figures = {("tiny", "greedy-by-size"): bytes_only(50_000)}

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 0, printed
    assert "no alerts on 01cccccccc" in printed
    # Without a base URL the API answers with paths: the client joins them onto --url.
    run = Run.objects.get(commit__sha="01" + "c" * 38)
    assert f"succeeded: {live_server.url}/runs/{run.pk}/" in printed


def test_a_regression_a_maintainer_closed_passes_the_job_on_its_rerun(
    live_server, token, worker, monkeypatch, capsys
):
    worker.figures = {("tiny", "greedy-by-size"): bytes_only(58_192)}
    assert ci(live_server, token, monkeypatch, capsys)[0] == 3
    actions.triage_commit_alerts(Alert.objects.get().commit, Alert.State.INTENDED)

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 0, printed
    assert "[intended]" in printed and "[new]" not in printed


def test_it_fails_on_latency_only_when_asked(live_server, token, worker, monkeypatch, capsys):
    worker.figures = {("tiny", "greedy-by-size"): bytes_only(58_192)}

    assert ci(live_server, token, monkeypatch, capsys, "--fail-on-alert", "latency")[0] == 0
    assert ci(live_server, token, monkeypatch, capsys, "--fail-on-alert", "none")[0] == 0
    assert ci(live_server, token, monkeypatch, capsys, "--fail-on-alert", "any")[0] == 3


def test_a_run_that_did_not_succeed_exits_1_whatever_its_alerts(
    live_server, token, worker, monkeypatch, capsys
):
    worker.figures = {
        ("tiny", "greedy-by-size"): bytes_only(58_192),
        ("tiny", "tvm-stock"): report_of(error="no TVM"),
    }

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 1, printed
    assert "partial: 1 of 2 failed" in printed and "[new]" in printed


def test_a_refused_token_exits_2(live_server, tracked, worker, monkeypatch, capsys):
    code, printed = ci(live_server, "pw_not-a-token", monkeypatch, capsys)

    assert code == 2
    assert "HTTP 401: unknown API token" in printed
    assert not Run.objects.filter(commit__sha="01" + "c" * 38).exists()


def test_it_gives_up_on_a_run_that_does_not_finish_in_time(
    live_server, token, monkeypatch, capsys
):
    # No worker: the run stays queued.
    monkeypatch.setattr(queue, "send", lambda *args, **kwargs: None)

    code, printed = ci(live_server, token, monkeypatch, capsys, "--timeout", "0")

    assert code == 1
    assert "did not finish in time (queued)" in printed


def test_the_file_runs_on_its_own_with_the_standard_library_only(tmp_path):
    # The job copies the file into another repository: nothing of Peakwatch is importable.
    copy = tmp_path / "peakwatch_ci.py"
    copy.write_text(CLIENT.read_text())

    answer = subprocess.run(
        [sys.executable, "-I", str(copy), "--help"], capture_output=True, text=True,
        cwd=tmp_path, timeout=60,
    )

    assert answer.returncode == 0, answer.stderr
    assert "exit status: 0" in answer.stdout


def test_a_second_call_waits_on_the_first_run_unless_asked_to_run_again(
    live_server, token, worker, monkeypatch, capsys
):
    worker.figures = {("tiny", "greedy-by-size"): bytes_only(50_000)}
    assert ci(live_server, token, monkeypatch, capsys)[0] == 0
    [first] = Run.objects.filter(commit__sha="01" + "c" * 38)

    code, printed = ci(live_server, token, monkeypatch, capsys)

    assert code == 0, printed
    assert f"attached to run {first.pk} of 01cccccccc (succeeded)" in printed
    assert Run.objects.filter(commit__sha="01" + "c" * 38).count() == 1

    code, printed = ci(live_server, token, monkeypatch, capsys, "--rerun")

    assert code == 0, printed
    assert "attached" not in printed
    assert Run.objects.filter(commit__sha="01" + "c" * 38).count() == 2
