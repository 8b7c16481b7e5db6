"""A suite that lists toolchains, run by a real Celery worker: every model is compiled in
the sandbox under each toolchain's own TVM, and the Results say which."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.demo import commit_file, git, render_manifest
from dashboard.models import Result, Run
from tests.helpers import record_head
from tests.toolchains.conftest import RELEASE
from tests.workers.conftest import wait_for
from workers import sandbox

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

MODELS = {"small-cnn": {"channels": 4, "resolution": 16, "depth": 2}}
STRATEGIES = ["tvm-stock", "greedy-by-size"]


def _commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    manifest = render_manifest(MODELS, STRATEGIES).replace(
        "[suite]\n", f'[suite]\ntoolchains = ["", "{RELEASE}"]\n'
    )
    commit_file(repo, "peakwatch.toml", manifest, "Track one model under two TVMs",
                datetime.now(UTC))
    return record_head(repo)


@pytest.fixture
def finished_run(tmp_path, start_worker, monkeypatch):
    # A toolchain folder of its own: the worker creates the release during the run.
    monkeypatch.setenv("PEAKWATCH_TOOLCHAIN_DIR", str(tmp_path / "worker-toolchains"))
    commit = _commit(tmp_path)
    worker = start_worker()
    run = actions.start_run(commit)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 600, "the run to finish",
             [worker.log_path])
    run.refresh_from_db()
    return run, worker


def test_each_model_is_compiled_in_the_sandbox_under_every_toolchain(finished_run):
    run, worker = finished_run

    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.progress_done, run.progress_total) == (4, 4)
    results = Result.objects.filter(run=run).select_related("toolchain", "strategy")
    assert [r.error for r in results if r.status != "ok"] == []
    by_toolchain = {(r.toolchain.spec, r.strategy.name): r for r in results}
    assert set(by_toolchain) == {(s, t) for s in ("", RELEASE) for t in STRATEGIES}
    for strategy in STRATEGIES:
        old, own = by_toolchain[(RELEASE, strategy)], by_toolchain[("", strategy)]
        assert old.tvm_version == old.toolchain.tvm_version == "0.26.0"
        assert re.fullmatch(r"[0-9a-f]{7,40}", old.toolchain.tvm_git_hash)
        assert old.environment["tvm_git_hash"] == old.toolchain.tvm_git_hash
        # Set by the sandboxed child (planner.tvm.job) that compiled it.
        assert old.environment["toolchain"] == RELEASE
        assert own.tvm_version.startswith("0.27") and own.toolchain.spec == ""
        assert own.toolchain.tvm_git_hash != old.toolchain.tvm_git_hash
        assert old.outputs_match is True and old.planned_bytes > 0
        assert old.cache_key and old.cache_key != own.cache_key
    mode = "full" if sandbox.mode().full else "reduced"
    assert re.search(rf"sandbox \({mode}\): \S+/venv/bin/python -m planner\.tvm\.job",
                     open(worker.log_path).read())
    # The run's log says how the toolchain was made, and what was compiled with it.
    assert f"toolchain {RELEASE}: creating a virtual environment" in run.log
    assert f"toolchain {RELEASE}: installing {RELEASE}" in run.log
    assert re.search(rf"toolchain {re.escape(RELEASE)}: ready in \d+ s, TVM 0\.26\.0", run.log)
    assert f"small-cnn on cpu with {RELEASE}: tvm-stock, greedy-by-size" in run.log

    # Run again: each toolchain reuses its own compiles, never the other's.
    again = actions.start_run(run.commit)
    wait_for(lambda: Run.objects.get(pk=again.pk).is_finished, 300, "the rerun",
             [worker.log_path])
    again.refresh_from_db()
    assert again.status == Run.Status.SUCCEEDED, again.error
    for result in Result.objects.filter(run=again).select_related("reused_from__toolchain"):
        assert result.reused_from is not None
        assert result.reused_from.toolchain_id == result.toolchain_id
    assert f"small-cnn on cpu with {RELEASE}: unchanged, reused" in again.log


@pytest.fixture
def run_in_process(tmp_path, settings, toolchain_root, release_0_26):
    """The same suite run in process (the embedded default), with the session's toolchain
    (made by its fixture, whatever order the tests run in)."""
    settings.PEAKWATCH = {**settings.PEAKWATCH, "TOOLCHAIN_DIR": str(toolchain_root)}
    run = actions.start_run(_commit(tmp_path))
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def test_the_comparison_page_shows_the_commit_under_both_toolchains_with_plan_diffs(
    run_in_process, client
):
    run = run_in_process
    url = reverse("toolchain-compare", args=[run.repository.name, run.commit.sha])

    data = client.get(url, {"base": RELEASE, "head": "", "format": "json"}).json()
    page = client.get(url, {"base": RELEASE, "head": ""})

    assert page.status_code == 200
    assert [(r["strategy"], r["board"]) for r in data["rows"]] == [
        ("greedy-by-size", "cpu"), ("tvm-stock", "cpu")]
    for row in data["rows"]:
        base = Result.objects.get(pk=row["base_result"])
        head = Result.objects.get(pk=row["head_result"])
        assert (base.toolchain.spec, head.toolchain.spec) == (RELEASE, "")
        assert row["base_bytes"] == base.planned_bytes and row["head_bytes"] == head.planned_bytes
        diff = reverse("plan-diff", args=[base.pk, head.pk])
        assert diff in page.content.decode()
        assert client.get(diff).status_code == 200
    assert f"{RELEASE}: 0.26.0 (git" in page.content.decode()
    # Asked for a toolchain the commit was not compiled with: the page names those it was.
    answer = client.get(url, {"base": "apache-tvm==0.19.0", "head": ""})
    assert answer.status_code == 400
    assert "no results with toolchain 'apache-tvm==0.19.0'" in answer.content.decode()
    assert RELEASE in answer.content.decode()
