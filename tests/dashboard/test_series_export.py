"""A series exports as CSV from the model page and as JSON from the API: every commit,
the figures the page charts, in a fixed column order."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import Model, Result, Run, Toolchain
from dashboard.series_export import COLUMNS
from tests.conftest import report_of
from tests.dashboard.shape_history import POINTS, record_shape_history

pytestmark = pytest.mark.django_db

HEADER = (
    "commit_sha,committed_at,branch,commit_title,run,result,status,planned_bytes,"
    "intermediate_bytes,lower_bound_bytes,measured_peak_bytes,latency_median_ms,"
    "latency_p90_ms,reused_from,error"
)


@pytest.fixture
def small_cnn(recorded_history):
    return Model.objects.select_related("repository").get(name="small-cnn")


def csv_url(model, **query) -> str:
    return reverse("series-csv", args=[model.repository.name, model.name]), query


def read_csv(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def record_run(repository, sha: str, *, message: str, reports: dict, after) -> Run:
    commit = actions.record_commit(
        repository, sha=sha, parent_sha=after.commit.sha, branch="main", author="Ada",
        message=message, committed_at=after.commit.committed_at + timedelta(hours=1),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("small-cnn", "zoo:small_cnn")], strategies=list(reports),
                      boards=["cpu"], total=len(reports))
    for strategy, report in reports.items():
        actions.record_result(run, model="small-cnn", strategy=strategy, board="cpu",
                              report=report)
    actions.finish_run(run)
    return run


def test_the_csv_has_every_commit_of_the_series_in_a_fixed_column_order(
    client, small_cnn, recorded_history
):
    url, query = csv_url(small_cnn, strategy="none", board="cpu")

    response = client.get(url, query)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="small-cnn-none-cpu.csv"'
    assert response.content.decode().splitlines()[0] == HEADER
    rows = read_csv(response)
    assert [row["commit_sha"] for row in rows] == [run.commit.sha for run in recorded_history]
    first = Result.objects.get(run=recorded_history[0], model=small_cnn, strategy__name="none")
    assert rows[0] == {
        "commit_sha": recorded_history[0].commit.sha,
        "committed_at": "2026-11-01T00:00:00+00:00",
        "branch": "main",
        "commit_title": "Commit number 0",
        "run": str(recorded_history[0].pk),
        "result": str(first.pk),
        "status": "ok",
        "planned_bytes": "80000",
        "intermediate_bytes": "78976",
        "lower_bound_bytes": "64000",
        "measured_peak_bytes": "",
        "latency_median_ms": "1.0",
        "latency_p90_ms": "1.1",
        "reused_from": "",
        "error": "",
    }
    assert [int(row["planned_bytes"]) for row in rows] == [80000, 84096, 88192, 92288]


def test_the_json_is_the_same_rows_with_what_names_the_series(client, small_cnn):
    url, query = csv_url(small_cnn, strategy="none", board="cpu")
    exported = read_csv(client.get(url, query))

    response = client.get(
        reverse("api:model-series", args=[small_cnn.pk]), {"strategy": "none", "board": "cpu"}
    )

    assert response.status_code == 200
    body = response.json()
    assert body["columns"] == list(COLUMNS)
    assert (body["strategy"], body["board"], body["shape_label"]) == ("none", "cpu", "")
    assert body["model"]["name"] == "small-cnn" and body["branch"] is None
    assert [list(row) for row in body["rows"]] == [list(COLUMNS)] * 4
    assert [str(row["planned_bytes"]) for row in body["rows"]] == [
        row["planned_bytes"] for row in exported
    ]
    # The JSON names its CSV, which is the same export.
    assert read_csv(client.get(body["csv_url"])) == exported


def test_a_commit_measured_twice_exports_the_figure_the_chart_draws_and_a_failure_shows(
    client, small_cnn, recorded_history
):
    # Given a commit whose second run failed, and a newer commit where the series failed
    repository = small_cnn.repository
    last = recorded_history[-1]
    rerun = Run.objects.create(repository=repository, commit=last.commit, trigger="test")
    actions.begin_run(rerun, models=[("small-cnn", "zoo:small_cnn")], strategies=["none"],
                      boards=["cpu"], total=1)
    actions.record_result(rerun, model="small-cnn", strategy="none", board="cpu",
                          report=report_of(error="out of memory\nat layer 3"))
    actions.finish_run(rerun)
    broken = record_run(
        repository, "05" + "b" * 38, message="=HYPERLINK(\"http://evil\")\n\nbody",
        reports={"none": report_of(error="=1+1 compile failed")}, after=last,
    )

    rows = read_csv(client.get(*csv_url(small_cnn, strategy="none", board="cpu")))

    # Then the re-measured commit keeps its successful figure, once
    assert [row["commit_sha"] for row in rows] == [
        *(run.commit.sha for run in recorded_history), broken.commit.sha
    ]
    assert (rows[3]["status"], rows[3]["run"]) == ("ok", str(last.pk))
    # And the failed commit is a row with its status and error, which no spreadsheet runs
    assert rows[4]["status"] == "failed"
    assert rows[4]["planned_bytes"] == ""
    assert rows[4]["error"] == "'=1+1 compile failed"
    assert rows[4]["commit_title"] == "'=HYPERLINK(\"http://evil\")"


def test_a_series_named_by_too_little_is_404_with_what_tells_them_apart(client, small_cnn):
    url, query = csv_url(small_cnn, board="cpu")

    page = client.get(url, query)
    api = client.get(reverse("api:model-series", args=[small_cnn.pk]), query)

    assert page.status_code == 404
    assert "3 series fit" in page.content.decode()
    assert "strategy (one of 'greedy-by-size', 'none', 'tvm-stock')" in page.content.decode()
    assert api.status_code == 404
    assert "strategy (one of" in str(api.json()["series"])


@pytest.mark.parametrize("query", [
    {"strategy": "none", "board": "gpu"},
    {"strategy": "none", "toolchain": "no-such-toolchain"},
    {"strategy": "none", "point": "h=64"},
])
def test_a_series_the_model_does_not_have_is_404(client, small_cnn, query):
    page = client.get(*csv_url(small_cnn, **query))
    api = client.get(reverse("api:model-series", args=[small_cnn.pk]), query)

    assert page.status_code == 404
    assert api.status_code == 404


def test_a_toolchain_is_named_by_its_id_or_its_spec(client, small_cnn):
    toolchain = Toolchain.objects.get(spec="")
    by_id = client.get(*csv_url(small_cnn, strategy="none", toolchain=str(toolchain.pk)))

    assert by_id.status_code == 200
    assert len(read_csv(by_id)) == 4


def test_a_shape_point_is_its_own_series_and_its_file_is_named_for_it(client, db):
    repository = actions.track_repository("tracked", "/nonexistent")
    record_shape_history(repository)
    pool = Model.objects.select_related("repository").get(name="pool")

    several = client.get(*csv_url(pool, strategy="best-fit"))
    one = client.get(*csv_url(pool, strategy="best-fit", point=POINTS[2]))

    assert several.status_code == 404
    assert "point (one of 'h=64,w=64', 'h=256,w=256', 'h=1024,w=1024')" in (
        several.content.decode()
    )
    assert one.status_code == 200
    assert one["Content-Disposition"] == (
        'attachment; filename="pool-best-fit-h=1024_w=1024-cpu.csv"'
    )
    # best-fit grows by 4 KiB a commit at h=1024 only.
    planned = [int(row["intermediate_bytes"]) for row in read_csv(one)]
    assert [b - a for a, b in zip(planned, planned[1:], strict=False)] == [4096, 4096]


def test_a_branch_keeps_its_commits_only(client, small_cnn, recorded_history):
    commit = recorded_history[-1].commit
    commit.branch = "feature"
    commit.save()

    rows = read_csv(client.get(*csv_url(small_cnn, strategy="none", branch="feature")))

    assert [row["commit_sha"] for row in rows] == [commit.sha]


def test_each_line_of_the_model_page_links_to_its_exports(client, small_cnn):
    page = client.get(small_cnn.get_absolute_url()).content.decode()

    csv_link = (
        f"{reverse('series-csv', args=['demo', 'small-cnn'])}?strategy=none&amp;board=cpu"
        f"&amp;toolchain={Toolchain.objects.get(spec='').pk}&amp;point="
    )
    assert csv_link in page
    assert f"{reverse('api:model-series', args=[small_cnn.pk])}?strategy=none&amp;" in page
    assert page.count("data-export") == 3


def test_the_exports_are_private_in_a_private_peakwatch(client, small_cnn, settings):
    settings.PEAKWATCH_PUBLIC = False

    page = client.get(*csv_url(small_cnn, strategy="none"))
    api = client.get(reverse("api:model-series", args=[small_cnn.pk]), {"strategy": "none"})

    assert page.status_code == 302 and "/accounts/login/" in page["Location"]
    assert api.status_code == 401


def test_reused_figures_name_the_result_they_were_copied_from(client, small_cnn):
    original = Result.objects.filter(model=small_cnn, strategy__name="none").order_by("id")[3]
    Result.objects.filter(pk=original.pk).update(reused_from=Result.objects.filter(
        model=small_cnn, strategy__name="none").order_by("id")[2])

    rows = read_csv(client.get(*csv_url(small_cnn, strategy="none")))

    assert rows[3]["reused_from"] != "" and rows[2]["reused_from"] == ""

