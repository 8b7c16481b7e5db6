"""``manage.py run --wait``: what CI reads, the commit's alerts, and an exit it can fail on."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from dashboard import actions, tracking
from dashboard.demo import git
from dashboard.models import Alert, Run
from tests.conftest import report_of
from tests.regression.history import START, bytes_only, record_run

pytestmark = pytest.mark.django_db

SEQ = [512, 32, 128]


@pytest.fixture
def tracked(demo_repository_path):
    return actions.track_repository("tracked", str(demo_repository_path))


@pytest.fixture
def sha(demo_repository_path):
    """The demo's commits, oldest first: real ones, so ``run --sha`` resolves them."""
    return lambda back: git(demo_repository_path, "rev-parse", f"HEAD~{back}")


def handed(monkeypatch, run: Run) -> Run:
    # As tracking.run_revision hands back the run it started (here, already recorded).
    monkeypatch.setattr(tracking, "run_revision", lambda *args, **kwargs: run)
    return run


def run_wait(run: Run, *options: str) -> tuple[str, int]:
    """What ``run --wait`` printed and its exit status."""
    out = io.StringIO()
    try:
        call_command("run", "tracked", "--sha", run.commit.sha, "--wait", *options, stdout=out)
    except CommandError as error:
        return out.getvalue() + f"\nCommandError: {error}", error.returncode
    return out.getvalue(), 0


@pytest.fixture
def grown(tracked, sha, monkeypatch):
    """Commit 1 grows "tiny" under greedy-by-size by 8 KiB over commit 0; the rest stays."""
    base = record_run(tracked, 0, {
        ("tiny", "greedy-by-size"): bytes_only(50_000), ("tiny", "none"): bytes_only(80_000),
    }, sha=sha(2))
    return handed(monkeypatch, record_run(tracked, 1, {
        ("tiny", "greedy-by-size"): bytes_only(58_192), ("tiny", "none"): bytes_only(80_000),
    }, parent=base.commit.sha, sha=sha(1)))


def test_it_prints_the_commits_alerts_after_the_table(grown):
    printed, code = run_wait(grown)

    assert code == 0
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("model"))
    summary = next(i for i, line in enumerate(lines) if "alert(s) on" in line)
    assert header < summary < len(lines) - 1
    assert lines[summary].startswith(f"1 alert(s) on {grown.commit.short_sha}, 1 open: ")
    assert lines[summary + 1].split() == [
        "bytes", "tiny", "/", "greedy-by-size", "/", "cpu", "/", "worker", "environment",
        "(tvm", "0.27.0.post1):", "48.8", "KiB", "→", "56.8", "KiB", "(+8,192", "B,", "+16.4%)",
        "[new]",
    ]
    assert lines[-1] == f"run {grown.pk} succeeded"


def test_it_links_the_commits_alerts_page_at_the_base_url(grown, settings):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example/"

    printed, _ = run_wait(grown)

    link = (
        f"https://peakwatch.example/alerts/?repository=tracked&commit={grown.commit.sha}"
    )
    assert f"1 open: {link}" in printed


def test_fail_on_alert_exits_3_on_an_open_bytes_alert_and_0_without_it(grown):
    printed, code = run_wait(grown, "--fail-on-alert")

    assert code == 3
    assert f"run {grown.pk} succeeded" in printed
    assert "CommandError: 1 open bytes alert(s) on " + grown.commit.short_sha in printed

    assert run_wait(grown)[1] == 0


def test_fail_on_alert_alone_waits_for_the_run(grown):
    out = io.StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("run", "tracked", "--sha", grown.commit.sha, "--fail-on-alert", stdout=out)

    assert failure.value.returncode == 3
    assert "alert(s) on" in out.getvalue()


@pytest.mark.parametrize("state, code", [
    ("new", 3), ("acknowledged", 3), ("intended", 0), ("invalid", 0), ("fixed", 0),
])
def test_only_an_open_alert_fails_the_run(grown, state, code):
    actions.triage_alert(Alert.objects.get(), state)

    printed, status = run_wait(grown, "--fail-on-alert=bytes")

    assert status == code
    assert f"[{state}]" in printed


def test_a_run_that_did_not_succeed_keeps_its_own_exit_status(tracked, sha, monkeypatch):
    base = record_run(tracked, 0, {("tiny", "none"): bytes_only(50_000)}, sha=sha(2))
    partial = handed(monkeypatch, record_run(tracked, 1, {
        ("tiny", "none"): bytes_only(60_000), ("tiny", "tvm-stock"): report_of(error="no TVM"),
    }, parent=base.commit.sha, sha=sha(1)))
    assert Alert.objects.get().run == partial

    printed, code = run_wait(partial, "--fail-on-alert")

    assert code == 1
    assert "  bytes   tiny / none / cpu / " in printed
    assert printed.splitlines()[-1] == f"CommandError: run {partial.pk} partial: 1 of 2 failed"


@pytest.fixture
def slower(tracked, sha, monkeypatch):
    """Commit 1 is three times slower than the commits before it, at the same bytes."""
    steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]
    base = record_run(tracked, 0, {("tiny", "none"): bytes_only(50_000, samples=steady)},
                      sha=sha(2))
    return handed(monkeypatch, record_run(
        tracked, 1, {("tiny", "none"): bytes_only(50_000, samples=[3 * s for s in steady])},
        parent=base.commit.sha, sha=sha(1),
    ))


@pytest.mark.parametrize("option, code", [
    ("--fail-on-alert", 0), ("--fail-on-alert=bytes", 0), ("--fail-on-alert=latency", 3),
    ("--fail-on-alert=any", 3),
])
def test_fail_on_alert_names_the_kind_it_fails_on(slower, option, code):
    assert Alert.objects.get().kind == "latency"

    printed, status = run_wait(slower, option)

    assert status == code
    assert "  latency tiny / none / cpu / " in printed and " ms → " in printed


def record_points(repository, index: int, planned: dict[int, int], *, sha: str,
                  parent: str = "") -> Run:
    """A finished run measuring "seq-model" at each ``seq`` point of ``planned`` (point ->
    planned bytes), recorded in the order given, as a worker may."""
    commit = actions.record_commit(
        repository, sha=sha, parent_sha=parent, branch="main", message=f"Commit {index}",
        committed_at=START + timedelta(hours=index),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("seq-model", "zoo:pool_reuse")], strategies=["none"],
                      boards=["cpu"], total=len(planned))
    for point, value in planned.items():
        actions.record_result(run, model="seq-model", strategy="none", board="cpu",
                              report=bytes_only(value, shape_point={"seq": point}))
    actions.finish_run(run)
    run.refresh_from_db()
    return run


def test_points_are_listed_by_value_in_the_table_and_the_alerts(tracked, sha, monkeypatch):
    base = record_points(tracked, 0, {point: point * 1000 for point in SEQ}, sha=sha(2))
    run = handed(monkeypatch, record_points(
        tracked, 1, {point: point * 1000 + 4096 for point in SEQ}, sha=sha(1),
        parent=base.commit.sha,
    ))

    printed, _ = run_wait(run)

    rows = [line.split()[2] for line in printed.splitlines() if line.startswith("seq-model at")]
    assert rows == ["seq=32", "seq=128", "seq=512"]
    alerts = [line.split(" at ")[1].split(":")[0] for line in printed.splitlines()
              if line.startswith("  bytes ")]
    assert alerts == ["seq=32", "seq=128", "seq=512"]
