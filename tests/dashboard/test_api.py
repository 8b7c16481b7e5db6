"""The read-only JSON API under /api/ and its OpenAPI schema."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import Model, Result, Run
from tests.conftest import fake_report, report_of

STRATEGIES = ["greedy-by-size", "none", "tvm-stock"]


@pytest.fixture
def small_cnn(recorded_history):
    return Model.objects.get(repository__name="demo", name="small-cnn")


def test_it_lists_repositories_without_their_secrets(client, recorded_history):
    body = client.get("/api/repositories/").json()

    assert body["count"] == 1
    [repository] = body["results"]
    assert repository["name"] == "demo"
    assert repository["model_count"] == 2
    assert "webhook_secret" not in repository
    assert "clone_url" not in repository


def test_it_lists_models_with_their_pages(client, recorded_history):
    body = client.get("/api/models/", {"repository": "demo"}).json()

    assert [(m["name"], m["page_url"]) for m in body["results"]] == [
        ("residual-cnn", "/repos/demo/models/residual-cnn/"),
        ("small-cnn", "/repos/demo/models/small-cnn/"),
    ]


def test_it_lists_runs_newest_first_with_progress(client, recorded_history):
    body = client.get("/api/runs/").json()

    assert [run["id"] for run in body["results"]] == [run.pk for run in reversed(recorded_history)]
    newest = body["results"][0]
    assert newest["status"] == "succeeded"
    assert newest["progress"] == {"done": 6, "total": 6, "percent": 100}
    assert newest["commit"]["title"] == "Commit number 3"
    assert "log" not in newest


def test_it_includes_the_log_in_one_run(client, recorded_history):
    run = recorded_history[0]
    actions.append_log(run, "planning small-cnn")

    body = client.get(f"/api/runs/{run.pk}/").json()

    assert "planning small-cnn" in body["log"]


def test_it_lists_every_result_unfiltered(client, recorded_history):
    assert client.get("/api/results/").json()["count"] == 4 * 2 * 3


@pytest.mark.parametrize(
    "filters, count",
    [
        ({"model": "small-cnn"}, 4 * 3),
        ({"strategy": "none"}, 4 * 2),
        ({"board": "cpu"}, 4 * 2 * 3),
        ({"board": "cuda"}, 0),
        ({"commit": "02aaaa"}, 2 * 3),
        ({"model": "small-cnn", "strategy": "tvm-stock", "commit": "03"}, 1),
        ({"repository": "elsewhere"}, 0),
        ({"status": "failed"}, 0),
    ],
)
def test_it_filters_results(client, recorded_history, filters, count):
    body = client.get("/api/results/", filters).json()

    assert body["count"] == count
    for result in body["results"]:
        for key in ("model", "strategy", "board"):
            if key in filters:
                assert result[key] == filters[key]
        if "commit" in filters:
            assert result["commit_sha"].startswith(filters["commit"])


def test_it_filters_results_by_model_id_and_by_run(client, recorded_history, small_cnn):
    run = recorded_history[1]

    body = client.get("/api/results/", {"model": small_cnn.pk, "run": run.pk}).json()

    assert body["count"] == 3
    assert {r["run"] for r in body["results"]} == {run.pk}
    assert {r["strategy"] for r in body["results"]} == set(STRATEGIES)


def test_it_rejects_a_run_filter_that_is_not_an_id(client, recorded_history):
    assert client.get("/api/results/", {"run": "latest"}).status_code == 400


def test_it_shows_a_results_measurements_and_artifacts(client, recorded_history, tmp_path):
    result = Result.objects.filter(run=recorded_history[0]).first()
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    artifact = actions.attach_artifact(result, "plan.json", plan)

    body = client.get(f"/api/results/{result.pk}/").json()

    assert body["planned_bytes"] == result.planned_bytes
    assert body["latency_median_ms"] == pytest.approx(result.latency_median_ms)
    assert body["outputs_match"] is True
    assert body["artifacts"] == [
        {
            "id": artifact.pk,
            "name": "plan.json",
            "size": 2,
            "content_type": "application/json",
            "download_url": artifact.get_absolute_url(),
        }
    ]


def test_a_result_says_its_toolchain_kernel_workspace_and_where_its_figures_come_from(
    client, recorded_history
):
    original = actions.record_result(
        recorded_history[0], model="small-cnn", strategy="hill-climb", board="cpu",
        toolchain="apache-tvm==0.21.0",
        report=fake_report(40_000, 1.0, kernel_workspace_bytes=4096,
                           kernel_workspace_source="measured",
                           environment={"tvm_git_hash": "abc123"}),
    )
    copy = actions.reuse_result(
        recorded_history[1], model="small-cnn", strategy="hill-climb", board="cpu",
        source=original,
    )

    first = client.get(f"/api/results/{original.pk}/").json()
    reused = client.get(f"/api/results/{copy.pk}/").json()
    plain = client.get(
        "/api/results/", {"run": recorded_history[0].pk, "strategy": "none"}
    ).json()["results"]

    assert first["toolchain"] == {
        "id": original.toolchain_id, "spec": "apache-tvm==0.21.0", "label": "apache-tvm==0.21.0",
        "tvm_version": "0.27.0.post1", "tvm_git_hash": "abc123",
    }
    assert (first["kernel_workspace_bytes"], first["kernel_workspace_source"]) == (
        4096, "measured"
    )
    assert first["reused_from"] is None
    assert reused["reused_from"] == original.pk
    assert reused["toolchain"]["spec"] == "apache-tvm==0.21.0"
    # The worker's own environment; no workspace recorded by the fake report.
    assert plain[0]["toolchain"]["spec"] == ""
    assert plain[0]["kernel_workspace_source"] == "estimate"


def test_a_run_says_how_many_of_its_results_failed(client, recorded_history):
    run = recorded_history[-1]
    Run.objects.filter(pk=run.pk).update(status="partial", failed_results=2)

    body = client.get(f"/api/runs/{run.pk}/").json()
    listed = client.get("/api/runs/", {"status": "partial"}).json()

    assert (body["status"], body["failed_results"]) == ("partial", 2)
    assert body["status_text"] == "partial: 2 of 6 failed"
    assert [r["id"] for r in listed["results"]] == [run.pk]


def test_it_lists_results_in_a_bounded_number_of_queries(
    client, recorded_history, django_assert_max_num_queries
):
    # Count, page, and the artifacts' prefetch: however many results there are.
    with django_assert_max_num_queries(3):
        client.get("/api/results/")


def test_it_serves_a_models_trend_one_series_per_strategy(client, small_cnn, recorded_history):
    body = client.get(f"/api/models/{small_cnn.pk}/trend/").json()

    assert body["model"]["name"] == "small-cnn"
    assert [series["strategy"] for series in body["series"]] == STRATEGIES
    assert body["point_fields"] == [
        "commit", "planned_bytes", "intermediate_bytes", "lower_bound_bytes",
        "latency_median_ms", "measured_peak_bytes", "board_ram_bytes",
    ]
    # Every commit drawn is listed once, oldest first, with what a tooltip and a click need.
    commits = body["commits"]
    assert [c["title"] for c in commits] == [f"Commit number {i}" for i in range(4)]
    first = commits[0]
    assert set(first) == {"sha", "short", "title", "author", "committed_at", "run_url"}
    assert first["sha"] == recorded_history[0].commit.sha
    assert first["short"] == recorded_history[0].commit.short_sha
    assert first["author"] == "Ada Planner"
    assert first["run_url"] == recorded_history[0].get_absolute_url()
    none = next(series for series in body["series"] if series["strategy"] == "none")
    # Oldest commit first; each commit adds 4096 bytes in the recorded history.
    assert [p[0] for p in none["points"]] == [0, 1, 2, 3]
    assert [p[1] for p in none["points"]] == [int(50_000 * 1.6) + 4096 * i for i in range(4)]
    # Each point is the commit's index and the six measurements, nothing repeated.
    assert all(len(p) == 7 for s in body["series"] for p in s["points"])
    result = Result.objects.get(
        run=recorded_history[0], model=small_cnn, strategy__name="none"
    )
    assert none["points"][0][1:] == [
        result.planned_bytes, result.intermediate_bytes, result.lower_bound_bytes,
        pytest.approx(1.0), result.measured_peak_bytes, None,
    ]


def test_it_counts_a_rerun_commit_once_with_its_newest_result(client, small_cnn, recorded_history):
    # Given the newest commit run a second time, with a better plan
    commit = recorded_history[-1].commit
    rerun = Run.objects.create(repository=commit.repository, commit=commit)
    actions.record_result(
        rerun, model="small-cnn", strategy="none", board="cpu", report=report_of(planned_bytes=1234)
    )

    body = client.get(f"/api/models/{small_cnn.pk}/trend/").json()

    none = next(series for series in body["series"] if series["strategy"] == "none")
    assert len(none["points"]) == 4
    assert none["points"][-1][1] == 1234
    # The commit's newest run is the one a click opens; the other series say theirs.
    assert body["commits"][-1]["run_url"] == rerun.get_absolute_url()
    assert none["points"][-1][7:] == []
    other = next(series for series in body["series"] if series["strategy"] != "none")
    assert other["points"][-1][7] == recorded_history[-1].get_absolute_url()


def test_a_worker_s_results_reach_the_trend_once_it_has_recorded_the_model(
    client, small_cnn, recorded_history
):
    commit = recorded_history[-1].commit
    rerun = Run.objects.create(repository=commit.repository, commit=commit)
    trend = f"/api/models/{small_cnn.pk}/trend/"

    def newest(body, strategy):
        series = next(s for s in body["series"] if s["strategy"] == strategy)
        return series["points"][-1][1]

    snapshots = []
    original = actions.series.materialise_trend
    actions.series.materialise_trend = lambda model_id: (
        snapshots.append(model_id), original(model_id))
    try:
        with actions.snapshots_deferred():
            for planned, strategy in ((1234, "none"), (2345, "greedy-by-size")):
                actions.record_result(rerun, model="small-cnn", strategy=strategy, board="cpu",
                                      report=report_of(planned_bytes=planned))
            # Stored, but the snapshot the trend is served from waits for the model's end.
            assert snapshots == []
            assert newest(client.get(trend).json(), "none") != 1234
    finally:
        actions.series.materialise_trend = original

    body = client.get(trend).json()
    assert snapshots == [small_cnn.pk]  # once for the model, not once a Result
    assert (newest(body, "none"), newest(body, "greedy-by-size")) == (1234, 2345)


def test_it_leaves_failed_results_out_of_the_trend(client, small_cnn, recorded_history):
    actions.record_result(
        recorded_history[0], model="small-cnn", strategy="hill-climb", board="cpu",
        report=report_of(error="gave up"),
    )

    body = client.get(f"/api/models/{small_cnn.pk}/trend/").json()

    assert [series["strategy"] for series in body["series"]] == STRATEGIES


def test_it_serves_the_trend_in_a_bounded_number_of_queries(
    client, small_cnn, django_assert_max_num_queries
):
    # The model, its alerts with their commits, its trend snapshot (stored when its
    # results were recorded).
    with django_assert_max_num_queries(3):
        response = client.get(f"/api/models/{small_cnn.pk}/trend/")
    assert response.status_code == 200


def test_it_answers_404_for_the_trend_of_an_unknown_model(client, recorded_history):
    assert client.get("/api/models/987654/trend/").status_code == 404


def test_it_publishes_an_openapi_schema_listing_the_endpoints(client):
    response = client.get(reverse("api-schema"), {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Peakwatch API"
    for path in (
        "/api/repositories/", "/api/models/", "/api/models/{id}/trend/", "/api/runs/",
        "/api/runs/{id}/", "/api/results/", "/api/alerts/", "/api/alerts/{id}/",
        "/api/run-requests/{id}/",
    ):
        assert path in schema["paths"]
    parameters = {p["name"] for p in schema["paths"]["/api/results/"]["get"]["parameters"]}
    assert {"model", "strategy", "board", "commit", "run"} <= parameters


def test_it_is_read_only(client, recorded_history):
    assert client.post("/api/runs/", {}, content_type="application/json").status_code == 405
