"""Memory against input shape in a real browser: the model page's chart and table, the
trend's point picker, the comparison's base/head overlay and the plan page's point links."""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Result
from tests.dashboard.shape_history import COMMITS, POINTS, record_shape_history

pytestmark = pytest.mark.browser
STRATEGIES = ["best-fit", "greedy-by-size", "tvm-stock"]

SHAPE_DATASETS = """() => window.peakwatchShapeChart.data.datasets.map((dataset, i) => ({
    label: dataset.label,
    points: dataset.data.length,
    drawn: window.peakwatchShapeChart.getDatasetMeta(i).data.length,
    dashed: (dataset.borderDash || []).length > 0,
}))"""


@pytest.fixture
def shape_runs(db):
    return record_shape_history(actions.track_repository("tracked", "/nonexistent"))


@pytest.fixture
def model_page(page, live_server, shape_runs):
    # One curve per strategy, as the address asks: the history has an open alert, which
    # the page would otherwise open on (test_shape_points_on_pages).
    page.goto(f"{live_server.url}/repos/tracked/models/pool/?curves=strategy")
    page.wait_for_selector("[data-shape-chart][data-ready='true']", timeout=10_000)
    return page


def test_the_chart_has_a_curve_per_strategy_over_the_points_and_the_reservation(
    model_page, screenshot_dir
):
    datasets = model_page.evaluate(SHAPE_DATASETS)

    assert [d["label"] for d in datasets] == [*STRATEGIES, "TVM reserved at the bound"]
    assert all(d["points"] == d["drawn"] == len(POINTS) for d in datasets)
    assert [d["dashed"] for d in datasets] == [False, False, False, True]
    assert model_page.evaluate("window.peakwatchShapeChart.data.labels") == POINTS
    ratio = model_page.locator("[data-overallocation] tr[data-point='h=64,w=64'] [data-ratio]")
    assert ratio.inner_text() == "384.00×"
    assert model_page.problems == []
    model_page.screenshot(path=str(screenshot_dir / "memory-by-shape.png"), full_page=True)


def test_the_chart_switches_to_one_curve_per_commit_of_one_strategy(model_page):
    model_page.select_option("[data-shape-mode]", "commit")
    model_page.select_option("[data-shape-strategy]", "tvm-stock")

    datasets = model_page.evaluate(SHAPE_DATASETS)
    assert [d["label"] for d in datasets] == [f"0{i}eeeee Shape commit {i}" for i in range(COMMITS)]
    assert all(d["drawn"] == len(POINTS) for d in datasets)
    assert model_page.problems == []


def test_the_trend_shows_one_point_at_a_time(model_page):
    model_page.wait_for_selector("[data-trend-charts][data-ready='true']")
    picker = model_page.locator("[data-point-picker] select")
    assert picker.is_visible()
    assert picker.locator("option").all_inner_texts() == POINTS

    planned = "() => window.peakwatchCharts[0].data.datasets.map((d) => d.label)"
    assert model_page.evaluate(planned)[:3] == STRATEGIES
    picker.select_option("h=1024,w=1024")

    assert model_page.locator("[data-trend-charts]").get_attribute("data-point") == POINTS[2]
    assert model_page.evaluate(planned)[:3] == STRATEGIES
    assert "point=h%3D1024%2Cw%3D1024" in model_page.url
    assert model_page.problems == []


def test_the_compare_page_overlays_base_and_head(page, live_server, shape_runs):
    base, head = shape_runs[0].commit, shape_runs[-1].commit

    page.goto(f"{live_server.url}/repos/tracked/compare/{base.sha}...{head.sha}/")
    page.wait_for_selector("[data-shape-overlays][data-ready='true']", timeout=10_000)

    overlay = page.evaluate(
        "() => window.peakwatchShapeOverlays.pool.data.datasets.map((d, i) => ({label: d.label,"
        " strategy: d.strategy,"
        " drawn: window.peakwatchShapeOverlays.pool.getDatasetMeta(i).data.length}))"
    )
    assert overlay == [
        {"label": "base", "strategy": "best-fit", "drawn": 3},
        {"label": "head", "strategy": "best-fit", "drawn": 3},
    ]
    page.select_option("[data-overlay-strategy]", "tvm-stock")
    strategy = page.evaluate("window.peakwatchShapeOverlays.pool.data.datasets[1].strategy")
    assert strategy == "tvm-stock"
    assert page.problems == []


def test_the_plan_page_point_picker_opens_the_same_result_at_another_point(
    page, live_server, shape_runs
):
    run = shape_runs[-1]
    result = Result.objects.get(run=run, strategy__name="best-fit", shape_label=POINTS[0])
    page.goto(f"{live_server.url}/results/{result.pk}/plan/")

    page.click("[data-point-picker] a[data-point='h=1024,w=1024']")
    page.wait_for_selector("[data-point-picker] [aria-current='page']")

    other = Result.objects.get(run=run, strategy__name="best-fit", shape_label=POINTS[2])
    assert page.url.endswith(f"/results/{other.pk}/plan/")
    current = page.locator("[data-point-picker] [aria-current='page']").inner_text()
    assert current == POINTS[2]
    assert page.problems == []


SMALL_POINTS_APART = """() => {
  const chart = window.peakwatchShapeChart;
  const meta = chart.getDatasetMeta(0);
  return {type: chart.scales.y.type, apart: Math.abs(meta.data[0].y - meta.data[1].y),
          ticks: chart.scales.y.ticks.map((t) => t.value)};
}"""


def test_the_small_points_stand_apart_on_a_logarithmic_axis(model_page):
    # 64x64 to 1024x1024 is 256 times the bytes: on a linear axis h=64 and h=256 both sit
    # on the floor.
    log = model_page.evaluate(SMALL_POINTS_APART)
    model_page.select_option("[data-shape-scale]", "linear")
    linear = model_page.evaluate(SMALL_POINTS_APART)

    assert log["type"] == "logarithmic" and linear["type"] == "linear"
    assert all((t & (t - 1)) == 0 for t in log["ticks"]), log["ticks"]
    assert log["apart"] > 40 and linear["apart"] < 20, (log, linear)
    assert model_page.problems == []
