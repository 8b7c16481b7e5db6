"""Series summaries: what recording, rerunning, redelivering and removing Results leaves in
each line's stored summary, and the toolchain a trend is filtered by."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from dashboard import actions
from dashboard.models import Result, Run, Series
from tests.conftest import fake_report, report_of

pytestmark = pytest.mark.django_db


def line(model="small-cnn", strategy="none", board="cpu", toolchain="") -> Series:
    return Series.objects.get(
        model__name=model, strategy__name=strategy, board__name=board, toolchain__spec=toolchain
    )


def planned(series: Series) -> list[int]:
    return [point[2] for point in series.points]


def new_commit(recorded_history, sha: str, hours: int):
    repository = recorded_history[0].repository
    return actions.record_commit(
        repository, sha=sha, parent_sha=recorded_history[-1].commit.sha, branch="main",
        message=f"Commit {sha[:4]}", committed_at=datetime(2026, 11, 1, tzinfo=UTC)
        + timedelta(hours=hours),
    )


def test_recording_a_result_summarises_its_series(recorded_history):
    series = line()

    assert series.commits == 4
    assert series.latest_result == Result.objects.get(
        run=recorded_history[-1], model__name="small-cnn", strategy__name="none"
    )
    assert planned(series) == [80_000 + 4096 * i for i in range(4)]
    # One line per model x strategy x board x toolchain of the history.
    assert Series.objects.count() == 2 * 3


def test_a_redelivered_result_is_counted_once(recorded_history):
    run = recorded_history[-1]

    again = actions.record_result(
        run, model="small-cnn", strategy="none", board="cpu", report=fake_report(99_000, 1.0)
    )

    series = line()
    assert series.commits == 4
    assert series.latest_result == again
    assert planned(series)[-1] == 99_000


def test_a_commit_run_again_counts_once_with_its_newest_result(recorded_history):
    commit = recorded_history[1].commit
    rerun = Run.objects.create(repository=commit.repository, commit=commit)

    actions.record_result(
        rerun, model="small-cnn", strategy="none", board="cpu", report=fake_report(12_345, 1.0)
    )

    series = line()
    assert series.commits == 4
    assert planned(series)[1] == 12_345
    assert series.points[1][1] == rerun.pk


def test_a_result_that_fails_on_redelivery_leaves_the_line(recorded_history):
    actions.record_result(
        recorded_history[-1], model="small-cnn", strategy="none", board="cpu",
        report=report_of(error="the compile crashed"),
    )

    series = line()
    assert series.commits == 3
    assert series.latest_result.run == recorded_history[-2]


def test_removing_a_run_summarises_its_series_again(
    recorded_history, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        recorded_history[-1].delete()

    # One hook per series, not one per removed result.
    assert len(callbacks) == 6
    series = line()
    assert series.commits == 3
    assert series.latest_result.run == recorded_history[-2]


def test_removing_every_result_of_a_series_removes_it(
    recorded_history, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        Result.objects.filter(model__name="small-cnn", strategy__name="none").delete()

    assert not Series.objects.filter(model__name="small-cnn", strategy__name="none").exists()
    assert Series.objects.count() == 5


def test_the_command_summarises_results_loaded_behind_the_actions_back(recorded_history):
    Series.objects.all().delete()
    Result.objects.filter(model__name="small-cnn", strategy__name="none").update(planned_bytes=7)

    call_command("summarise_series", stdout=io.StringIO())

    assert Series.objects.count() == 6
    assert planned(line()) == [7, 7, 7, 7]


def test_each_toolchain_is_a_line_of_its_own(client, recorded_history):
    commit = new_commit(recorded_history, "b" * 40, 10)
    run = Run.objects.create(repository=commit.repository, commit=commit)
    actions.record_result(
        run, model="small-cnn", strategy="none", board="cpu", report=fake_report(70_000, 1.0),
        toolchain="apache-tvm==0.26.0",
    )

    old, new = line(toolchain=""), line(toolchain="apache-tvm==0.26.0")
    assert (old.commits, new.commits) == (4, 1)
    small_cnn = old.model
    both = client.get(f"/api/models/{small_cnn.pk}/trend/").json()
    assert sorted(s["toolchain"]["spec"] for s in both["series"] if s["strategy"] == "none") == [
        "", "apache-tvm==0.26.0"
    ]
    by_id = client.get(
        f"/api/models/{small_cnn.pk}/trend/", {"toolchain": new.toolchain_id}
    ).json()
    by_spec = client.get(
        f"/api/models/{small_cnn.pk}/trend/", {"toolchain": "apache-tvm==0.26.0"}
    ).json()
    assert by_id == by_spec
    assert [(s["strategy"], s["commits"]) for s in by_id["series"]] == [("none", 1)]
    assert by_id["toolchain"]["spec"] == "apache-tvm==0.26.0"


def test_an_unknown_toolchain_is_not_found(client, recorded_history):
    small_cnn = line().model

    api = client.get(f"/api/models/{small_cnn.pk}/trend/", {"toolchain": "nope"})
    page = client.get(small_cnn.get_absolute_url(), {"toolchain": "987654"})

    assert api.status_code == 404
    assert "no toolchain 'nope'" in api.json()["toolchain"]
    assert page.status_code == 404
    assert b"no toolchain '987654'" in page.content


def test_the_model_page_offers_each_board_and_toolchain_with_results(client, recorded_history):
    commit = new_commit(recorded_history, "c" * 40, 11)
    run = Run.objects.create(repository=commit.repository, commit=commit)
    actions.begin_run(run, models=[], strategies=[], boards=["stm32"], total=2)
    actions.record_result(
        run, model="small-cnn", strategy="none", board="stm32", report=fake_report(1, 1.0),
        toolchain="apache-tvm==0.26.0",
    )
    small_cnn = line().model
    tvm_026 = line(board="stm32", toolchain="apache-tvm==0.26.0").toolchain

    response = client.get(small_cnn.get_absolute_url())
    html = response.content.decode()

    coverage = response.context["coverage"]
    assert coverage["boards"] == ["cpu", "stm32"]
    assert [row["toolchain"].spec for row in coverage["rows"]] == ["", "apache-tvm==0.26.0"]
    assert [[c["strategies"] for c in row["cells"]] for row in coverage["rows"]] == [[3, 0], [0, 1]]
    assert f'data-coverage-cell="{tvm_026.pk}:stm32"' in html
    picked = client.get(small_cnn.get_absolute_url(), {"board": "stm32", "toolchain": tvm_026.pk})
    assert [r["cells"][1]["selected"] for r in picked.context["coverage"]["rows"]] == [False, True]
    assert [line.strategy.name for line in picked.context["latest"]] == ["none"]
