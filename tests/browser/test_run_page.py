"""The run page in a real browser: progress of an unfinished run updates without reload."""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Run
from tests.conftest import fake_report, report_of

pytestmark = pytest.mark.browser


def test_it_follows_a_run_until_it_finishes(page, live_server, recorded_history, screenshot_dir):
    # Given a queued run, open in the browser
    commit = recorded_history[-1].commit
    run = Run.objects.create(repository=commit.repository, commit=commit, trigger="test")
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.evaluate("() => { window.notReloaded = true; }")
    assert page.inner_text("[data-run-status]") == "queued"

    # When the workers start it and record the first of two results
    actions.begin_run(
        run, models=[("small-cnn", "zoo:small_cnn")], strategies=["none", "tvm-stock"],
        boards=["cpu"], total=2,
    )
    actions.append_log(run, "compiling small-cnn")
    actions.record_result(
        run, model="small-cnn", strategy="none", board="cpu", report=fake_report(80_000, 1.0)
    )

    # Then the page shows it running, half done, with the result and the log
    page.wait_for_selector("[data-progress-text]:has-text('1 of 2 results (50%)')", timeout=8000)
    assert page.inner_text("[data-run-status]") == "running"
    assert page.inner_text("[data-run-started-at]").endswith(" UTC")
    page.wait_for_selector("[data-results] tr.result-ok", timeout=8000)
    assert "compiling small-cnn" in page.inner_text("[data-run-log]")

    # And when the last result lands and the run finishes
    actions.record_result(
        run, model="small-cnn", strategy="tvm-stock", board="cpu",
        report=fake_report(50_000, 1.0),
    )
    actions.finish_run(run)

    # Then the page shows it finished with both results, without having reloaded
    page.wait_for_selector("[data-run][data-finished='true']", timeout=8000)
    assert page.inner_text("[data-run-status]") == "succeeded"
    assert page.get_attribute("[data-progress-bar]", "aria-valuenow") == "100"
    assert page.locator("[data-results] tr.result-ok").count() == 2
    assert page.evaluate("() => window.notReloaded") is True
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "run-page.png"), full_page=True)


def test_a_run_that_finishes_with_a_failed_result_reads_partial_with_the_count(
    page, live_server, recorded_history
):
    # Given a running run of two results, open in the browser, one result in
    commit = recorded_history[-1].commit
    run = Run.objects.create(repository=commit.repository, commit=commit, trigger="test")
    actions.begin_run(
        run, models=[("small-cnn", "zoo:small_cnn")], strategies=["none", "tvm-stock"],
        boards=["cpu"], total=2,
    )
    actions.record_result(
        run, model="small-cnn", strategy="none", board="cpu", report=fake_report(80_000, 1.0)
    )
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    assert page.inner_text("[data-run-status]") == "running"

    # When the other one fails and the run finishes
    actions.record_result(
        run, model="small-cnn", strategy="tvm-stock", board="cpu",
        report=report_of(error="the model does not build"),
    )
    actions.finish_run(run)

    # Then the badge says partial and how many failed, not succeeded
    page.wait_for_selector("[data-run][data-finished='true']", timeout=8000)
    assert page.inner_text("[data-run-status]") == "partial: 1 of 2 failed"
    assert page.locator("[data-run-status] .status-partial").count() == 1
    assert page.locator("[data-results] tr.result-failed").count() == 1
    assert page.problems == []
