"""A run's status says what was measured: succeeded (every result ok), partial (some failed,
and how many), failed (none succeeded, or the run itself failed)."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.urls import reverse

from dashboard import actions
from dashboard.models import Alert, Run
from tests.conftest import report_of
from tests.helpers import hold_planned_runs
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def repository():
    return actions.track_repository("tracked", "/nonexistent")


def failed(why: str = "the model does not build"):
    return report_of(error=why)


@pytest.mark.parametrize(
    "recorded, failed_results, status",
    [(12, 0, "succeeded"), (12, 3, "partial"), (12, 12, "failed"), (0, 0, "failed")],
)
def test_a_run_succeeds_only_when_every_result_is_ok(recorded, failed_results, status):
    assert Run.outcome(recorded=recorded, failed=failed_results) == status


def test_a_status_says_how_many_results_failed():
    assert Run(status="partial", progress_done=12, failed_results=3).status_text == (
        "partial: 3 of 12 failed"
    )
    assert Run(status="failed", progress_done=12, failed_results=12).status_text == (
        "failed: none of 12 succeeded"
    )
    # Failed by an error while some of its results were ok: the error says why.
    assert Run(status="failed", progress_done=12, failed_results=4).status_text == (
        "failed: 4 of 12 failed"
    )
    assert Run(status="failed", error="bad manifest").status_text == "failed"
    assert Run(status="succeeded", progress_done=12).status_text == "succeeded"
    assert Run(status="running", progress_done=2, failed_results=1).status_text == "running"


def test_a_run_whose_every_result_failed_is_failed(repository):
    run = record_run(repository, 0, {("small-cnn", "none"): failed(),
                                     ("small-cnn", "tvm-stock"): failed()})

    assert run.status == Run.Status.FAILED
    assert (run.failed_results, run.progress_done) == (2, 2)
    assert run.status_text == "failed: none of 2 succeeded"
    assert run.finished_at is not None


def test_a_run_with_some_failed_results_is_partial_and_says_how_many(repository):
    run = record_run(repository, 0, {("small-cnn", "none"): bytes_only(80_000),
                                     ("small-cnn", "tvm-stock"): bytes_only(50_000),
                                     ("small-cnn", "greedy-by-size"): failed()})

    assert run.status == Run.Status.PARTIAL
    assert run.status_text == "partial: 1 of 3 failed"
    assert run.is_finished


def test_a_run_whose_every_result_is_ok_succeeded(repository):
    run = record_run(repository, 0, {("small-cnn", "none"): bytes_only(80_000)})

    assert (run.status, run.failed_results, run.status_text) == ("succeeded", 0, "succeeded")


def test_a_run_failed_by_an_error_counts_the_results_that_failed(repository):
    run = record_run(repository, 0, {("small-cnn", "none"): failed()})

    actions.finish_run(run, error="board cuda is offline: no GPU")

    run.refresh_from_db()
    assert (run.status, run.failed_results) == ("failed", 1)
    assert run.error == "board cuda is offline: no GPU"


def test_regressions_are_found_among_a_partial_runs_successful_results_not_a_failed_ones(
    repository
):
    base = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(50_000),
                                      ("small-cnn", "none"): bytes_only(80_000)})

    run = record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(58_192),
                                     ("small-cnn", "none"): failed()},
                     parent=base.commit.sha)

    assert run.status == Run.Status.PARTIAL
    [alert] = Alert.objects.filter(run=run)
    assert (alert.strategy.name, alert.value) == ("greedy-by-size", 58_192)

    # A run failed by one board while another may still be recording is not searched.
    commit = actions.record_commit(
        repository, sha="02" + "c" * 38, parent_sha=base.commit.sha, branch="main",
        committed_at=base.commit.committed_at,
    )
    broken = Run.objects.create(repository=repository, commit=commit)
    actions.begin_run(broken, models=[("small-cnn", "zoo:small_cnn")],
                      strategies=["greedy-by-size"], boards=["cpu", "cuda"], total=2)
    actions.record_result(broken, model="small-cnn", strategy="greedy-by-size", board="cpu",
                          report=bytes_only(58_192))
    actions.finish_run(broken, error="board cuda is offline: no GPU")

    broken.refresh_from_db()
    assert broken.status == Run.Status.FAILED
    assert not Alert.objects.filter(run=broken).exists()


def test_the_overview_badges_a_partial_run_as_partial_not_succeeded(client, repository):
    run = record_run(repository, 0, {("small-cnn", "none"): bytes_only(80_000),
                                     ("small-cnn", "tvm-stock"): failed()})

    html = client.get(reverse("home")).content.decode()

    assert '<span class="status status-partial">partial: 1 of 2 failed</span>' in html
    assert "status-succeeded" not in html
    assert f'href="{run.get_absolute_url()}"' in html


def test_the_overview_says_a_model_whose_every_result_failed_has_no_successful_one(
    client, repository
):
    record_run(repository, 0, {("small-cnn", "none"): failed()})

    html = client.get(reverse("home")).content.decode()

    assert "No successful result yet:" in html and "No results yet" not in html
    assert 'href="/repos/tracked/models/small-cnn/">small-cnn</a>' in html
    assert "failed: none of 1 succeeded</span>" in html


def test_the_run_page_and_its_progress_say_how_many_results_failed(client, repository):
    run = record_run(repository, 0, {("small-cnn", "none"): failed(),
                                     ("small-cnn", "tvm-stock"): failed()})

    html = client.get(run.get_absolute_url()).content.decode()
    progress = client.get(reverse("run-progress", args=[run.pk])).json()

    assert "failed: none of 2 succeeded</span>" in html and "status-succeeded" not in html
    assert progress["status"] == "failed"
    assert progress["status_text"] == "failed: none of 2 succeeded"
    assert progress["failed_results"] == 2


def test_a_partial_run_counts_as_the_commits_run_and_a_failed_one_does_not(
    repository, monkeypatch
):
    hold_planned_runs(monkeypatch)
    partial = record_run(repository, 0, {("small-cnn", "none"): bytes_only(80_000),
                                         ("small-cnn", "tvm-stock"): failed()})
    broken = record_run(repository, 1, {("small-cnn", "none"): failed()})

    kept, new = actions.ensure_run(partial.commit, trigger="push")
    again, started_again = actions.ensure_run(broken.commit, trigger="push")

    assert (kept, new) == (partial, False)
    assert started_again and again != broken and again.commit == broken.commit


def test_the_migration_recounts_runs_recorded_as_succeeded(repository):
    # Given runs closed before partial existed: every run with its results in "succeeded"
    partial = record_run(repository, 0, {("m", "a"): bytes_only(1000), ("m", "b"): failed()})
    broken = record_run(repository, 1, {("m", "a"): failed()})
    fine = record_run(repository, 2, {("m", "a"): bytes_only(1000)})
    Run.objects.update(status="succeeded", failed_results=0)

    migration = import_module("dashboard.migrations.0013_run_outcomes")
    migration.recount_finished_runs(apps, None)

    statuses = dict(Run.objects.values_list("pk", "status"))
    assert statuses == {partial.pk: "partial", broken.pk: "failed", fine.pk: "succeeded"}
    assert Run.objects.get(pk=partial.pk).status_text == "partial: 1 of 2 failed"
