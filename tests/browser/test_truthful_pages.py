"""Pages that never say more than was measured, as a user sees them in Chromium (issue 24):
the peak instant of a real plan with in-place rewrites, the plan diff of a real compile
with a layer inserted, the boards page with a queue nobody consumes, a partial run.

The plans come from real compiles (TVM's CPU pipeline), once per module, recorded through
the same actions the workers call."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache

from dashboard import actions, queue
from dashboard.models import Run
from tests.conftest import fake_report, report_of
from tests.workers.conftest import broker  # noqa: F401  (a real Redis broker)

pytestmark = pytest.mark.browser

STRATEGY = "best-fit+rewrites"
# Small enough to compile in seconds; its inverted residuals run in place, and a merged
# group (a block's output and the next block's, written over it) is live at its peak.
MOBILENET = ("zoo:mobilenet_v2", {"resolution": 32, "width": 0.25, "classes": 10})
# TVM names the first fused kernel without a number; the layer inserted in front takes that
# name and every later kernel and allocation is renumbered.
INSERTED_KERNEL = "fused_conv2d_add_relu"


def _compile(folder, source, network=None):
    from planner.tvm.compile import compile_model

    [report] = compile_model(
        source, [STRATEGY], repeat=1, memory_configs=(), artifacts_dir=folder, network=network
    )
    assert report.ok, report.error
    return report


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    """A best-fit+rewrites compile of a small MobileNetV2, with its plan.json."""
    from planner.tvm.sources import ModelSource

    report = _compile(tmp_path_factory.mktemp("mobilenet"), ModelSource(*MOBILENET))
    assert report.rewrites["inplace"]
    return report


@pytest.fixture(scope="module")
def inserted(tmp_path_factory):
    """Compiles of a conv stack without and with a 3-to-3 channel layer in front."""
    from planner.tvm.sources import ModelSource
    from tests.dashboard.test_plan_diff_matching import _conv_stack

    folder = tmp_path_factory.mktemp("inserted")
    return tuple(
        _compile(folder / side, ModelSource("stack.py:stack"), _conv_stack(front))
        for side, front in (("before", False), ("after", True))
    )


def _record(repository, index: int, model: tuple[str, str], report, parent: str = ""):
    """A finished run of commit ``index`` with one real result and its artifacts."""
    commit = actions.record_commit(
        repository, sha=f"{index:02d}" + "e" * 38, parent_sha=parent, branch="main",
        author="Ada Planner", message=f"Commit {index}",
        committed_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=index),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[model], strategies=[STRATEGY], boards=["cpu"], total=1)
    result = actions.record_result(
        run, model=model[0], strategy=STRATEGY, board="cpu", report=report
    )
    actions.finish_run(run)
    return result


def _plan(report) -> dict:
    with open(report.artifacts["plan.json"]) as handle:
        return json.load(handle)


def _exact(text: str) -> int:
    """The byte count of a bytes cell's title: "111,360 bytes" -> 111360."""
    match = re.fullmatch(r"([\d,]+) bytes?", text)
    assert match, text
    return int(match.group(1).replace(",", ""))


PEAK_ROWS = """() => [...document.querySelectorAll("tr[data-peak-tensor]")].map((row) => ({
    id: row.dataset.peakTensor,
    producer: row.querySelector("td code").textContent.trim(),
    size: row.querySelector("td .bytes").title,
    offset: row.querySelectorAll("td")[2].textContent.trim(),
}))"""


