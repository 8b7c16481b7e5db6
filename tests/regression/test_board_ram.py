"""A micro board's RAM, as its image and run measure it: a column of its own, a trend line,
alerts under the series' tolerance, the figures on the run page and in the API, and what
older Results kept in their details filled in on upgrade."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client

from dashboard import actions
from dashboard.commit_alerts import commit_alerts, failing
from dashboard.models import Alert, Board, Result, Series
from dashboard.trends import model_trend
from tests.helpers import migrate_to, migrated_to
from tests.regression.history import micro_report as micro
from tests.regression.history import record_run

SERIES = ("tiny-cnn", "best-fit")


def _text(page: str) -> str:
    """The page's words, as a reader sees them (no space where a tag ends before a comma)."""
    words = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    return html.unescape(re.sub(r" ([,;)])|(\() ", r"\1\2", words))


@pytest.fixture
def repository(db):
    actions.register_board("mcu", kind=Board.Kind.MICRO, target="c")
    return actions.track_repository("tracked", "/nonexistent")


def _history(repository, rams, planned=(5000, 5000, 5000)):
    runs, parent = [], ""
    for index, (bytes_, ram) in enumerate(zip(planned, rams, strict=True)):
        run = record_run(repository, index, {SERIES: micro(bytes_, ram)}, parent=parent,
                         board="mcu")
        parent = run.commit.sha
        runs.append(run)
    return runs


@pytest.mark.django_db
def test_the_boards_ram_alerts_when_it_grows_though_the_plan_does_not(repository):
    # The stack grew by 2 KiB at commit 2 (a kernel with a bigger frame): the arena, and so
    # the planned bytes, did not move.
    runs = _history(repository, [12_000, 12_000, 14_048])

    result = Result.objects.get(run=runs[2])
    assert result.board_ram_bytes == 14_048
    alerts = commit_alerts(runs[2].commit)
    assert [(a.kind, a.baseline_value, a.value) for a in alerts] == [("ram", 12_000, 14_048)]
    assert alerts[0].tolerance == "0 B, from the repository's settings"
    assert str(alerts[0]).startswith("Board RAM of tiny-cnn")
    # A CI job that fails on memory fails on it; one that fails on latency does not.
    assert failing(alerts, "bytes") == alerts == failing(alerts, "ram")
    assert failing(alerts, "latency") == []
    assert not Alert.objects.filter(commit=runs[1].commit).exists()


@pytest.mark.django_db
def test_the_repositorys_tolerance_holds_for_the_boards_ram_too(repository):
    repository.bytes_threshold = 4096
    repository.save()
    runs = _history(repository, [12_000, 14_048, 18_200])

    assert [(a.kind, a.value) for a in Alert.objects.all()] == [("ram", 18_200)]
    assert runs[1].commit.alerts.count() == 0


@pytest.mark.django_db
def test_a_figure_the_job_wrote_that_is_not_a_byte_count_is_not_taken(repository):
    for index, ram in enumerate([-1, "12000", True, 1 << 60]):
        run = record_run(repository, index, {SERIES: micro(5000, ram)}, board="mcu")
        assert Result.objects.get(run=run).board_ram_bytes is None, ram


@pytest.mark.django_db
def test_the_trend_has_a_ram_line_and_pages_and_the_api_show_the_figures(repository):
    runs = _history(repository, [12_000, 12_000, 14_048])
    model = runs[0].results.get().model

    trend = model_trend(model)
    column = trend["point_fields"].index("board_ram_bytes")
    (line,) = trend["series"]
    assert [point[column] for point in line["points"]] == [12_000, 12_000, 14_048]
    assert [a["kind"] for a in trend["alerts"]] == ["ram"]

    client = Client()
    page = client.get(runs[2].get_absolute_url()).content.decode()
    assert 'data-board-figures="' in page and "On the board (mps2-an386)" in page
    text = _text(page)
    assert "RAM 13.7 KiB +2.0 KiB vs parent (static 8.8 KiB, stack 4.9 KiB" in text
    assert "123,456 instructions; fits in 256.0 KiB of RAM and 4.0 MiB of flash" in text
    model_page = client.get(model.get_absolute_url()).content.decode()
    assert "data-board-ram-chart" in model_page
    assert "Opened where the newest open alert is: board RAM of best-fit on mcu" \
        in _text(model_page)
    assert "11.7 KiB → 13.7 KiB (+2.0 KiB +17.1%)" in _text(model_page)
    alerts_page = _text(client.get("/alerts/").content.decode())
    assert "mcu worker environment (tvm 0.27.0.post1) Board RAM past 0 B, from the " \
        "repository's settings 11.7 KiB 13.7 KiB +2.0 KiB +17.1%" in alerts_page

    result = Result.objects.get(run=runs[2])
    body = client.get(f"/api/results/{result.pk}/").json()
    assert body["board_ram_bytes"] == 14_048
    assert body["board_figures"]["instructions"] == 123_456
    run_body = client.get(f"/api/runs/{runs[2].pk}/").json()
    assert run_body["open_alerts"]["ram"] == 1


@pytest.mark.django_db(transaction=True)
def test_upgrading_fills_the_column_and_the_lines_from_older_results():
    model = migrated_to("0022_pullrequest_closed_at")

    repository = model("Repository").create(name="tracked", clone_url="/nonexistent")
    commit = model("Commit").create(
        repository=repository, sha="a" * 40, committed_at="2026-11-01T00:00:00Z"
    )
    run = model("Run").create(repository=repository, commit=commit, status="succeeded")
    series = {
        "model": model("Model").create(repository=repository, name="tiny-cnn"),
        "strategy": model("Strategy").create(name="best-fit"),
        "toolchain": model("Toolchain").get_or_create(spec="")[0],
    }
    mcu = model("Board").create(name="mcu", kind="micro")
    cpu = model("Board").create(name="cpu", kind="cpu")
    board_figures = {"kind": "micro", "ram_bytes": 12_000}
    on_mcu = model("Result").create(run=run, commit=commit, board=mcu, planned_bytes=5000,
                                    details={"board": board_figures}, **series)
    model("Result").create(run=run, commit=commit, board=cpu, planned_bytes=5000,
                           details={"board": {"ram_bytes": 7}}, **series)
    # As an older worker summarised it: seven fields a point.
    model("Series").create(board=mcu, points=[[commit.pk, run.pk, 5000, 4000, 4000, 1.0, None]],
                           commits=1, **series)

    migrate_to("0023_result_board_ram")

    assert {r.board.name: r.board_ram_bytes for r in Result.objects.select_related("board")} \
        == {"mcu": 12_000, "cpu": None}
    line = Series.objects.get(board__name="mcu")
    assert line.points == [[commit.pk, run.pk, 5000, None, None, None, None, 12_000]]
    assert on_mcu.pk == Result.objects.get(board__name="mcu").pk
    migrate_to()


@pytest.mark.django_db
def test_a_line_summarised_before_the_column_still_draws(repository):
    runs = _history(repository, [12_000, 12_000, 12_000])
    line = Series.objects.get()
    # As a worker older than the column stored it.
    Series.objects.filter(pk=line.pk).update(points=[p[:7] for p in line.points])
    model = runs[0].results.get().model

    trend = model_trend(model, board="mcu")
    column = trend["point_fields"].index("board_ram_bytes")
    assert [p[column] for p in trend["series"][0]["points"]] == [None, None, None]
    assert json.dumps(trend)
