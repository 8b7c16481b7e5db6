"""The model trend page in a real browser: the charts draw the recorded history."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

STRATEGIES = ["greedy-by-size", "none", "tvm-stock"]

DATASETS = """() => window.peakwatchCharts.map((chart) => chart.data.datasets.map((dataset) => ({
    label: dataset.label,
    points: dataset.data.length,
    drawn: chart.getDatasetMeta(chart.data.datasets.indexOf(dataset)).data.length,
    dashed: (dataset.borderDash || []).length > 0,
})))"""

POINT_POSITION = """([chartIndex, label, index]) => {
    const chart = window.peakwatchCharts[chartIndex];
    const datasetIndex = chart.data.datasets.findIndex((dataset) => dataset.label === label);
    const point = chart.getDatasetMeta(datasetIndex).data[index];
    const box = chart.canvas.getBoundingClientRect();
    return { x: box.left + point.x, y: box.top + point.y };
}"""


@pytest.fixture
def trend_page(page, live_server, recorded_history):
    """The trend page of small-cnn, opened once its charts report they are drawn."""
    page.goto(f"{live_server.url}/repos/demo/models/small-cnn/")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)
    return page


def test_it_draws_one_line_per_strategy_and_the_lower_bound(trend_page, screenshot_dir):
    planned, measured, latency = trend_page.evaluate(DATASETS)

    assert [d["label"] for d in planned] == [*STRATEGIES, "lower bound", "alerts"]
    assert all(d["points"] == 4 and d["drawn"] == 4 for d in planned)
    assert [d["dashed"] for d in planned] == [False, False, False, True, False]
    assert [d["label"] for d in measured] == STRATEGIES
    assert [d["label"] for d in latency] == STRATEGIES
    assert all(d["points"] == 4 for d in latency)
    # The bundle and stylesheet came from the server, and nothing failed on the way.
    assert trend_page.evaluate("getComputedStyle(document.body).margin") == "0px"
    assert trend_page.problems == []
    trend_page.screenshot(path=str(screenshot_dir / "trend-page.png"), full_page=True)


def test_it_shows_the_commit_of_a_hovered_point(trend_page):
    position = trend_page.evaluate(POINT_POSITION, [0, "none", 2])

    trend_page.mouse.move(position["x"], position["y"])

    tooltip = trend_page.evaluate(
        "() => { const t = window.peakwatchCharts[0].tooltip;"
        " return { title: t.title, lines: t.body.flatMap((b) => b.lines) }; }"
    )
    # Chart.js shows the title and the after-title lines together.
    assert tooltip["title"] == ["02aaaaa Commit number 2", "by Ada Planner"]
    assert "none: 86.1 KiB (88,192 bytes)" in tooltip["lines"]


def test_it_opens_the_run_of_a_clicked_point(trend_page, live_server, recorded_history):
    # Given the point of the third commit on the "none" line
    position = trend_page.evaluate(POINT_POSITION, [0, "none", 2])

    # When it is clicked
    with trend_page.expect_navigation():
        trend_page.mouse.click(position["x"], position["y"])

    # Then the browser is on that commit's run page
    assert trend_page.url == f"{live_server.url}{recorded_history[2].get_absolute_url()}"
    assert "Commit number 2" in trend_page.inner_text("h2")


def test_it_follows_the_system_dark_mode(browser, bundle, live_server, recorded_history,
                                         screenshot_dir):
    context = browser.new_context(color_scheme="dark", viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{live_server.url}/repos/demo/models/small-cnn/")
        page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)

        background = page.evaluate("getComputedStyle(document.body).backgroundColor")

        assert background == "rgb(15, 18, 23)"
        page.screenshot(path=str(screenshot_dir / "trend-page-dark.png"), full_page=True)
    finally:
        context.close()


def test_it_marks_the_commits_with_alerts(trend_page):
    # Every recorded commit after the first grew every series: three alerted commits.
    marked = trend_page.evaluate(
        "() => { const chart = window.peakwatchCharts[0];"
        " const d = chart.data.datasets.find((d) => d.alerts);"
        " return { values: d.data.filter((v) => v !== null).length, style: d.pointStyle }; }"
    )

    assert marked == {"values": 3, "style": "triangle"}


def test_it_zooms_into_a_dragged_range_and_resets(trend_page):
    box = trend_page.evaluate(
        "() => { const c = window.peakwatchCharts[0]; const r = c.canvas.getBoundingClientRect();"
        " return { left: r.left + c.chartArea.left, right: r.left + c.chartArea.right,"
        " y: r.top + (c.chartArea.top + c.chartArea.bottom) / 2 }; }"
    )
    width = box["right"] - box["left"]

    trend_page.mouse.move(box["left"] + width * 0.05, box["y"])
    trend_page.mouse.down()
    trend_page.mouse.move(box["left"] + width * 0.6, box["y"], steps=8)
    trend_page.mouse.up()

    zoomed = trend_page.evaluate("() => window.peakwatchCharts[0].isZoomedOrPanned()")
    assert zoomed is True
    assert trend_page.url.endswith("/repos/demo/models/small-cnn/")  # no run opened
    trend_page.click("[data-reset-zoom]")
    assert trend_page.evaluate("() => window.peakwatchCharts[0].isZoomedOrPanned()") is False


def test_it_keeps_filters_in_the_address(page, live_server, recorded_history):
    page.goto(f"{live_server.url}/repos/demo/models/small-cnn/?branch=main&board=cpu")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)

    assert page.eval_on_selector("select[name=branch]", "s => s.value") == "main"
    assert page.problems == []


def test_a_micro_boards_ram_has_a_chart_of_its_own_with_its_alert(page, live_server, db):
    from dashboard import actions
    from dashboard.models import Board
    from tests.regression.history import micro_report, record_run

    actions.register_board("mcu", kind=Board.Kind.MICRO, target="c")
    repository = actions.track_repository("tracked", "/nonexistent")
    parent = ""
    for index, ram in enumerate([12_000, 12_000, 14_048]):
        parent = record_run(repository, index, {("tiny-cnn", "best-fit"): micro_report(5000, ram)},
                            parent=parent, board="mcu").commit.sha

    page.goto(f"{live_server.url}/repos/tracked/models/tiny-cnn/")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)

    assert page.is_visible("#chart-board-ram")
    ram = page.evaluate(DATASETS)[3]
    assert [(d["label"], d["points"]) for d in ram] == [("best-fit", 3), ("alerts", 3)]
    figures = page.evaluate(
        "() => window.peakwatchCharts[3].data.datasets.map((d) => d.data)"
    )
    assert figures == [[12_000, 12_000, 14_048], [None, None, 14_048]]
    assert page.problems == []


def test_a_model_no_board_measures_ram_of_has_no_ram_chart(trend_page):
    assert not trend_page.is_visible("#chart-board-ram")
    assert len(trend_page.evaluate(DATASETS)) == 3
