"""``manage.py track`` and ``manage.py run`` as a user types them, on the embedded default:
SQLite under a data folder, tasks in process, no server of any kind."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard import actions, tracking
from dashboard.demo import DEMO_COMMITS, git
from dashboard.models import Board, Model, Result, Run, Strategy
from tests.conftest import report_of
from tests.helpers import record_head
from tests.regression.history import bytes_only, record_run

ROOT = Path(__file__).resolve().parents[2]
TINY = '[[models]]\nname = "tiny"\nsource = "zoo:small_cnn"\n' \
       'params = { channels = 2, resolution = 8, depth = 2 }\n'
BROKEN = '[[models]]\nname = "broken"\nsource = "zoo:no_such_net"\n'


@pytest.fixture
def manage(tmp_path):
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "REDIS_URL", "CELERY", "DJANGO_SETTINGS"))
    }
    env.update(PEAKWATCH_DATA_DIR=str(tmp_path / "data"), PEAKWATCH_LATENCY_REPEAT="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=600,
        )

    assert run("migrate", "--verbosity", "0").returncode == 0
    return run


@pytest.mark.slow
def test_track_then_run_and_wait_reports_and_exits_by_outcome(manage, empty_repo):
    empty_repo.write("peakwatch.toml", '[suite]\nstrategies = ["tvm-stock", "none"]\n\n' + TINY)
    good = empty_repo.commit("Track a tiny CNN")
    empty_repo.write("peakwatch.toml", '[suite]\nstrategies = ["tvm-stock", "none"]\n\n'
                     + TINY + "\n" + BROKEN)
    bad = empty_repo.commit("Add a model that cannot be built")

    tracked = manage("track", "tiny", str(empty_repo.path), "--trust", "nobody")
    assert tracked.returncode == 0, tracked.stderr
    assert "/webhooks/github/tiny" in tracked.stdout and "secret" in tracked.stdout

    ok = manage("run", "tiny", "--sha", good[:10], "--wait")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "tiny" in ok.stdout and "tvm-stock" in ok.stdout and "succeeded" in ok.stdout

    failed = manage("run", "tiny", "--wait")  # the branch head: the broken commit
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert bad[:10] in failed.stdout and "FAILED: " in failed.stdout, failed.stdout
    assert "unknown zoo model 'no_such_net'" in failed.stdout
    assert failed.stdout.splitlines()[-1].endswith(" partial: 2 of 4 failed"), failed.stdout
    assert "succeeded" not in failed.stdout
    assert "CommandError: run " in failed.stderr and " partial: 2 of 4 failed" in failed.stderr

    unknown = manage("run", "nope", "--wait")
    assert unknown.returncode == 2 and "no repository named 'nope'" in unknown.stderr
    missing = manage("run", "tiny", "--sha", "0123456789abcdef", "--wait")
    assert missing.returncode == 2 and "cannot run" in missing.stderr
    bad_name = manage("track", "a/b", str(empty_repo.path))
    assert bad_name.returncode == 2


@pytest.fixture
def failed_run(db, demo_repository_path, monkeypatch):
    """A finished, failed run of the demo's head that ``manage.py run`` is handed."""
    commit = record_head(demo_repository_path, "tracked")
    run = Run.objects.create(
        repository=commit.repository, commit=commit, status=Run.Status.FAILED, error=""
    )
    monkeypatch.setattr(tracking, "run_revision", lambda *args, **kwargs: run)
    return run


def _run_and_wait(run) -> tuple[str, str]:
    out = io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("run", "tracked", "--sha", run.commit.sha, "--wait", stdout=out)
    assert failure.value.returncode == 1
    return out.getvalue(), str(failure.value)


def test_run_wait_names_a_failed_result_that_has_no_error_message(failed_run):
    Result.objects.create(
        run=failed_run, commit=failed_run.commit, status=Result.Status.FAILED, error="",
        model=Model.objects.create(repository=failed_run.repository, name="tiny"),
        strategy=Strategy.objects.create(name="none"), board=Board.objects.create(name="cpu"),
    )
    # As finish_run leaves a run whose only result failed.
    Run.objects.filter(pk=failed_run.pk).update(progress_done=1, failed_results=1)

    printed, error = _run_and_wait(failed_run)

    assert "FAILED: no error message was recorded" in printed
    assert error == f"run {failed_run.pk} failed: none of 1 succeeded"


def _handed(demo_repository_path, monkeypatch, figures, index: int = 0) -> Run:
    """A run of a demo commit recorded with ``figures``, which ``manage.py run`` is handed
    as the run it started."""
    commit = record_head(demo_repository_path, "tracked")
    sha = git(demo_repository_path, "rev-parse", f"HEAD~{index}")
    run = record_run(commit.repository, index, figures, sha=sha)
    monkeypatch.setattr(tracking, "run_revision", lambda *args, **kwargs: run)
    return run


