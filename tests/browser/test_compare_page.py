"""The comparison page in a real browser: one bytes-against-latency scatter per model."""

from __future__ import annotations

import re

import pytest

from dashboard.models import Run

pytestmark = pytest.mark.browser

DATASETS = """() => window.peakwatchCharts.map((chart) => chart.data.datasets.map((dataset, i) => ({
    label: dataset.label,
    points: dataset.data.length,
    drawn: chart.getDatasetMeta(i).data.length,
})))"""


def test_it_draws_base_head_and_the_pareto_front_for_each_model(
    page, live_server, recorded_history, screenshot_dir
):
    first, last = (Run.objects.get(pk=run.pk).commit for run in (recorded_history[0],
                                                                  recorded_history[-1]))

    page.goto(f"{live_server.url}/repos/demo/compare/{first.sha}...{last.sha}/")
    page.wait_for_selector("[data-pareto-charts][data-ready='true']", timeout=10_000)

    charts = page.evaluate(DATASETS)
    assert len(charts) == 2  # residual-cnn and small-cnn
    for datasets in charts:
        assert [d["label"] for d in datasets][:2] == ["base", "head"]
        assert datasets[0]["points"] == datasets[0]["drawn"] == 3
        assert datasets[2]["label"] == "Pareto front (head)"
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "compare-page.png"), full_page=True)


Y_TICKS = """() => window.peakwatchCharts.map((chart) => chart.scales.y.ticks.map((tick) => ({
    value: tick.value, label: tick.label,
})))"""


def test_its_bytes_axes_tick_at_round_binary_sizes(page, live_server, recorded_history):
    first, last = (Run.objects.get(pk=run.pk).commit for run in (recorded_history[0],
                                                                  recorded_history[-1]))

    page.goto(f"{live_server.url}/repos/demo/compare/{first.sha}...{last.sha}/")
    page.wait_for_selector("[data-pareto-charts][data-ready='true']", timeout=10_000)

    residual, small = page.evaluate(Y_TICKS)
    for ticks in (residual, small):
        values = [tick["value"] for tick in ticks]
        step = values[1] - values[0]
        assert step & (step - 1) == 0, values  # a power of two bytes
        assert all(b - a == step for a, b in zip(values, values[1:], strict=False))
        assert all(re.fullmatch(r"\d+ KiB", tick["label"]) for tick in ticks), ticks
    # residual-cnn planned 180,000 to 332,288 bytes; small-cnn 45,000 to 92,288.
    assert [tick["label"] for tick in residual] == [
        "160 KiB", "192 KiB", "224 KiB", "256 KiB", "288 KiB", "320 KiB", "352 KiB",
    ]
    assert page.problems == []
