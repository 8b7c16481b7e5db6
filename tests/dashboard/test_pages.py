"""The server-rendered pages: overview, model trend, run, progress and artifact download."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import Model, Result, Run
from tests.conftest import report_of


@pytest.fixture
def small_cnn(recorded_history):
    return Model.objects.get(repository__name="demo", name="small-cnn")


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
    # Versions for the cache, latest results, repositories and models, sparklines (one
    # per repository), open alerts, recent runs.
    with django_assert_max_num_queries(8):
        client.get(reverse("home"))


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
