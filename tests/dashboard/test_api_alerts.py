"""``/api/alerts/``: the alerts, read-only, filtered and paginated like the other lists."""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Alert
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts():
    """Two repositories; in "tracked", commit 1 grows two series' planned bytes and commit 2
    slows one down (by latency samples), each alerted once."""
    repository = actions.track_repository("tracked", "/nonexistent")
    steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]
    base = record_run(repository, 0, {
        ("small-cnn", "greedy-by-size"): bytes_only(50_000, samples=steady),
        ("small-cnn", "none"): bytes_only(80_000, samples=steady),
    })
    grown = record_run(repository, 1, {
        ("small-cnn", "greedy-by-size"): bytes_only(58_192, samples=steady),
        ("small-cnn", "none"): bytes_only(90_000, samples=steady),
    }, parent=base.commit.sha)
    record_run(repository, 2, {
        ("small-cnn", "greedy-by-size"): bytes_only(58_192, samples=[3 * s for s in steady]),
        ("small-cnn", "none"): bytes_only(90_000, samples=steady),
    }, parent=grown.commit.sha)
    other = actions.track_repository("other", "/nonexistent")
    first = record_run(other, 0, {("mlp", "none"): bytes_only(1000)}, sha="0a" + "e" * 38)
    record_run(other, 1, {("mlp", "none"): bytes_only(2000)}, parent=first.commit.sha,
               sha="1a" + "e" * 38)
    return Alert.objects.order_by("id")


def test_it_lists_every_alert_newest_first_with_what_it_compares(client, alerts):
    body = client.get("/api/alerts/").json()

    assert body["count"] == alerts.count() == 4
    assert [a["id"] for a in body["results"]] == [
        a.pk for a in alerts.order_by("-created_at", "-id")
    ]
    grown = alerts.get(repository__name="tracked", strategy__name="none")
    [shown] = [a for a in body["results"] if a["id"] == grown.pk]
    assert shown["repository"] == "tracked"
    assert shown["commit_sha"] == grown.commit.sha
    assert (shown["model"], shown["strategy"], shown["board"]) == ("small-cnn", "none", "cpu")
    assert (shown["kind"], shown["state"], shown["is_open"]) == ("bytes", "new", True)
    assert (shown["baseline_value"], shown["value"], shown["change"]) == (80_000, 90_000, 10_000)
    assert shown["relative_change"] == pytest.approx(0.125)
    assert (shown["result"], shown["baseline"], shown["run"]) == (
        grown.result_id, grown.baseline_id, grown.run_id
    )
    assert shown["baseline_commit_sha"] == grown.baseline.commit.sha
    assert shown["toolchain"]["spec"] == ""
    assert shown["compare_url"] == grown.compare_url()
    assert shown["plan_diff_url"] == f"/results/{grown.baseline_id}/diff/{grown.result_id}/"


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"repository": "tracked"}, 3),
        ({"repository": "other"}, 1),
        ({"repository": "elsewhere"}, 0),
        ({"kind": "latency"}, 1),
        ({"kind": "bytes", "repository": "tracked"}, 2),
        ({"commit": "01cc"}, 2),
        ({"commit": "1a" + "e" * 38}, 1),
        ({"state": "new"}, 4),
        ({"state": "intended"}, 1),
    ],
)
def test_it_filters_alerts(client, alerts, filters, expected):
    actions.triage_alert(alerts.get(repository__name="other"), Alert.State.INTENDED)
    if filters.get("state") == "new":
        expected -= 1

    body = client.get("/api/alerts/", filters).json()

    assert body["count"] == expected
    for alert in body["results"]:
        for key in ("repository", "kind", "state"):
            if key in filters:
                assert alert[key] == filters[key]


def test_it_pages_alerts_like_the_other_lists(client, alerts):
    first = client.get("/api/alerts/", {"limit": 3}).json()
    rest = client.get(first["next"]).json()

    assert first["count"] == 4 and len(first["results"]) == 3
    assert len(rest["results"]) == 1 and rest["next"] is None


@pytest.mark.parametrize("filters", [{"state": "closed"}, {"kind": "flash"}, {"limit": "0"}])
def test_it_refuses_an_unknown_state_or_kind(client, alerts, filters):
    assert client.get("/api/alerts/", filters).status_code == 400


def test_it_shows_one_alert_and_answers_404_for_none(client, alerts):
    alert = alerts.first()

    assert client.get(f"/api/alerts/{alert.pk}/").json()["id"] == alert.pk
    assert client.get("/api/alerts/987654/").status_code == 404


def test_it_lists_alerts_in_a_bounded_number_of_queries(
    client, alerts, django_assert_max_num_queries
):
    # The count and the page, however many alerts and toolchains there are.
    with django_assert_max_num_queries(2):
        response = client.get("/api/alerts/")
    assert response.status_code == 200 and response.json()["count"] == 4


def test_it_is_read_only(client, alerts):
    assert client.post("/api/alerts/", {}, content_type="application/json").status_code == 405
    alert = alerts.first()
    assert client.patch(
        f"/api/alerts/{alert.pk}/", {"state": "fixed"}, content_type="application/json"
    ).status_code == 405