def test_the_peak_instant_of_a_rewritten_plan_fits_its_arena_and_lists_merged_tensors_once(
    page, live_server, db, mobilenet, screenshot_dir
):
    # Given a real best-fit+rewrites result of a model whose in-place rewrites merge
    # tensors, recorded with its plan.json
    repository = actions.track_repository("tracked", "/nonexistent")
    result = _record(repository, 0, ("mobilenet", MOBILENET[0]), mobilenet)
    plan = _plan(mobilenet)

    # When its plan page is opened
    page.goto(f"{live_server.url}/results/{result.pk}/plan/")
    page.wait_for_selector("[data-timeline][data-ready='true']", timeout=10_000)
    page.screenshot(path=str(screenshot_dir / "plan-peak-rewrites.png"), full_page=True)

    # Then what planned bytes are made of is there to read, and adds up
    parts = page.locator("[data-planned-parts]")
    assert parts.is_visible()
    text = parts.inner_text()
    assert "arena (intermediates)" in text and "kernel workspace" in text and "outputs" in text
    arena, workspace, outputs = (
        _exact(parts.locator(f"[data-part='{key}'] > .bytes").get_attribute("title"))
        for key in ("arena", "workspace", "outputs")
    )
    assert arena == mobilenet.intermediate_bytes
    assert arena + workspace + outputs == mobilenet.planned_bytes

    # And the peak instant holds no more than the arena: merged tensors count once
    instant = page.locator("[data-peak-time]")
    assert instant.is_visible()
    peak_bytes = _exact(instant.locator(".bytes").get_attribute("title"))
    assert 0 < peak_bytes <= arena
    rows = page.evaluate(PEAK_ROWS)
    assert f"live in {len(rows)} tensor" in instant.inner_text()
    assert sum(_exact(row["size"]) for row in rows) == peak_bytes

    # And each stretch of the arena is one row: no tensor listed twice, no two rows over the
    # same bytes, and every row names what wrote it
    assert len({row["id"] for row in rows}) == len(rows)
    spans = sorted((int(row["offset"]), int(row["offset"]) + _exact(row["size"])) for row in rows)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False)), rows
    for row in rows:
        assert row["producer"] not in {"", "—", "–", "-"}, row

    # And a group merged in place is one row naming every producer, its other members none
    merged = [t for t in plan["peak"]["tensors"] if t.get("merged")]
    assert merged, plan["peak"]
    producers = {t["id"]: t["producer"] for t in plan["tensors"]}
    listed = {row["id"]: row for row in rows}
    for group in merged:
        row = listed[group["id"]]
        assert " → " in row["producer"]
        assert all(producers[member] in row["producer"] for member in group["merged"]), row
        assert not set(group["merged"][1:]) & listed.keys()
    assert page.problems == []


DIFF_ROWS = """() => [...document.querySelectorAll("table.plan-diff tbody tr")].map((row) => ({
    id: row.dataset.tensor,
    base: row.dataset.baseTensor ?? null,
    status: row.className,
    producer: row.querySelector("th code").textContent.trim(),
    change: row.querySelector("td[data-label='Change']").innerText.trim(),
}))"""

OUTLINED = """(side) => [...document.querySelectorAll(
    `[data-diff-timeline='${side}'] rect.tensor.changed`)].map((r) => r.dataset.tensor)"""


