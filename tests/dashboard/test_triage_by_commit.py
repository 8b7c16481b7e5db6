"""Triaging every open alert of a commit at once, from the overview."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from dashboard.models import Alert

pytestmark = pytest.mark.django_db


def triage_url(commit) -> str:
    return reverse("commit-alerts-triage", args=[commit.pk])


def test_a_maintainer_marks_every_open_alert_of_one_commit_intended(
    maintainer_client, recorded_history
):
    newest = recorded_history[-1].commit
    # One of its alerts was already closed as fixed: it stays so.
    fixed = Alert.objects.filter(commit=newest).first()
    fixed.state = Alert.State.FIXED
    fixed.save()

    response = maintainer_client.post(triage_url(newest), {"state": "intended", "next": "/"})

    assert response.status_code == 302 and response["Location"] == "/"
    states = dict(Alert.objects.filter(commit=newest).values_list("pk", "state"))
    assert states.pop(fixed.pk) == "fixed"
    assert set(states.values()) == {"intended"} and len(states) == 5
    # Other commits' alerts are untouched, and intended ones are no longer open.
    assert Alert.objects.exclude(commit=newest).filter(state="new").count() == 12
    assert not Alert.objects.filter(commit=newest).open().exists()


def test_anonymous_visitors_are_sent_to_log_in_and_others_refused(client, recorded_history):
    newest = recorded_history[-1].commit
    url = triage_url(newest)

    anonymous = client.post(url, {"state": "intended"})
    client.force_login(User.objects.create_user("visitor", password="visitor-password"))
    visitor = client.post(url, {"state": "intended"})

    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert visitor.status_code == 403
    assert set(Alert.objects.filter(commit=newest).values_list("state", flat=True)) == {"new"}


def test_an_unknown_state_is_refused(maintainer_client, recorded_history):
    response = maintainer_client.post(
        triage_url(recorded_history[-1].commit), {"state": "forgotten"}
    )

    assert response.status_code == 400
    assert not Alert.objects.exclude(state="new").exists()


def test_the_overview_lists_each_commit_with_open_alerts_once(client, recorded_history):
    html = client.get(reverse("home")).content.decode()

    for run in recorded_history[1:]:
        assert html.count(f'data-alert-commit="{run.commit.sha}"') == 1
    assert html.count("<tr data-alert=") == 3 * 6
    assert "Triage all" not in html
