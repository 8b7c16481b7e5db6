"""An LLM deployment's model page in a real browser: the breakdown table beside the trend
charts and the memory-by-shape chart of its context-window axis.

The Results are real: the example repository's decoder compiled at two context windows by
the job's own two phases, run here in process (tests/tracking/test_tracked_llm.py runs them
in the sandbox), and recorded through the actions a worker calls.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dashboard import actions
from dashboard.models import Run

pytestmark = pytest.mark.browser

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tracked-repository"
# No +rewrites strategy: the page reads the same breakdown of any Result
# (tests/tracking/test_tracked_llm.py records +rewrites ones and reads them on the pages).
STRATEGIES = ("tvm-stock", "best-fit")
POINTS = ["context_window=128,prefill_chunk=32", "context_window=256,prefill_chunk=32"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tvm")
    from planner.job_spec import JobSpec
    from planner.shapes import parse_shapes
    from planner.tvm import job

    out = tmp_path_factory.mktemp("llm") / "network"
    spec = JobSpec(
        model="decoder", source="models/decoder.py:build", strategies=STRATEGIES,
        params={"layers": 1, "hidden": 64, "heads": 4, "vocab": 256}, repeat=2,
        shapes=parse_shapes({"context_window": [128, 256], "prefill_chunk": [32]}).to_json(),
    )
    assert job.run(JobSpec(**{**spec.__dict__, "phase": "import", "out": str(out),
                              "base_dir": str(EXAMPLE)})) == []
    found = job.run(JobSpec(**{**spec.__dict__, "phase": "compile", "imported": str(out)}))
    assert all(r.ok for r in found), [r.error for r in found]
    return found


@pytest.fixture
def recorded(db, reports):
    repository = actions.track_repository("tracked", "/nonexistent")
    commit = actions.record_commit(
        repository, sha="0" * 40, branch="main", author="Ada Planner",
        message="Track the decoder", committed_at=datetime(2026, 11, 1, tzinfo=UTC),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("decoder", "models/decoder.py:build")],
                      strategies=list(STRATEGIES), boards=["cpu"], total=len(reports))
    for report in reports:
        actions.record_result(run, model="decoder", strategy=report.strategy, board="cpu",
                              report=report)
    actions.finish_run(run)
    return run


def test_the_model_page_shows_the_breakdown_beside_its_charts(
    page, live_server, recorded, screenshot_dir
):
    page.goto(f"{live_server.url}/repos/tracked/models/decoder/?curves=strategy")
    page.wait_for_selector("[data-trend-charts][data-ready='true']", timeout=10_000)
    page.wait_for_selector("[data-shape-chart][data-ready='true']", timeout=10_000)

    table = page.locator("[data-llm-table]")
    assert table.is_visible()
    rows = table.locator("tr[data-llm-row]")
    assert rows.count() == len(STRATEGIES) * len(POINTS)
    assert sorted({rows.nth(i).get_attribute("data-point") for i in range(rows.count())}) == POINTS
    # One worst function per row, marked; every function's column has a figure.
    assert table.locator("td[data-worst]").count() == rows.count()
    for function in ("prefill", "decode", "batch_prefill", "batch_decode"):
        assert table.locator(f"th[data-function='{function}']").is_visible()
        cells = table.locator(f"td[data-function='{function}']").all_inner_texts()
        assert all(text.strip().removesuffix(" ▲") not in ("", "—") for text in cells)
    assert all(text.endswith("x") for text in
               table.locator("[data-measured-over-estimate]").all_inner_texts())

    # The context window is a shape axis like any other: a point picker, a curve per
    # strategy over the points and the reservation at the bound.
    picker = page.locator("[data-point-picker] select")
    assert picker.locator("option").all_inner_texts() == POINTS
    labels = page.evaluate("window.peakwatchShapeChart.data.datasets.map((d) => d.label)")
    assert set(labels) == {*STRATEGIES, "TVM reserved at the bound"}
    assert page.problems == []
    page.screenshot(path=str(screenshot_dir / "llm-memory.png"), full_page=True)


def test_the_api_gives_each_result_its_breakdown(client, recorded):
    from dashboard.models import Result

    for result in Result.objects.filter(run=recorded):
        answer = client.get(f"/api/results/{result.pk}/").json()
        assert answer["llm"] == result.details["llm"]
        assert answer["planned_bytes"] == answer["llm"]["temporary_bytes"]
        assert set(answer["llm"]["functions"]) == {
            "prefill", "decode", "batch_prefill", "batch_decode"
        }