def test_the_plan_diff_of_an_inserted_layer_marks_its_tensors_new_and_names_producers(
    page, live_server, db, inserted, screenshot_dir
):
    # Given real plans of a conv stack before and after a layer was put in front of it: its
    # tensors take the names (alloc, fused_conv2d_add_relu.pad_temp) the old first layer had
    before, after = inserted
    repository = actions.track_repository("tracked", "/nonexistent")
    base = _record(repository, 0, ("stack", "stack.py:stack"), before)
    head = _record(repository, 1, ("stack", "stack.py:stack"), after, parent=base.commit.sha)
    base_plan, head_plan = _plan(before), _plan(after)
    tensors = {t["id"]: t for t in head_plan["tensors"] + head_plan["outputs"]}
    assert tensors["alloc"]["shape"] == [1, 3, 16, 16]  # the new 3-channel layer's result
    new = {name for name in tensors
           if name == "alloc" or name.startswith(f"{INSERTED_KERNEL}.")}
    assert len(new) > 1  # its output and its lifted temporaries

    # When the plan diff is opened
    page.goto(f"{live_server.url}/results/{base.pk}/diff/{head.pk}/")
    page.wait_for_selector("[data-diff-timeline='head'][data-ready='true']", timeout=10_000)
    page.screenshot(path=str(screenshot_dir / "plan-diff-inserted-layer.png"), full_page=True)
    rows = page.evaluate(DIFF_ROWS)

    # Then every row names the operator producing its tensor
    assert rows
    for row in rows:
        assert row["producer"] not in {"", "no producer named", "—", "–"}, row
        if row["status"] != "removed":
            assert row["producer"] == tensors[row["id"]]["producer"], row

    # And the inserted layer's tensors are new, each on its own, paired with nothing
    by_id = {row["id"]: row for row in rows}
    unlisted = new - by_id.keys()
    assert not unlisted, f"taken for tensors of the old graph, not listed as new: {unlisted}"
    for name in new:
        row = by_id[name]
        assert row["status"] == "added" and row["change"] == "new", row
        assert row["base"] is None, row
        assert row["producer"] == INSERTED_KERNEL
    assert f"{len(new)} new, 0 gone" in page.inner_text("[data-plan-summary]")

    # And every tensor of the old stack is paired with itself under its new name, unchanged:
    # none is taken for the inserted layer's, none reads as gone
    before_count = len(base_plan["tensors"]) + len(base_plan["outputs"])
    assert len(tensors) == before_count + len(new)
    counts = page.inner_text("dt:text-is('Tensors') + dd")
    assert counts.endswith(f"({before_count} unchanged)"), counts

    # And only the after-plan outlines them
    assert sorted(page.evaluate(OUTLINED, "head")) == sorted(new)
    assert page.evaluate(OUTLINED, "base") == []
    assert page.problems == []


def _consumers_unknown_until_asked() -> None:
    # The pages reuse the workers' answer for 15 s: ask them afresh.
    cache.delete(queue.CONSUMERS_KEY)


def test_the_boards_page_names_a_queue_no_worker_consumes(
    page, live_server, db, broker  # noqa: F811
):
    # Given a board whose worker reported it online, a real broker, and no worker running
    actions.mark_board_seen("cpu", {"status": "online"})
    _consumers_unknown_until_asked()

    # When the boards page is opened
    page.goto(f"{live_server.url}/boards/")

    # Then the board reads offline whatever its worker last said, and says why
    row = page.locator("tr[data-board='cpu']")
    assert "offline" in row.inner_text() and "online" not in row.inner_text()
    assert "no worker consumes its queue now" in row.inner_text()
    warning = row.locator("[data-unconsumed='board.cpu']")
    assert warning.is_visible()
    assert warning.inner_text() == "no worker consumes board.cpu now: its runs wait"
    # And the queue where runs are planned is named too
    planning = page.locator("[data-unconsumed='peakwatch']")
    assert planning.is_visible()
    assert "No worker consumes peakwatch" in planning.inner_text()
    assert page.problems == []


def test_a_finished_partial_run_reads_partial_with_the_count_when_opened(
    page, live_server, recorded_history
):
    # tests/browser/test_run_page.py follows the badge live as the run finishes; here the
    # run is over before the page is opened: the server renders the status, on the run page
    # and in the overview's list of runs.
    commit = recorded_history[-1].commit
    run = Run.objects.create(repository=commit.repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("small-cnn", "zoo:small_cnn")],
                      strategies=["none", "tvm-stock", "greedy-by-size"], boards=["cpu"],
                      total=3)
    for strategy in ("none", "tvm-stock"):
        actions.record_result(run, model="small-cnn", strategy=strategy, board="cpu",
                              report=fake_report(80_000, 1.0))
    actions.record_result(run, model="small-cnn", strategy="greedy-by-size", board="cpu",
                          report=report_of(error="the plan does not fit"))
    actions.finish_run(run)

    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    assert page.inner_text("[data-run-status]") == "partial: 1 of 3 failed"
    assert page.locator("[data-run-status] .status-partial").is_visible()

    page.goto(f"{live_server.url}/")
    badge = page.locator(f"tr:has(a[href='{run.get_absolute_url()}']) .status")
    assert badge.inner_text() == "partial: 1 of 3 failed"
    assert page.problems == []