def test_run_wait_prints_what_became_of_the_run_and_exits_0_only_when_all_succeeded(
    db, demo_repository_path, monkeypatch
):
    partial = _handed(demo_repository_path, monkeypatch, {
        ("tiny", "none"): bytes_only(1000), ("tiny", "tvm-stock"): report_of(error="no TVM"),
    })
    printed, error = _run_and_wait(partial)
    assert printed.splitlines()[-1] == f"run {partial.pk} partial: 1 of 2 failed"
    assert error == f"run {partial.pk} partial: 1 of 2 failed"
    assert "succeeded" not in printed

    failed = _handed(demo_repository_path, monkeypatch, {("tiny", "none"): report_of(error="x")},
                     index=1)
    printed, error = _run_and_wait(failed)
    assert printed.splitlines()[-1] == f"run {failed.pk} failed: none of 1 succeeded"
    assert error == f"run {failed.pk} failed: none of 1 succeeded"

    succeeded = _handed(demo_repository_path, monkeypatch, {("tiny", "none"): bytes_only(1000)},
                        index=2)
    out = io.StringIO()
    call_command("run", "tracked", "--sha", succeeded.commit.sha, "--wait", stdout=out)
    assert out.getvalue().splitlines()[-1] == f"run {succeeded.pk} succeeded"


def _demo_runs(monkeypatch, figures_of):
    """Runs for ``manage.py demo`` without compiling: ``figures_of(index)`` are the
    figures of its ``index``th commit's run."""
    started = []

    def start_run(commit, *, trigger):
        run = record_run(commit.repository, len(started), figures_of(len(started)),
                         sha=commit.sha)
        started.append(run)
        return run

    monkeypatch.setattr(actions, "start_run", start_run)
    return started


def test_demo_says_when_every_result_failed_and_exits_1(db, settings, tmp_path, monkeypatch):
    settings.DATA_DIR = tmp_path
    _demo_runs(monkeypatch, lambda index: {
        ("small-cnn", "none"): report_of(error="No module named 'tvm'"),
        ("small-cnn", "tvm-stock"): report_of(error="No module named 'tvm'"),
    })
    out, err = io.StringIO(), io.StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("demo", "--no-serve", stdout=out, stderr=err)

    assert failure.value.returncode == 1
    assert "no result of demo-models succeeded" in str(failure.value)
    assert out.getvalue().count("  failed: none of 2 succeeded\n") == len(DEMO_COMMITS)
    assert "succeeded:" not in out.getvalue() and "Demo history recorded" not in out.getvalue()
    assert err.getvalue().count("  failed: No module named 'tvm'\n") == len(DEMO_COMMITS)


def test_demo_says_which_commits_succeeded_and_which_were_partial(
    db, settings, tmp_path, monkeypatch
):
    settings.DATA_DIR = tmp_path
    _demo_runs(monkeypatch, lambda index: {
        ("small-cnn", "none"): bytes_only(1000 + index),
        ("small-cnn", "tvm-stock"): bytes_only(900) if index == 0 else report_of(error="OOM"),
    })
    out, err = io.StringIO(), io.StringIO()

    call_command("demo", "--no-serve", stdout=out, stderr=err)

    printed = out.getvalue()
    assert printed.count("  succeeded: all 2 results ok\n") == 1
    assert printed.count("  partial: 1 of 2 failed\n") == len(DEMO_COMMITS) - 1
    assert "Demo history recorded for demo-models." in printed


def test_run_wait_says_so_when_a_failed_run_has_no_error_message(failed_run):
    printed, error = _run_and_wait(failed_run)

    assert f"run {failed_run.pk} failed" in printed
    assert error == f"run {failed_run.pk} failed: it recorded no error message"


def test_run_wait_labels_each_row_with_its_toolchain_when_there_are_two(
    db, demo_repository_path, monkeypatch
):
    run = _handed(demo_repository_path, monkeypatch, {("tiny", "none"): bytes_only(1000)})
    actions.record_result(
        run, model="tiny", strategy="none", board="cpu", report=bytes_only(2000),
        toolchain="apache-tvm==0.26.0",
    )
    out = io.StringIO()

    call_command("run", "tracked", "--sha", run.commit.sha, "--wait", stdout=out)

    header, *rows = [line for line in out.getvalue().splitlines() if "tiny" in line or
                     line.startswith("model")][:3]
    assert "toolchain" in header
    assert any("apache-tvm==0.26.0" in row and "2.0 KiB" in row for row in rows), rows
    assert any("worker environment" in row and "1000 B" in row for row in rows), rows
