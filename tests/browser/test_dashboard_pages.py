"""The overview and the plan view in a real browser."""

from __future__ import annotations

import json

import pytest

from dashboard import actions
from dashboard.models import Result

pytestmark = pytest.mark.browser

PLAN = {
    "arena_bytes": 1000,
    "peak": {"time": 2, "bytes": 800, "tensors": [
        {"id": "conv_out", "size": 500, "producer": "fused_conv2d", "offset": 0},
        {"id": "relu_out", "size": 300, "producer": "relu", "offset": 500},
    ]},
    "tensors": [
        {"id": "conv_out", "size": 500, "lower": 0, "upper": 4, "offset": 0,
         "producer": "fused_conv2d", "shape": [1], "dtype": "float32"},
        {"id": "relu_out", "size": 300, "lower": 2, "upper": 3, "offset": 500,
         "producer": "relu", "shape": [1], "dtype": "float32"},
        {"id": "add_out", "size": 1000, "lower": 4, "upper": 5, "offset": 0,
         "producer": "add", "shape": [1], "dtype": "float32"},
    ],
}


def test_the_overview_shows_open_alerts_and_a_sparkline_per_series(
    page, live_server, recorded_history, screenshot_dir
):
    page.goto(f"{live_server.url}/")

    assert page.locator("[data-open-alerts] tr[data-alert]").count() > 0
    sparklines = page.locator("svg[data-sparkline]")
    assert sparklines.count() == 6
    # Each line joins the four recorded commits.
    points = page.eval_on_selector(
        "svg[data-sparkline] polyline", "p => p.getAttribute('points').split(' ').length"
    )
    assert points == 4
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "home-page.png"), full_page=True)


def test_the_plan_view_draws_every_placed_tensor_and_the_peak(
    page, live_server, recorded_history, tmp_path, screenshot_dir
):
    parent, result = (
        Result.objects.get(run=run, model__name="small-cnn", strategy__name="none")
        for run in recorded_history[-2:]
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    actions.attach_artifact(parent, "plan.json", path)
    actions.attach_artifact(result, "plan.json", path)

    page.goto(f"{live_server.url}/results/{result.pk}/plan/")
    page.wait_for_selector("[data-timeline][data-ready='true']", timeout=10_000)

    assert page.locator("[data-timeline] rect.tensor").count() == 3
    assert page.locator("[data-timeline] rect.tensor.at-peak").count() == 2
    assert page.locator("[data-timeline] rect[data-peak]").count() == 1
    page.hover("rect[data-tensor='relu_out']")
    assert "relu_out (relu)" in page.inner_text("[data-timeline-hover]")
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "plan-page.png"), full_page=True)

    # And the parent diff link opens the plan diff page
    with page.expect_navigation():
        page.click("[data-parent-diff]")
    assert page.url.endswith(f"/results/{parent.pk}/diff/{result.pk}/")
    assert page.problems == []
