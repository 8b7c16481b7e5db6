"""Who may change what: reading is public (or private by a setting), changing needs a
maintainer."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from dashboard import actions
from dashboard.models import Alert, Run
from tests.helpers import hold_planned_runs
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def alert():
    repository = actions.track_repository("tracked", "/nonexistent")
    first = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(1000)})
    record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(2000)},
               parent=first.commit.sha)
    return Alert.objects.get()


@pytest.fixture
def awaiting_run(alert):
    return Run.objects.create(
        repository=alert.repository, commit=alert.commit, trigger="pull-request",
        status=Run.Status.AWAITING_APPROVAL,
    )


def _triage(client, alert, state="acknowledged"):
    return client.post(reverse("alert-triage", args=[alert.pk]), {"state": state})


def test_an_anonymous_triage_is_sent_to_the_login_page(client, alert):
    response = _triage(client, alert)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")
    alert.refresh_from_db()
    assert alert.state == Alert.State.NEW


def test_a_logged_in_user_without_the_permission_may_not_triage(client, alert):
    client.force_login(User.objects.create_user("visitor", password="visitor-password"))

    response = _triage(client, alert)

    assert response.status_code == 403
    alert.refresh_from_db()
    assert alert.state == Alert.State.NEW


def test_a_maintainer_triages_an_alert(maintainer_client, alert):
    response = _triage(maintainer_client, alert)

    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.state == Alert.State.ACKNOWLEDGED


def test_the_alerts_page_offers_triage_only_to_maintainers(client, maintainer, alert):
    anonymous = client.get(reverse("alerts")).content.decode()
    client.force_login(maintainer)
    logged_in = client.get(reverse("alerts")).content.decode()

    action = reverse("alert-triage", args=[alert.pk])
    assert action not in anonymous and "data-alert-state" in anonymous
    assert action in logged_in


def test_an_unknown_state_filter_on_the_alerts_page_is_400(client, alert):
    response = client.get(reverse("alerts"), {"state": "gone"})

    assert response.status_code == 400
    assert b"unknown state" in response.content


def test_an_anonymous_approval_is_sent_to_the_login_page(client, awaiting_run):
    response = client.post(reverse("run-approve", args=[awaiting_run.pk]))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == Run.Status.AWAITING_APPROVAL


def test_a_maintainer_approves_a_run(
    maintainer_client, awaiting_run, monkeypatch, django_capture_on_commit_callbacks
):
    queued = hold_planned_runs(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        response = maintainer_client.post(reverse("run-approve", args=[awaiting_run.pk]))

    assert response.status_code == 302
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == Run.Status.QUEUED
    assert awaiting_run.approved_by == "maintainer"
    assert queued == [awaiting_run.pk]


def test_pages_and_the_api_are_public_to_read_by_default(client, alert):
    for url in (reverse("home"), reverse("alerts"), reverse("api:run-list")):
        assert client.get(url).status_code == 200, url


@pytest.fixture
def private(settings):
    settings.PEAKWATCH_PUBLIC = False


def test_a_private_peakwatch_sends_anonymous_readers_to_the_login_page(client, private, alert):
    page = client.get(reverse("alerts"))
    api = client.get(reverse("api:run-list"))
    login = client.get(reverse("login"))

    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
    assert api.status_code == 401 and "log in" in api.json()["error"]
    assert login.status_code == 200


def test_a_private_peakwatch_keeps_webhooks_and_the_token_api_on_their_own_auth(
    client, private, alert
):
    webhook = client.post("/webhooks/github/nope", data=b"{}", content_type="application/json")
    trigger = client.post(reverse("api-trigger-run"), data=b"{}",
                          content_type="application/json")

    assert webhook.status_code == 404
    assert trigger.status_code == 401 and "API token" in trigger.json()["error"]


def test_a_private_peakwatch_is_readable_once_logged_in(client, private, alert):
    client.force_login(User.objects.create_user("reader", password="reader-password"))

    for url in (reverse("home"), reverse("alerts"), reverse("api:run-list")):
        assert client.get(url).status_code == 200, url


def test_a_private_peakwatch_lets_a_token_follow_its_own_repositorys_runs_only(
    client, private, alert
):
    run = alert.run
    other = actions.track_repository("other", "/nonexistent/other.git")
    own = actions.create_api_token("ci", run.repository)[1]
    foreign = actions.create_api_token("theirs", other)[1]
    detail = reverse("api:run-detail", args=[run.pk])

    followed = client.get(detail, HTTP_AUTHORIZATION=f"Bearer {own}")
    refused = client.get(detail, HTTP_AUTHORIZATION=f"Bearer {foreign}")
    listing = client.get(reverse("api:run-list"), HTTP_AUTHORIZATION=f"Bearer {own}")
    unknown = client.get(detail, HTTP_AUTHORIZATION="Bearer not-a-token")

    assert followed.status_code == 200 and followed.json()["alerts"]
    assert refused.status_code == 401
    assert listing.status_code == 401
    assert unknown.status_code == 401
