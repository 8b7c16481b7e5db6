"""Alerts: bytes grow past a threshold, latency slows down significantly; triage on a page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.detection import latency_test
from dashboard.models import Alert, Board, Model, Strategy
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def repository():
    return actions.track_repository("tracked", "/nonexistent")


def _history(repository, values, model="small-cnn", strategy="greedy-by-size"):
    runs, parent = [], ""
    for i, figures in enumerate(values):
        if not isinstance(figures, dict):
            figures = {(model, strategy): bytes_only(figures)}
        run = record_run(repository, i, figures, parent=parent)
        parent = run.commit.sha
        runs.append(run)
    return runs


def test_it_raises_an_alert_when_planned_bytes_grow(repository):
    runs = _history(repository, [50_000, 50_000, 58_192])

    alert = Alert.objects.get()
    assert alert.commit == runs[2].commit
    assert alert.baseline.commit == runs[1].commit
    assert (alert.kind, alert.baseline_value, alert.value) == ("bytes", 50_000, 58_192)
    assert alert.state == Alert.State.NEW
    assert alert.relative_change == pytest.approx(8192 / 50_000)


def test_it_does_not_alert_when_bytes_shrink_or_stay(repository):
    _history(repository, [50_000, 50_000, 40_000])

    assert not Alert.objects.exists()


def test_the_repository_threshold_lets_small_growth_through(repository):
    repository.bytes_threshold = 4096
    repository.save()

    _history(repository, [50_000, 54_096, 60_000])

    assert list(Alert.objects.values_list("value", flat=True)) == [60_000]


def test_a_series_threshold_overrides_the_repository_one(repository):
    first = record_run(repository, 0, {("small-cnn", "greedy-by-size"): bytes_only(50_000),
                                       ("small-cnn", "none"): bytes_only(80_000)})
    actions.set_series_threshold(
        Model.objects.get(name="small-cnn"), Strategy.objects.get(name="none"),
        Board.objects.get(name="cpu"), 100_000,
    )

    record_run(repository, 1, {("small-cnn", "greedy-by-size"): bytes_only(51_000),
                               ("small-cnn", "none"): bytes_only(90_000)}, parent=first.commit.sha)

    assert [a.strategy.name for a in Alert.objects.all()] == ["greedy-by-size"]


def test_a_commit_is_compared_with_its_parent_not_the_previous_run(repository):
    base = record_run(repository, 0, {("m", "s"): bytes_only(1000)})
    # A sibling branch ran later with more bytes; it is not the next commit's ancestor.
    record_run(repository, 1, {("m", "s"): bytes_only(5000)}, parent=base.commit.sha,
               branch="other")

    record_run(repository, 2, {("m", "s"): bytes_only(2000)}, parent=base.commit.sha)

    alert = Alert.objects.get(commit__committed_at__hour=2)
    assert alert.baseline_value == 1000


def test_latency_needs_significance_and_a_large_enough_effect():
    slow = [1.30, 1.31, 1.29, 1.32, 1.30, 1.33]
    base = [1.00, 1.01, 0.99, 1.02, 1.00, 1.01] * 3
    barely = [1.02, 1.03, 1.02, 1.03, 1.02, 1.03]

    assert latency_test(slow, base, min_increase=0.05, alpha=0.01)[0]
    regressed, p_value = latency_test(barely, base, min_increase=0.05, alpha=0.01)
    assert not regressed and p_value < 0.01  # significant, but under 5%
    assert not latency_test(slow[:1], base[:1], min_increase=0.05, alpha=0.01)[0]
    assert not latency_test([0.9] * 6, base, min_increase=0.05, alpha=0.01)[0]


def test_it_alerts_on_a_significant_latency_increase_over_the_window(repository):
    quick = [1.00, 1.01, 0.99, 1.02, 1.00, 1.01]
    slow = [1.30, 1.31, 1.29, 1.32, 1.30, 1.33]
    values = [{("m", "s"): bytes_only(1000, 1.0, quick)} for _ in range(3)]
    values.append({("m", "s"): bytes_only(1000, 1.3, slow)})

    _history(repository, values)

    alert = Alert.objects.get()
    assert alert.kind == Alert.Kind.LATENCY
    assert alert.p_value < 0.01
    assert alert.value == pytest.approx(1.305)


def test_one_noisy_commit_in_the_window_does_not_hide_a_slowdown(repository):
    quick = [1.00, 1.01, 0.99, 1.02, 1.00, 1.01]
    # One run on a busy machine: three times slower, then back to normal.
    noisy = [3.00, 3.10, 2.90, 3.05, 3.00, 2.95]
    slow = [2.55, 2.56, 2.54, 2.57, 2.55, 2.53]
    latencies = [(1.0, quick), (3.0, noisy), (1.0, quick), (2.55, slow)]
    values = [{("m", "s"): bytes_only(1000, median, samples)} for median, samples in latencies]

    runs = _history(repository, values)

    # The noisy commit alerts on its own; what matters is the slow commit after it.
    alert = Alert.objects.get(commit=runs[-1].commit)
    assert alert.kind == Alert.Kind.LATENCY and alert.p_value < 0.01
    assert alert.baseline_value == pytest.approx(1.005)


def test_detection_runs_again_when_a_late_merge_base_arrives(repository):
    pull_request = actions.record_pull_request(
        repository, number=3, head_sha="01" + "c" * 38, base_sha="00" + "c" * 38
    )
    # The head finishes first: nothing to compare with yet.
    record_run(repository, 1, {("m", "s"): bytes_only(2000)}, parent="00" + "c" * 38,
               pull_request=pull_request, branch="feature")
    assert not Alert.objects.exists()

    record_run(repository, 0, {("m", "s"): bytes_only(1000)})

    alert = Alert.objects.get()
    assert (alert.baseline_value, alert.value) == (1000, 2000)
    assert alert.run.pull_request == pull_request


def test_alerts_are_grouped_per_commit_on_the_alerts_page(client, repository):
    runs = _history(repository, [
        {("a", "s"): bytes_only(1000), ("b", "s"): bytes_only(1000)},
        {("a", "s"): bytes_only(2000), ("b", "s"): bytes_only(3000)},
    ])

    response = client.get(reverse("alerts"), {"repository": "tracked"})

    html = response.content.decode()
    assert html.count("data-alert-commit=") == 1
    assert html.count('data-alert="') == 2
    assert f'href="/repos/tracked/compare/{runs[0].commit.sha}...{runs[1].commit.sha}/"' in html


def test_an_alert_is_triaged_with_a_csrf_protected_post(repository, maintainer):
    from django.test import Client

    _history(repository, [1000, 2000])
    alert = Alert.objects.get()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(maintainer)
    url = reverse("alert-triage", args=[alert.pk])

    refused = browser.post(url, {"state": "acknowledged"})
    page = browser.get(reverse("alerts"))
    token = page.cookies["csrftoken"].value
    accepted = browser.post(url, {"state": "acknowledged", "csrfmiddlewaretoken": token,
                                  "next": "/alerts/?state=acknowledged"})

    assert refused.status_code == 403
    assert accepted.status_code == 302 and accepted["Location"] == "/alerts/?state=acknowledged"
    alert.refresh_from_db()
    assert alert.state == Alert.State.ACKNOWLEDGED


def test_an_unknown_triage_state_is_refused(maintainer_client, repository):
    _history(repository, [1000, 2000])
    alert = Alert.objects.get()

    response = maintainer_client.post(reverse("alert-triage", args=[alert.pk]), {"state": "gone"})

    assert response.status_code == 400
    alert.refresh_from_db()
    assert alert.state == Alert.State.NEW
