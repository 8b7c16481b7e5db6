"""Commit statuses, pull request comments and Slack messages reach a recording server."""

from __future__ import annotations

import pytest

from dashboard import actions, notifications
from dashboard.models import Notification
from tests.conftest import report_of
from tests.helpers import hold_planned_runs
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def repository(github_api):
    repository = actions.track_repository("tracked", "/nonexistent")
    repository.github_repository = "octo/models"
    repository.github_token = "ghp_test"
    repository.slack_webhook_url = github_api.url + "/services/T000/B000/XXX"
    repository.save()
    return repository


def _requests(server, method=None, suffix=""):
    return [r for r in server.requests
            if (method is None or r["method"] == method) and r["path"].endswith(suffix)]


def test_a_finished_run_sets_a_success_status_on_its_commit(
    repository, github_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = record_run(repository, 0, {("m", "s"): bytes_only(1000)})

    [status] = github_api.requests
    assert status["method"] == "POST"
    assert status["path"] == f"/api/v3/repos/octo/models/statuses/{run.commit.sha}"
    assert status["headers"]["Authorization"] == "Bearer ghp_test"
    assert status["json"]["state"] == "success"
    assert status["json"]["context"] == "peakwatch/memory"
    assert status["json"]["target_url"] == f"https://peakwatch.example/runs/{run.pk}/"
    assert Notification.objects.get().ok


def test_a_regression_fails_the_status_and_posts_to_slack(
    repository, github_api, django_capture_on_commit_callbacks
):
    base = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(50_000)})
    with django_capture_on_commit_callbacks(execute=True):
        run = record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(58_192)},
                         parent=base.commit.sha)

    [status] = _requests(github_api, suffix=run.commit.sha)
    assert status["json"]["state"] == "failure"
    assert "1 regression(s) in small-cnn" in status["json"]["description"]
    assert "/alerts/?repository=tracked&commit=" in status["json"]["target_url"]
    [slack] = _requests(github_api, suffix="/services/T000/B000/XXX")
    assert "small-cnn / greedy-by-size / cpu: planned bytes 48.8 KiB → 56.8 KiB" in (
        slack["json"]["text"]
    )


def test_a_pull_request_gets_a_summary_comment_which_later_runs_edit(repository, github_api):
    base = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(50_000),
                                      ("small-cnn", "none"): bytes_only(80_000)})
    pull_request = actions.record_pull_request(
        repository, number=12, head_sha="01" + "c" * 38, base_sha=base.commit.sha
    )
    run = record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(58_192),
                                     ("small-cnn", "none"): bytes_only(80_000)},
                     parent=base.commit.sha, pull_request=pull_request, branch="feature")

    notifications.send_run_notifications(run)
    notifications.send_run_notifications(run)

    first, second = _requests(github_api, suffix="/comments") + _requests(
        github_api, method="PATCH")
    assert (first["method"], first["path"]) == (
        "POST", "/api/v3/repos/octo/models/issues/12/comments"
    )
    body = first["json"]["body"]
    assert "**1 regression(s)**" in body
    assert (
        "| small-cnn :warning: | greedy-by-size | cpu | 48.8 KiB | 56.8 KiB | +8.0 KiB (+16.4%) |"
    ) in body
    # The row that did not move is counted, not listed.
    assert "| small-cnn | none |" not in body
    assert "1 more row(s) plan the same bytes as the merge base." in body
    assert f"/repos/tracked/compare/{base.commit.sha}...{run.commit.sha}/" in body
    # The answer's comment id is remembered: the next summary edits the same comment.
    pull_request.refresh_from_db()
    assert second["method"] == "PATCH"
    assert second["path"] == f"/api/v3/repos/octo/models/issues/comments/{pull_request.comment_id}"


