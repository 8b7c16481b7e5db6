"""A run in the API carries its commit's alerts and the links CI prints: what a job that
only speaks HTTP needs to fail on a regression."""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Alert, Run
from tests.helpers import hold_planned_runs
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def grown():
    """Commit 1 grows "tiny" under greedy-by-size at seq=512 and seq=32, not at seq=128."""
    repository = actions.track_repository("tracked", "/nonexistent")

    def figures(grow: int) -> dict:
        return {("tiny", "greedy-by-size"): bytes_only(50_000)} | {
            ("tiny", f"none-{point}"): bytes_only(point * 1000 + (grow if point != 128 else 0))
            for point in (512, 32, 128)
        }

    base = record_run(repository, 0, figures(0))
    return record_run(repository, 1, figures(4096), parent=base.commit.sha)


def test_a_finished_run_carries_its_commits_alerts(client, grown):
    body = client.get(f"/api/runs/{grown.pk}/").json()

    assert body["open_alerts"] == {"bytes": 2, "latency": 0, "ram": 0}
    assert [(a["strategy"], a["kind"], a["state"]) for a in body["alerts"]] == [
        ("none-32", "bytes", "new"), ("none-512", "bytes", "new"),
    ]
    first = body["alerts"][0]
    alert = Alert.objects.get(strategy__name="none-32")
    assert first["id"] == alert.pk
    assert first["series"] == "tiny / none-32 / cpu / worker environment (tvm 0.27.0.post1)"
    assert (first["baseline_value"], first["value"]) == (32_000, 36_096)
    assert first["relative_change"] == pytest.approx(0.128)
    assert first["change_text"] == "31.2 KiB → 35.2 KiB (+4,096 B, +12.8%)"
    assert first["is_open"] is True
    assert first["commit_sha"] == grown.commit.sha
    # Alerts are a detail of one run: the list does not read them row by row.
    assert "alerts" not in client.get("/api/runs/").json()["results"][0]


def test_alerts_are_in_point_order_by_value(client):
    repository = actions.track_repository("tracked", "/nonexistent")
    points = (512, 32, 128)

    def at_points(grow: int):
        run = Run.objects.create(
            repository=repository, trigger="test", commit=actions.record_commit(
                repository, sha=f"{grow:02d}" + "a" * 38, branch="main",
                parent_sha="00" + "a" * 38 if grow else "",
                committed_at=f"2026-11-0{1 + bool(grow)}T00:00Z",
            ),
        )
        actions.begin_run(run, models=[("pool", "zoo:pool_reuse")], strategies=["none"],
                          boards=["cpu"], total=3)
        for point in points:
            actions.record_result(run, model="pool", strategy="none", board="cpu",
                                  report=bytes_only(point * 100 + grow, shape_point={"seq": point}))
        actions.finish_run(run)
        return run

    at_points(0)
    run = at_points(64)

    body = client.get(f"/api/runs/{run.pk}/").json()

    assert [a["shape_label"] for a in body["alerts"]] == ["seq=32", "seq=128", "seq=512"]


def test_a_triaged_alert_is_carried_but_not_open(client, grown):
    actions.triage_alert(Alert.objects.get(strategy__name="none-32"), Alert.State.INTENDED)

    body = client.get(f"/api/runs/{grown.pk}/").json()

    assert body["open_alerts"] == {"bytes": 1, "latency": 0, "ram": 0}
    assert [(a["strategy"], a["state"], a["is_open"]) for a in body["alerts"]] == [
        ("none-32", "intended", False), ("none-512", "new", True),
    ]


def test_links_are_absolute_at_the_base_url(client, grown, settings):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example/"

    body = client.get(f"/api/runs/{grown.pk}/").json()

    assert body["links"] == {
        "page": f"https://peakwatch.example/runs/{grown.pk}/",
        "api": f"https://peakwatch.example/api/runs/{grown.pk}/",
        "alerts": "https://peakwatch.example/alerts/?repository=tracked"
        f"&commit={grown.commit.sha}",
    }
    alert = Alert.objects.get(strategy__name="none-32")
    assert body["alerts"][0]["links"] == {
        "compare": "https://peakwatch.example" + alert.compare_url(),
        "plan_diff": "https://peakwatch.example" + alert.plan_diff_url(),
    }
    # The paths the API has always given stay paths.
    assert body["page_url"] == f"/runs/{grown.pk}/"


def test_links_are_paths_where_the_base_url_is_set_empty(client, grown, settings):
    settings.PEAKWATCH_BASE_URL = ""

    body = client.get(f"/api/runs/{grown.pk}/").json()

    assert body["links"]["api"] == f"/api/runs/{grown.pk}/"
    assert body["links"]["alerts"].startswith("/alerts/?repository=tracked&commit=")


def test_posting_a_run_of_a_commit_answers_with_the_alerts_already_on_it(
    client, grown, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example"
    hold_planned_runs(monkeypatch)
    token = actions.create_api_token("ci", grown.repository)[1]

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/runs", data={"repository": "tracked", "sha": grown.commit.sha, "rerun": True},
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    assert response.status_code == 202
    answer = response.json()
    rerun = Run.objects.get(pk=answer["run"])
    assert rerun != grown and rerun.commit == grown.commit
    assert answer["run_url"] == f"/api/runs/{rerun.pk}/"
    assert answer["links"]["api"] == f"https://peakwatch.example/api/runs/{rerun.pk}/"
    assert answer["links"]["page"] == f"https://peakwatch.example/runs/{rerun.pk}/"
    assert answer["open_alerts"] == {"bytes": 2, "latency": 0, "ram": 0}
    assert [a["strategy"] for a in answer["alerts"]] == ["none-32", "none-512"]


def test_a_call_for_a_commit_already_run_attaches_to_that_run_unless_asked_to_run_again(
    client, grown, monkeypatch, django_capture_on_commit_callbacks
):
    hold_planned_runs(monkeypatch)
    token = actions.create_api_token("ci", grown.repository)[1]

    def post(**more):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(
                "/api/runs", data={"repository": "tracked", "sha": grown.commit.sha, **more},
                content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}",
            )

    attached = post()
    assert attached.status_code == 200
    assert attached.json()["attached"] is True and attached.json()["run"] == grown.pk
    again = post(rerun=True)
    assert again.status_code == 202 and "attached" not in again.json()
    # The newest run of the commit, still under way, is the one the next call waits on.
    assert post().json()["run"] == again.json()["run"]
    # A run that failed is run again: retrying a CI job retries the run.
    Run.objects.filter(pk=again.json()["run"]).update(status=Run.Status.FAILED)
    retried = post()
    assert retried.status_code == 202
    assert retried.json()["run"] not in (grown.pk, again.json()["run"])
    assert post(rerun="yes").status_code == 400
