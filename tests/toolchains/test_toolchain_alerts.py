"""An alert fires when a new toolchain makes a series worse than the previous toolchain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from dashboard import actions
from dashboard.models import Alert, Run
from tests.conftest import fake_report

pytestmark = pytest.mark.django_db

OLD, NEW = "apache-tvm==0.26.0", ""  # the worker's own TVM is 0.27
VERSIONS = {OLD: "0.26.0", NEW: "0.27.0.post1"}


def _commit_with(repository, index, parent, figures):
    """A commit and a finished run whose results are ``figures``: {toolchain: bytes}."""
    commit = actions.record_commit(
        repository, sha=f"{index:02d}" + "c" * 38, parent_sha=parent, branch="main",
        committed_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=index),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("net", "zoo:small_cnn")], strategies=["tvm-stock"],
                      boards=["cpu"], total=len(figures))
    for spec, planned in figures.items():
        actions.record_result(
            run, model="net", strategy="tvm-stock", board="cpu", toolchain=spec,
            report=fake_report(planned, 2.0, tvm_version=VERSIONS[spec]),
        )
    actions.finish_run(run)
    return commit, run


@pytest.fixture
def repository(db):
    return actions.track_repository("tc", "/nonexistent/tc.git")


def test_a_new_toolchain_that_plans_more_bytes_alerts_against_the_previous_one(repository):
    first, _ = _commit_with(repository, 0, "", {OLD: 100_000})

    second, run = _commit_with(repository, 1, first.sha, {OLD: 100_000, NEW: 120_000})

    alert = Alert.objects.get(run=run)
    assert alert.kind == "bytes"
    assert (alert.baseline_value, alert.value) == (100_000, 120_000)
    assert alert.toolchain.spec == NEW
    assert alert.baseline.toolchain.spec == OLD and alert.baseline.commit == second
    assert alert.is_toolchain_change
    assert alert.compare_url() == (
        f"/repos/tc/commits/{second.sha}/toolchains/?base=apache-tvm%3D%3D0.26.0&head="
    )
    # Which TVM the alert is about reads in the log and on the alerts page.
    label = alert.toolchain.label
    assert f"alert: Planned bytes of net / tvm-stock / {alert.board} with {label} @" in (
        Run.objects.get(pk=run.pk).log
    )
    page = Client().get("/alerts/").content.decode()
    assert f'<span class="sub" data-toolchain>{label}</span>' in page


def test_a_new_toolchain_that_plans_no_more_does_not_alert(repository):
    first, _ = _commit_with(repository, 0, "", {OLD: 100_000})

    _, run = _commit_with(repository, 1, first.sha, {OLD: 100_000, NEW: 90_000})

    assert not Alert.objects.filter(run=run).exists()


def test_an_older_toolchain_added_later_is_not_a_new_toolchain(repository):
    first, _ = _commit_with(repository, 0, "", {NEW: 100_000})

    # 0.26 arrives after 0.27 and plans less: 0.27 did not get worse, nothing to say.
    _, run = _commit_with(repository, 1, first.sha, {NEW: 100_000, OLD: 80_000})

    assert not Alert.objects.filter(run=run).exists()


def test_the_difference_alerts_once_when_the_toolchain_arrives_not_at_every_commit(repository):
    first, _ = _commit_with(repository, 0, "", {OLD: 100_000})
    second, _ = _commit_with(repository, 1, first.sha, {OLD: 100_000, NEW: 120_000})

    _, run = _commit_with(repository, 2, second.sha, {OLD: 100_000, NEW: 120_000})

    assert not Alert.objects.filter(run=run).exists()
    assert Alert.objects.count() == 1


def test_a_series_is_compared_with_its_own_toolchain_history(repository):
    first, _ = _commit_with(repository, 0, "", {OLD: 100_000, NEW: 100_000})

    # 0.27 grows at this commit; 0.26 does not: one alert, against 0.27's own past.
    _, run = _commit_with(repository, 1, first.sha, {OLD: 100_000, NEW: 110_000})

    alert = Alert.objects.get(run=run)
    assert alert.toolchain.spec == NEW
    assert alert.baseline.commit == first and alert.baseline.toolchain.spec == NEW
    assert not alert.is_toolchain_change