def test_a_partial_run_is_a_failure_that_says_how_many_results_failed(
    repository, github_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = record_run(repository, 0, {("m", "a"): bytes_only(1000), ("m", "b"): bytes_only(900),
                                         ("m", "c"): report_of(error="does not build")})

    [status] = github_api.requests
    assert run.status == "partial"
    assert status["json"]["state"] == "failure"
    assert status["json"]["description"] == "partial: 1 of 3 failed"
    assert status["json"]["target_url"] == f"https://peakwatch.example/runs/{run.pk}/"


def test_a_run_whose_every_result_failed_is_a_failure_and_one_that_broke_an_error(
    repository, github_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = record_run(repository, 0, {("m", "a"): report_of(error="no TVM")})
    broke = record_run(repository, 1, {("m", "a"): bytes_only(1000)})
    actions.finish_run(broke, error="board cuda is offline")
    broke.refresh_from_db()
    notifications.send_run_notifications(broke)

    failure, error = [r["json"] for r in github_api.requests]
    assert (failure["state"], failure["description"]) == (
        "failure", "failed: none of 1 succeeded"
    )
    assert run.status == "failed" and not run.error
    assert (error["state"], error["description"]) == (
        "error", "run failed: board cuda is offline"
    )


def test_a_pull_request_comment_says_which_results_of_a_partial_run_failed(
    repository, github_api
):
    base = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(50_000),
                                      ("small-cnn", "none"): bytes_only(80_000)})
    pull_request = actions.record_pull_request(
        repository, number=12, head_sha="01" + "c" * 38, base_sha=base.commit.sha
    )
    run = record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(50_000),
                                     ("small-cnn", "none"): report_of(error="out of memory")},
                     parent=base.commit.sha, pull_request=pull_request, branch="feature")
    broken = record_run(repository, 2, {("small-cnn", "none"): report_of(error="no TVM")},
                        parent=base.commit.sha, pull_request=pull_request, branch="feature")

    notifications.send_run_notifications(run)
    notifications.send_run_notifications(broken)

    # The summary comment, posted, then edited.
    partial, failed = [r["json"]["body"] for r in github_api.requests if "body" in r["json"]]
    assert (
        f"**Some results failed** (1 of 2 failed): see "
        f"[run {run.pk}](https://peakwatch.example/runs/{run.pk}/)."
    ) in partial
    # The result that failed has no head figure: listed; the one that did not move, counted.
    assert "| small-cnn | none | cpu | 78.1 KiB | — | — (—) | — |" in partial
    assert "1 more row(s) plan the same bytes as the merge base." in partial
    assert (
        f"The [run {broken.pk}](https://peakwatch.example/runs/{broken.pk}/) failed: "
        f"results: none of 1 succeeded"
    ) in failed


def test_a_failing_endpoint_is_recorded_not_raised(repository, github_api):
    github_api.status = 500
    run = record_run(repository, 0, {("m", "s"): bytes_only(1000)})

    [sent] = notifications.send_run_notifications(run)

    assert sent.status_code == 500 and not sent.ok


def test_an_unreachable_endpoint_is_recorded_not_raised(repository, settings):
    settings.PEAKWATCH_GITHUB_API_URL = "http://127.0.0.1:9"
    run = record_run(repository, 0, {("m", "s"): bytes_only(1000)})

    [sent] = notifications.send_run_notifications(run)

    assert sent.status_code is None and sent.error


def test_nothing_is_sent_without_configuration(github_api):
    repository = actions.track_repository("quiet", "/nonexistent")
    run = record_run(repository, 0, {("m", "s"): bytes_only(1000)})

    assert notifications.send_run_notifications(run) == []
    assert github_api.requests == []


def test_a_started_run_sets_a_pending_status(
    repository, github_api, django_capture_on_commit_callbacks, monkeypatch
):
    hold_planned_runs(monkeypatch)
    commit = actions.record_commit(repository, sha="ab" * 20, committed_at="2026-11-01T00:00Z")

    with django_capture_on_commit_callbacks(execute=True):
        actions.start_run(commit)

    [status] = github_api.requests
    assert status["path"].endswith(f"/statuses/{commit.sha}")
    assert status["json"]["state"] == "pending"


def test_a_pull_request_that_moves_nothing_says_so_without_a_table(repository, github_api):
    figures = {("small-cnn", "greedy-by-size"): bytes_only(50_000),
               ("small-cnn", "none"): bytes_only(80_000)}
    base = record_run(repository, 0, figures)
    pull_request = actions.record_pull_request(
        repository, number=13, head_sha="01" + "c" * 38, base_sha=base.commit.sha
    )
    run = record_run(repository, 1, figures, parent=base.commit.sha,
                     pull_request=pull_request, branch="feature")

    notifications.send_run_notifications(run)

    [comment] = _requests(github_api, suffix="/comments")
    body = comment["json"]["body"]
    assert "All 2 row(s) plan the same bytes as the merge base." in body
    assert "| Model |" not in body
