"""The dashboard people open: overview with alerts and sparklines, trend filters and
downsampling, run deltas, the plan view, artifact zips, and bounded queries per page."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import actions, trends
from dashboard.models import Alert, Commit, Fragment, Model, Result, Run
from dashboard.sparklines import sparkline
from dashboard.trends import downsample, model_trend
from tests.conftest import fake_report, report_of

PLAN = {
    "arena_bytes": 1000,
    "peak": {
        "time": 2,
        "bytes": 800,
        "tensors": [
            {"id": "conv_out", "size": 500, "producer": "fused_conv2d", "offset": 0},
            {"id": "relu_out", "size": 300, "producer": "relu", "offset": 500},
        ],
        "more": 0,
    },
    "tensors": [
        {"id": "conv_out", "shape": [1, 8], "dtype": "float32", "size": 500, "lower": 0,
         "upper": 4, "offset": 0, "producer": "fused_conv2d"},
        {"id": "relu_out", "shape": [1, 8], "dtype": "float32", "size": 300, "lower": 2,
         "upper": 3, "offset": 500, "producer": "relu"},
        {"id": "add_out", "shape": [1, 8], "dtype": "float32", "size": 1000, "lower": 4,
         "upper": 5, "offset": 0, "producer": "add"},
    ],
}


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def small_cnn(recorded_history):
    return Model.objects.get(repository__name="demo", name="small-cnn")


def attach(result: Result, tmp_path, name: str, content: bytes):
    path = tmp_path / f"{result.pk}-{name}"
    path.write_bytes(content)
    return actions.attach_artifact(result, name, path)


def result_of(run: Run, model="small-cnn", strategy="none") -> Result:
    return Result.objects.get(run=run, model__name=model, strategy__name=strategy)


def add_commits(recorded_history, count: int, *, start_index: int = 4) -> list[Run]:
    """More history after the recorded one: the same two models and three strategies."""
    repository = recorded_history[0].repository
    parent = recorded_history[-1].commit.sha
    start = recorded_history[-1].commit.committed_at
    runs = []
    for i in range(start_index, start_index + count):
        commit = actions.record_commit(
            repository, sha=f"{i:04d}" + "b" * 36, parent_sha=parent, branch="main",
            author="Bo Bytes", message=f"Later commit {i}",
            committed_at=start + timedelta(hours=i),
        )
        parent = commit.sha
        run = Run.objects.create(repository=repository, commit=commit, trigger="test")
        actions.begin_run(
            run, models=[("small-cnn", "zoo:small_cnn"), ("residual-cnn", "zoo:residual_cnn")],
            strategies=["tvm-stock", "none", "greedy-by-size"], boards=["cpu"], total=6,
        )
        for model in ("small-cnn", "residual-cnn"):
            for strategy in ("tvm-stock", "none", "greedy-by-size"):
                actions.record_result(
                    run, model=model, strategy=strategy, board="cpu",
                    report=fake_report(100_000 + 4096 * i, 1.0, measured_peak_bytes=120_000),
                )
        actions.finish_run(run)
        runs.append(run)
    return runs


# --- overview --------------------------------------------------------------------------------


def test_it_lists_open_alerts_before_the_models(client, recorded_history):
    # The recorded history grows every series at every commit: detection raised alerts.
    assert Alert.objects.open().exists()

    html = client.get(reverse("home")).content.decode()

    assert "data-open-alerts" in html
    assert html.index("data-open-alerts") < html.index('<table class="latest">')


def test_it_leaves_triaged_alerts_off_the_overview(client, recorded_history):
    Alert.objects.update(state=Alert.State.FIXED)

    assert "data-open-alerts" not in client.get(reverse("home")).content.decode()


def test_the_overviews_stored_parts_follow_the_data_they_show(client, recorded_history):
    assert "data-open-alerts" in client.get(reverse("home")).content.decode()
    assert Fragment.objects.filter(key__startswith="overview:").count() == 2

    # Triaged in bulk (no updated_at moves) and a series' figures changed, with the cache
    # cleared: neither stored part may be served as it was.
    Alert.objects.update(state=Alert.State.FIXED)
    Result.objects.filter(model__name="small-cnn", strategy__name="none").update(
        measured_peak_bytes=654_321
    )
    actions.summarise_all_series()
    cache.clear()
    html = client.get(reverse("home")).content.decode()

    assert "data-open-alerts" not in html
    assert 'measured <span class="bytes" title="654,321 bytes">' in html


def test_it_shows_measured_peak_and_a_sparkline_per_series(client, recorded_history):
    run = recorded_history[-1]
    Result.objects.filter(run=run, model__name="small-cnn", strategy__name="none").update(
        measured_peak_bytes=123_456
    )
    # Changed behind the actions' back: summarised again as after a bulk load.
    actions.summarise_all_series()

    html = client.get(reverse("home")).content.decode()

    assert 'measured <span class="bytes" title="123,456 bytes">' in html
    # Two models x three strategies, each over the four recorded commits.
    assert html.count('data-points="4"') == 6


def test_it_draws_a_sparkline_scaled_to_its_own_range():
    line = sparkline([100, None, 200, 150], width=100, height=20, pad=0)

    assert line.points == "0.0,20.0 66.7,0.0 100.0,10.0"
    assert (line.low, line.high, line.count) == (100, 200, 3)
    assert sparkline([None, None]) is None
    assert sparkline([5, 5]).flat


# --- latest per series --------------------------------------------------------------------


def test_latest_per_series_picks_the_newest_commit_not_the_newest_row(recorded_history):
    # Given the oldest commit run again after all others: a newer row of an older commit
    rerun = Run.objects.create(
        repository=recorded_history[0].repository, commit=recorded_history[0].commit
    )
    actions.record_result(
        rerun, model="small-cnn", strategy="none", board="cpu", report=fake_report(1, 1.0)
    )
    # And a failed result at the newest commit, which never counts
    actions.record_result(
        recorded_history[-1], model="small-cnn", strategy="hill-climb", board="cpu",
        report=report_of(error="gave up"),
    )

    latest = Result.objects.latest_per_series()

    assert latest.count() == 2 * 3
    assert {r.commit_id for r in latest} == {recorded_history[-1].commit_id}
    newest_of_model = Result.objects.for_model(
        Model.objects.get(name="small-cnn")
    ).latest_per_series()
    assert newest_of_model.count() == 3


def test_latest_per_series_prefers_the_newest_run_of_the_same_commit(recorded_history):
    newest = recorded_history[-1]
    rerun = Run.objects.create(repository=newest.repository, commit=newest.commit)
    again = actions.record_result(
        rerun, model="small-cnn", strategy="none", board="cpu", report=fake_report(7, 1.0)
    )

    latest = Result.objects.on_branch("main").latest_per_series()

    assert again in latest
    assert result_of(newest) not in latest


# --- trend ---------------------------------------------------------------------------------


def test_it_keeps_a_short_series_whole():
    points = [{"position": i, "planned_bytes": i} for i in range(1, 11)]

    assert downsample(points, limit=10) is points


def test_it_downsamples_a_long_series_keeping_steps_and_spikes():
    points = [{"position": i, "planned_bytes": 1000} for i in range(1, 10_001)]
    points[4321]["planned_bytes"] = 99_999  # a one-commit spike
    points[7000]["planned_bytes"] = 1  # a one-commit dip

    kept = downsample(points, limit=500)

    assert len(kept) <= 500
    assert kept[0] is points[0] and kept[-1] is points[-1]
    assert points[4321] in kept and points[7000] in kept
    assert [p["position"] for p in kept] == sorted(p["position"] for p in kept)


def test_the_trend_keeps_every_change_and_at_most_max_points(
    small_cnn, recorded_history, monkeypatch
):
    # Given far more commits than a chart draws, planned bytes changing at each
    monkeypatch.setattr(trends, "MAX_POINTS", 10)
    later = add_commits(recorded_history, 40)

    trend = model_trend(small_cnn)

    none = next(s for s in trend["series"] if s["strategy"] == "none")
    assert none["commits"] == 44
    assert none["downsampled"] is True
    assert len(none["points"]) <= 10
    assert trend["commits"][none["points"][-1][0]]["sha"] == later[-1].commit.sha
    # Only the commits some series draws are listed.
    drawn = {p[0] for s in trend["series"] for p in s["points"]}
    assert drawn == set(range(len(trend["commits"])))


def test_the_trend_keeps_points_where_bytes_changed_in_a_flat_history(
    small_cnn, recorded_history, monkeypatch
):
    runs = add_commits(recorded_history, 30)
    # Flatten the later history, then make one commit in the middle a step.
    Result.objects.filter(run__in=runs).update(planned_bytes=100_000)
    step = runs[17]
    Result.objects.filter(run__in=runs[17:]).update(planned_bytes=110_000)
    monkeypatch.setattr(trends, "MAX_POINTS", 10)
    # Rows changed behind the actions' back: summarised again as after a bulk load.
    actions.summarise_all_series()

    trend = model_trend(small_cnn)

    none = next(s for s in trend["series"] if s["strategy"] == "none")
    shas = [trend["commits"][p[0]]["sha"] for p in none["points"]]
    assert step.commit.sha in shas
    before, at = none["points"][shas.index(step.commit.sha) - 1 : shas.index(step.commit.sha) + 1]
    assert (before[1], at[1]) == (100_000, 110_000)


def test_the_trend_lists_alerts_and_keeps_their_commits(client, small_cnn, recorded_history):
    body = client.get(f"/api/models/{small_cnn.pk}/trend/").json()

    alerted = {a["commit_sha"] for a in body["alerts"]}
    assert alerted == {run.commit.sha for run in recorded_history[1:]}
    assert {a["kind"] for a in body["alerts"]} == {"bytes"}
    assert all(a["run_url"].startswith("/runs/") for a in body["alerts"])


def test_the_trend_filters_by_branch_in_a_shareable_url(client, small_cnn, recorded_history):
    # Given one more commit on a feature branch
    repository = recorded_history[0].repository
    commit = actions.record_commit(
        repository, sha="f" * 40, parent_sha=recorded_history[-1].commit.sha,
        branch="feature", author="Cy", message="Feature work",
        committed_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    run = Run.objects.create(repository=repository, commit=commit)
    actions.record_result(
        run, model="small-cnn", strategy="none", board="cpu", report=fake_report(5, 1.0)
    )

    feature = client.get(small_cnn.get_absolute_url(), {"branch": "feature"})
    main = client.get(small_cnn.get_absolute_url(), {"branch": "main"})

    assert [len(s["points"]) for s in embedded_trend(feature)["series"]] == [1]
    assert all(len(s["points"]) == 4 for s in embedded_trend(main)["series"])
    html = feature.content.decode()
    assert '<option value="feature" selected>' in html
    assert "/trend/?branch=feature" in html


def embedded_trend(response) -> dict:
    html = response.content.decode()
    return json.loads(html.split('<script id="trend-data" type="application/json">')[1]
                      .split("</script>")[0])


def test_the_trend_page_embeds_the_bytes_the_api_serves(client, small_cnn, recorded_history):
    api = client.get(f"/api/models/{small_cnn.pk}/trend/")
    page = client.get(small_cnn.get_absolute_url())

    assert api["Content-Type"] == "application/json"
    assert api.content.decode() in page.content.decode()
    assert embedded_trend(page) == api.json()


def test_a_filtered_trend_is_cached_as_serialised_bytes(
    client, small_cnn, recorded_history, monkeypatch
):
    cache.clear()
    stored = {}
    set_ = trends.cache.set

    def remember(key, value, *args):
        stored[key] = value
        return set_(key, value, *args)

    monkeypatch.setattr(trends.cache, "set", remember)
    board = Result.objects.filter(model=small_cnn).values_list("board__name", flat=True)[0]
    url = f"/api/models/{small_cnn.pk}/trend/?board={board}"
    first = client.get(url)

    ((key, entry),) = stored.items()
    assert key.startswith("peakwatch:trend:")
    assert isinstance(entry["json"], bytes)
    assert entry["json"] == first.content
    # Served again from the cache, byte for byte.
    assert client.get(url).content == first.content
    assert len(stored) == 1
    # Unfiltered, the stored snapshot is the payload: nothing to cache, and the same series.
    unfiltered = client.get(f"/api/models/{small_cnn.pk}/trend/")
    assert len(stored) == 1
    assert unfiltered.json()["series"] == first.json()["series"]


def test_the_trend_json_is_safe_inside_a_script_tag(client, small_cnn, recorded_history):
    commit = recorded_history[-1].commit
    commit.message = "Fix </script><script>alert(1)</script> & more"
    commit.save()
    # Commits are recorded before their results: the trend is stored with the message.
    actions.materialise_trend(small_cnn.pk)
    cache.clear()

    page = client.get(small_cnn.get_absolute_url())

    html = page.content.decode()
    assert "</script><script>alert(1)" not in html
    assert embedded_trend(page)["commits"][-1]["title"] == commit.message


def test_the_trend_page_lists_only_the_newest_history_rows(
    client, small_cnn, recorded_history, monkeypatch
):
    monkeypatch.setattr(trends, "HISTORY_ROWS", 5)
    later = add_commits(recorded_history, 10)

    response = client.get(small_cnn.get_absolute_url())

    rows = response.context["history"]["rows"]
    assert [row["commit"]["sha"] for row in rows] == [
        run.commit.sha for run in reversed(later[-5:])
    ]
    assert response.context["history"]["more"] is True
    # The charts still get every commit.
    assert len(embedded_trend(response)["commits"]) == 14


def test_the_trend_cache_follows_new_results(client, small_cnn, recorded_history):
    first = model_trend(small_cnn)
    add_commits(recorded_history, 1)

    second = model_trend(small_cnn)

    assert len(second["series"][0]["points"]) == len(first["series"][0]["points"]) + 1


def test_the_trend_cache_follows_alert_changes(client, small_cnn, recorded_history):
    first = model_trend(small_cnn)
    alert = Alert.objects.filter(model=small_cnn).order_by("id").first()
    alert.state = Alert.State.ACKNOWLEDGED
    alert.save()

    second = model_trend(small_cnn)

    states = {a["id"]: a["state"] for a in second["alerts"]}
    assert states[alert.pk] == alert.state
    assert first != second


# --- run page ------------------------------------------------------------------------------


def test_it_shows_each_results_change_against_the_parent_commit(client, recorded_history):
    html = client.get(recorded_history[-1].get_absolute_url()).content.decode()

    # Every series grew by 4096 bytes since the parent commit.
    assert html.count('data-delta="planned"><span class="change worse" title="+4,096 bytes">') == 6
    first = client.get(recorded_history[0].get_absolute_url()).content.decode()
    assert 'data-delta="planned"><span class="muted">' in first


def test_the_run_page_says_what_a_results_figures_assume(client, recorded_history):
    run = add_commits(recorded_history, 1)[0]
    said = "mixture of experts in fixed shapes: 2 blocks (of MixtralSparseMoeBlock)"
    actions.record_result(
        run, model="small-cnn", strategy="best-fit", board="cpu",
        report=fake_report(90_000, 1.0, assumptions=[said]),
    )

    html = client.get(run.get_absolute_url()).content.decode()

    assert html.count("data-assumption>") == 1
    assert f"<li class=\"muted\" data-assumption>Assumes: {said}.</li>" in html


def test_it_lists_artifact_sizes_and_a_zip_of_them(client, recorded_history, tmp_path):
    result = result_of(recorded_history[-1])
    attach(result, tmp_path, "plan.json", json.dumps(PLAN).encode())
    attach(result, tmp_path, "model.so", b"\x7fELF" + b"\0" * 4000)

    html = client.get(recorded_history[-1].get_absolute_url()).content.decode()

    assert 'data-artifact-size="4004">3.9 KiB</span>' in html
    assert f'href="{reverse("result-artifacts-zip", args=[result.pk])}"' in html
    assert f'href="{reverse("result-plan", args=[result.pk])}"' in html


def test_it_streams_every_artifact_in_one_zip(client, recorded_history, tmp_path):
    result = result_of(recorded_history[-1])
    plan = json.dumps(PLAN).encode()
    library = bytes(range(256)) * 300
    attach(result, tmp_path, "plan.json", plan)
    attach(result, tmp_path, "model.so", library)

    response = client.get(reverse("result-artifacts-zip", args=[result.pk]))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="small-cnn-none-cpu-')
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert sorted(archive.namelist()) == ["model.so", "plan.json"]
    assert archive.read("plan.json") == plan
    assert archive.read("model.so") == library


def test_it_answers_404_for_a_zip_of_no_artifacts(client, recorded_history):
    result = result_of(recorded_history[-1])

    assert client.get(reverse("result-artifacts-zip", args=[result.pk])).status_code == 404


# --- plan view -----------------------------------------------------------------------------


def test_the_plan_view_lists_the_peak_tensors_and_links_the_parent_diff(
    client, recorded_history, tmp_path
):
    parent = result_of(recorded_history[-2])
    result = result_of(recorded_history[-1])
    attach(result, tmp_path, "plan.json", json.dumps(PLAN).encode())

    response = client.get(reverse("result-plan", args=[result.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-peak-tensor="conv_out"' in html and 'data-peak-tensor="relu_out"' in html
    assert "<code>fused_conv2d</code>" in html
    assert f'href="{reverse("plan-diff", args=[parent.pk, result.pk])}" data-parent-diff' in html
    assert '<script id="timeline-data" type="application/json">' in html
    assert "peakwatch/plan.js" in html


def test_the_plan_view_says_when_there_is_no_plan(client, recorded_history):
    result = result_of(recorded_history[0])

    response = client.get(reverse("result-plan", args=[result.pk]))

    assert response.status_code == 200
    assert "has no <code>plan.json</code> artifact" in response.content.decode()


# --- bounded queries -----------------------------------------------------------------------


def queries(client, url) -> int:
    """Queries of a request with the cache cleared, once the parts a page stores as
    rendered (the overview's) are there for the data as it is."""
    client.get(url)
    cache.clear()
    with CaptureQueriesContext(connection) as context:
        response = client.get(url)
    assert response.status_code == 200, url
    if hasattr(response, "streaming_content"):
        b"".join(response.streaming_content)
    return len(context.captured_queries)


def page_urls(recorded_history, small_cnn, plan_result):
    return {
        "home": reverse("home"),
        "trend": small_cnn.get_absolute_url(),
        "trend api": f"/api/models/{small_cnn.pk}/trend/",
        "run": recorded_history[-1].get_absolute_url(),
        "run results": reverse("run-results", args=[recorded_history[-1].pk]),
        "plan": reverse("result-plan", args=[plan_result.pk]),
    }


LIMITS = {"home": 8, "trend": 7, "trend api": 3, "run": 6, "run results": 6, "plan": 7}


def test_every_page_needs_the_same_few_queries_however_long_the_history(
    client, recorded_history, small_cnn, tmp_path, django_assert_max_num_queries
):
    result = result_of(recorded_history[-1])
    for r in Result.objects.filter(run=recorded_history[-1]):
        attach(r, tmp_path, "plan.json", json.dumps(PLAN).encode())
    urls = page_urls(recorded_history, small_cnn, result)
    before = {name: queries(client, url) for name, url in urls.items()}
    for name, url in urls.items():
        cache.clear()
        with django_assert_max_num_queries(LIMITS[name]):
            client.get(url)

    # When the history grows (more commits, results, alerts, artifacts)
    add_commits(recorded_history, 6)
    for r in Result.objects.filter(run=recorded_history[-1]):
        attach(r, tmp_path, "problem.csv", b"id,lower,upper,size\n")

    after = {name: queries(client, url) for name, url in urls.items()}
    assert after == before


def test_it_lists_every_model_with_its_latest_planned_bytes(client, recorded_history):
    response = client.get(reverse("home"))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/repos/demo/models/small-cnn/"' in html
    assert 'href="/repos/demo/models/residual-cnn/"' in html
    # The newest commit (i=3) of small-cnn under tvm-stock: 50_000 + 3 * 4096 bytes.
    latest = 50_000 + 3 * 4096
    assert f'title="{latest:,} bytes">60.8 KiB</span>' in html
    # Older values of that series are not the overview's business (beyond its alerts).
    latest_table = html.split('<table class="latest">')[1].split("</table>")[0]
    assert f'title="{50_000:,} bytes"' not in latest_table


def test_it_shows_recent_runs_with_their_status(client, recorded_history):
    html = client.get(reverse("home")).content.decode()

    for run in recorded_history:
        assert f'href="{run.get_absolute_url()}"' in html
    assert html.count("status-succeeded") == len(recorded_history)


def test_it_builds_the_overview_in_a_bounded_number_of_queries(
    client, recorded_history, django_assert_max_num_queries
):
    # The first request renders the tables and alerts and stores them: the versions, the
    # stored parts; the series with their cells, repositories and models, then the commits
    # with open alerts and their alerts, each part read again and written (a savepoint, a
    # read, a savepoint, the write, two releases); recent runs.
    with django_assert_max_num_queries(22):
        client.get(reverse("home"))
    cache.clear()
    # Then, from a cold cache: the versions, the stored parts, the recent runs.
    with django_assert_max_num_queries(3):
        client.get(reverse("home"))


def test_the_trend_pages_stored_tables_follow_the_data_they_show(client, small_cnn):
    url = small_cnn.get_absolute_url()
    assert "Latest results" in client.get(url).content.decode()
    assert Fragment.objects.filter(key__startswith=f"trend:{small_cnn.pk}:").count() == 2

    newest = Result.objects.filter(model=small_cnn, strategy__name="none").order_by("-id")[0]
    Result.objects.filter(pk=newest.pk).update(planned_bytes=987_654_321)
    actions.summarise_all_series()
    cache.clear()
    html = client.get(url).content.decode()

    latest = html.split("<h2>Latest results</h2>")[1].split("</table>")[0]
    assert 'title="987,654,321 bytes"' in latest


@pytest.mark.django_db
def test_branch_names_are_each_branch_once_sorted_and_of_one_repository():
    ours = actions.track_repository("ours", "https://example.invalid/ours.git")
    theirs = actions.track_repository("theirs", "https://example.invalid/theirs.git")
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for i, (repository, branch) in enumerate([
        (ours, "main"), (ours, "feature/b"), (ours, ""), (ours, "main"), (ours, "Feature-A"),
        (ours, "feature/b"), (theirs, "elsewhere"), (ours, "zéro"),
    ]):
        actions.record_commit(
            repository, sha=f"{i:040x}", branch=branch, committed_at=when + timedelta(hours=i)
        )

    names = Commit.objects.branch_names(ours)

    assert set(names) == {"main", "feature/b", "Feature-A", "zéro"}
    # In the database's own order, as the DISTINCT it replaces gave them.
    assert names == list(
        Commit.objects.for_repository(ours).exclude(branch="").order_by("branch")
        .values_list("branch", flat=True).distinct()
    )
    assert Commit.objects.branch_names(actions.track_repository("empty", "x")) == []


def test_it_renders_the_trend_page_with_the_chart_data(client, small_cnn):
    response = client.get(reverse("model-trend", args=["demo", "small-cnn"]))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="chart-planned-bytes"' in html
    assert "peakwatch/trend.js" in html
    # The data reaches the page as parseable JSON for the chart script.
    embedded = html.split('<script id="trend-data" type="application/json">')[1]
    trend = json.loads(embedded.split("</script>")[0])
    assert [series["strategy"] for series in trend["series"]] == [
        "greedy-by-size", "none", "tvm-stock"
    ]
    assert all(len(series["points"]) == 4 for series in trend["series"])
    assert len(trend["commits"]) == 4


def test_it_shows_each_commits_change_in_the_trend_history(client, small_cnn):
    html = client.get(small_cnn.get_absolute_url()).content.decode()

    # Every commit adds 4096 bytes to every series in the recorded history.
    assert html.count('title="4,096 bytes">4.0 KiB</span>') == 3 * 3


@pytest.mark.parametrize(
    "repository, model", [("demo", "no-such-model"), ("no-such-repo", "small-cnn")]
)
def test_it_answers_404_for_an_unknown_repository_or_model(
    client, recorded_history, repository, model
):
    response = client.get(reverse("model-trend", args=[repository, model]))

    assert response.status_code == 404


def test_it_shows_a_runs_commit_results_and_artifact_links(client, recorded_history, tmp_path):
    # Given a run whose first result has a plan artifact
    run = recorded_history[-1]
    result = Result.objects.filter(run=run).order_by("id").first()
    plan = tmp_path / "plan.json"
    plan.write_text('{"offsets": [0, 1024]}')
    artifact = actions.attach_artifact(result, "plan.json", plan)

    # When the run page is opened
    response = client.get(reverse("run-detail", args=[run.pk]))

    # Then it shows the commit, all six results and a link to the artifact
    assert response.status_code == 200
    html = response.content.decode()
    assert run.commit.sha in html
    assert "Commit number 3" in html
    assert "Ada Planner" in html
    assert html.count('<tr class="result-ok"') == 6
    assert f'href="{artifact.get_absolute_url()}"' in html
    assert ">plan.json</a>" in html


def test_it_shows_the_error_of_a_failed_result(client, recorded_history):
    run = recorded_history[0]
    actions.record_result(
        run, model="small-cnn", strategy="hill-climb", board="cpu",
        report=report_of(error="TVMError: memory planning gave up"),
    )

    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()

    assert '<tr class="result-failed"' in html
    assert "TVMError: memory planning gave up" in html


def test_it_polls_only_while_a_run_is_unfinished(client, recorded_history):
    finished = recorded_history[0]
    queued = Run.objects.create(
        repository=finished.repository, commit=finished.commit, trigger="test"
    )

    assert 'data-finished="true"' in client.get(finished.get_absolute_url()).content.decode()
    assert 'data-finished="false"' in client.get(queued.get_absolute_url()).content.decode()


def test_it_reports_a_runs_progress_as_json(client, recorded_history):
    # Given a run that has recorded two of its six results
    run = Run.objects.create(
        repository=recorded_history[0].repository, commit=recorded_history[0].commit
    )
    actions.begin_run(
        run, models=[("small-cnn", "zoo:small_cnn")], strategies=["none"], boards=["cpu"],
        total=6,
    )
    actions.append_log(run, "compiling small-cnn")
    for strategy in ("none", "tvm-stock"):
        actions.record_result(
            run, model="small-cnn", strategy=strategy, board="cpu",
            report=report_of(planned_bytes=1)
        )

    # When its progress is asked for
    response = client.get(reverse("run-progress", args=[run.pk]))

    # Then it is running, a third done, with its log
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    progress = response.json()
    assert progress["status"] == "running"
    assert progress["is_finished"] is False
    assert progress["started_at"] and progress["finished_at"] is None
    assert (progress["done"], progress["total"], progress["percent"]) == (2, 6, 33)
    assert "compiling small-cnn" in progress["log"]
    assert progress["results_url"] == reverse("run-results", args=[run.pk])


def test_it_reports_a_finished_run_as_finished(client, recorded_history):
    progress = client.get(reverse("run-progress", args=[recorded_history[0].pk])).json()

    assert progress["status"] == "succeeded"
    assert progress["is_finished"] is True
    assert progress["percent"] == 100
    assert progress["finished_at"]


def test_it_serves_the_results_table_alone_for_live_refresh(client, recorded_history):
    response = client.get(reverse("run-results", args=[recorded_history[0].pk]))

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.count('<tr class="result-ok"') == 6


@pytest.mark.parametrize("name", ["run-detail", "run-progress", "run-results"])
def test_it_answers_404_for_an_unknown_run(client, recorded_history, name):
    assert client.get(reverse(name, args=[987654])).status_code == 404


def test_it_downloads_an_artifact_as_an_attachment(client, recorded_history, tmp_path):
    # Given a plan artifact on a result
    result = Result.objects.filter(run=recorded_history[0]).first()
    content = b'{"strategy": "greedy-by-size", "offsets": [0, 4096, 0]}'
    plan = tmp_path / "plan.json"
    plan.write_bytes(content)
    artifact = actions.attach_artifact(result, "plan.json", plan)

    # When it is downloaded
    response = client.get(artifact.get_absolute_url())

    # Then the response is the file's bytes, named, typed, as an attachment
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == content
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="plan.json"'
    assert response["Content-Length"] == str(len(content))


def test_it_answers_404_for_an_unknown_artifact(client, recorded_history):
    assert client.get(reverse("artifact-download", args=[987654])).status_code == 404


def test_it_answers_404_when_an_artifacts_file_is_gone(client, recorded_history, tmp_path):
    result = Result.objects.filter(run=recorded_history[0]).first()
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    artifact = actions.attach_artifact(result, "plan.json", plan)
    artifact.file.storage.delete(artifact.file.name)

    assert client.get(artifact.get_absolute_url()).status_code == 404
