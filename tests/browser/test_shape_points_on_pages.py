"""Shape points in a real browser: the model page opens on the newest open alert's point
and curve, and the comparison's table names each row's point, in the points' order."""

from __future__ import annotations

import pytest

from dashboard import actions
from tests.dashboard.shape_history import POINTS, record_growth, record_shape_history

pytestmark = pytest.mark.browser
STRATEGIES = ["best-fit", "greedy-by-size", "tvm-stock"]
MIDDLE = POINTS[1]

PLANNED_LINES = """() => window.peakwatchCharts[0].data.datasets
    .filter((dataset) => !dataset.alerts && !dataset.lowerBound)
    .map((dataset) => ({label: dataset.label, focus: dataset.focus,
                        width: dataset.borderWidth}))"""


@pytest.fixture
def shape_runs(db):
    return record_shape_history(actions.track_repository("tracked", "/nonexistent"))


@pytest.fixture
def middle_regression(shape_runs):
    """A commit that grows greedy-by-size at h=256 alone: the newest open alert is at
    neither the first point nor the largest."""
    return record_growth(shape_runs[0].repository, {("greedy-by-size", 256): 8192})


def test_the_model_page_opens_on_the_newest_open_alerts_point_and_curve(
    page, live_server, middle_regression, screenshot_dir
):
    page.goto(f"{live_server.url}/repos/tracked/models/pool/")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)
    page.wait_for_selector("[data-shape-chart][data-ready='true']", timeout=10_000)

    assert page.locator("[data-point-picker] select").input_value() == MIDDLE
    assert page.locator("[data-trend-charts]").get_attribute("data-point") == MIDDLE
    shown = "[data-trend-charts] figure:not([hidden]) [data-chart-point]"
    captions = page.locator(shown).all_text_contents()
    assert captions == [f" at {MIDDLE}"] * 3
    lines = page.evaluate(PLANNED_LINES)
    assert [line["label"] for line in lines] == STRATEGIES
    assert [line["focus"] for line in lines] == [False, True, False]
    assert lines[1]["width"] > lines[0]["width"]
    # The memory chart: greedy-by-size's curve at each commit, where the growth shows.
    assert page.locator("[data-shape-chart]").get_attribute("data-mode") == "commit"
    assert page.locator("[data-shape-strategy]").input_value() == "greedy-by-size"
    assert page.locator("[data-opening-alert]").is_visible()
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "model-page-at-alert.png"), full_page=True)


def test_an_address_naming_a_point_still_opens_on_it(page, live_server, middle_regression):
    page.goto(f"{live_server.url}/repos/tracked/models/pool/?point=h%3D64%2Cw%3D64")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)

    assert page.locator("[data-point-picker] select").input_value() == POINTS[0]
    assert page.locator("[data-trend-charts]").get_attribute("data-point") == POINTS[0]
    assert page.problems == []


def test_the_compare_table_names_each_rows_point_in_the_points_order(
    page, live_server, shape_runs
):
    base, head = shape_runs[0].commit, shape_runs[-1].commit

    page.goto(f"{live_server.url}/repos/tracked/compare/{base.sha}...{head.sha}/")

    table = page.locator("[data-compare-model='pool'] table")
    headers = table.locator("thead th").all_text_contents()
    assert headers[:3] == ["Strategy", "Point", "Board"]
    rows = table.locator("tbody tr:not(.parts-row)")
    listed = [
        (row.locator("th").inner_text(), row.locator("td[data-point]").inner_text())
        for row in rows.all()
    ]
    assert listed == [(strategy, label) for strategy in STRATEGIES for label in POINTS]
    assert table.locator("td[data-point]").first.is_visible()
    assert page.problems == []
