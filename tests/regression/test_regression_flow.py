"""The whole flow: signed GitHub deliveries, a real Celery worker, an alert, notifications.

Given a tracked repository whose pull request widens a model, when GitHub delivers the push
of main and then the pull request, a worker runs both commits, the pull request's head
raises an alert against its merge base, GitHub receives a commit status and a summary
comment, Slack a message, and the comparison page shows the growth. Bad signatures,
malformed payloads and redeliveries along the way change nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.demo import commit_file, create_demo_repository, git, render_manifest
from dashboard.models import Alert, Commit, Notification, Result, Run, WebhookDelivery
from tests.regression.conftest import SECRET, deliver, pull_request_payload, push_payload
from tests.workers.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

SMALL = {"channels": 4, "resolution": 16, "depth": 2}
RESIDUAL = {"channels": 4, "resolution": 16, "blocks": 1}
STRATEGIES = ("tvm-stock", "greedy-by-size")
Outcome = WebhookDelivery.Outcome


@pytest.fixture
def origin(tmp_path):
    """main has one commit; the feature branch widens the small CNN on top of it."""
    path = tmp_path / "origin"
    [main] = create_demo_repository(
        path, [("Track tiny models", {"small-cnn": SMALL, "residual-cnn": RESIDUAL})],
        strategies=STRATEGIES,
    )
    git(path, "checkout", "-q", "-b", "feature")
    feature = commit_file(
        path, "peakwatch.toml",
        render_manifest({"small-cnn": {**SMALL, "channels": 8}, "residual-cnn": RESIDUAL},
                        STRATEGIES),
        "Widen the small CNN", datetime.now(UTC) + timedelta(minutes=1),
    )
    return path, main, feature


def test_a_pull_request_that_grows_memory_is_flagged_everywhere(
    client, origin, github_api, start_worker, monkeypatch
):
    path, main, feature = origin
    repository = actions.track_repository("tracked", str(path))
    repository.webhook_secret = SECRET
    repository.github_repository = "octo/models"
    repository.github_token = "ghp_test"
    repository.slack_webhook_url = github_api.url + "/services/T0/B0/X"
    repository.save()
    # The worker process reads these from its environment.
    monkeypatch.setenv("PEAKWATCH_GITHUB_API_URL", github_api.url + "/api/v3")
    monkeypatch.setenv("PEAKWATCH_BASE_URL", "https://peakwatch.example")
    worker = start_worker()
    logs = [worker.log_path]

    # The push of main: accepted at once, the git work and the run left to the worker.
    pushed = deliver(client, push_payload(main, commits=[main]), event="push", guid="push-1")
    assert pushed.status_code == 202
    # Noise that must change nothing: a redelivery, a forged and a malformed delivery.
    assert deliver(client, push_payload(main), event="push", guid="push-1").status_code == 200
    assert deliver(client, push_payload(feature), event="push", secret="forged").status_code == 401
    assert deliver(client, None, event="push", body=b'{"ref": 1}').status_code == 400

    wait_for(lambda: Run.objects.filter(commit__sha=main, status="succeeded").exists(), 300,
             "the run of main", logs)
    assert Run.objects.filter(commit__sha=main).count() == 1
    assert not Commit.objects.filter(sha=feature).exists()

    opened = pull_request_payload(9, head_sha=feature, base_sha=main)
    assert deliver(client, opened, event="pull_request", guid="pr-1").status_code == 202
    assert deliver(client, opened, event="pull_request", guid="pr-1").status_code == 200

    wait_for(lambda: Run.objects.filter(commit__sha=feature, status="succeeded").exists(), 300,
             "the run of the pull request's head", logs)
    wait_for(lambda: Notification.objects.filter(run__commit__sha=feature).count() >= 3, 60,
             "the pull request's notifications", logs)

    # One run per commit: the merge base already had one.
    assert Run.objects.count() == 2
    head_run = Run.objects.get(commit__sha=feature)
    assert head_run.pull_request.number == 9
    # The residual CNN did not change: compiled once, reused by the head.
    assert all(r.is_reused for r in Result.objects.filter(run=head_run, model__name="residual-cnn"))

    alerts = Alert.objects.filter(commit__sha=feature)
    assert {(a.model.name, a.kind) for a in alerts} == {("small-cnn", "bytes")}
    assert all(a.baseline.commit.sha == main and a.value > a.baseline_value for a in alerts)

    # A pending status when each run started, then the outcome (the last one counts).
    statuses = {r["path"].rsplit("/", 1)[1]: r["json"] for r in github_api.requests
                if "/statuses/" in r["path"]}
    assert statuses[main]["state"] == "success"
    assert statuses[feature]["state"] == "failure"
    assert "small-cnn" in statuses[feature]["description"]
    [comment] = [r for r in github_api.requests if r["path"].endswith("/issues/9/comments")]
    assert comment["headers"]["Authorization"] == "Bearer ghp_test"
    body = comment["json"]["body"]
    assert f"Compared with the merge base {main[:10]}" in body
    assert "| small-cnn :warning: | greedy-by-size | cpu |" in body
    assert "| residual-cnn |" not in body
    assert "more row(s) plan the same bytes as the merge base." in body
    slack = [r for r in github_api.requests if r["path"] == "/services/T0/B0/X"]
    assert slack and all("small-cnn" in r["json"]["text"] for r in slack)

    page = client.get(reverse("pull-request-compare", args=["tracked", 9])).content.decode()
    growth = alerts.get(strategy__name="greedy-by-size")
    assert f'data-bytes-delta="{int(growth.value - growth.baseline_value)}"' in page

    outcomes = sorted(WebhookDelivery.objects.values_list("outcome", flat=True))
    assert outcomes == sorted([Outcome.PROCESSED, Outcome.PROCESSED, Outcome.DUPLICATE,
                               Outcome.DUPLICATE, Outcome.BAD_SIGNATURE, Outcome.MALFORMED])
