"""A run executed in process (the embedded default): real git, real TVM, real database."""

import json
from datetime import UTC, datetime

import pytest

from dashboard import actions
from dashboard.demo import commit_file, create_demo_repository, git, render_manifest
from dashboard.models import Artifact, Result, Run
from tests.helpers import record_head

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TINY = [
    ("Track two tiny models",
     {"small-cnn": {"channels": 4, "resolution": 16, "depth": 2},
      "residual-cnn": {"channels": 4, "resolution": 16, "blocks": 1}}),
]


def test_it_records_every_model_and_strategy_with_real_measurements(tmp_path):
    create_demo_repository(tmp_path / "repo", TINY)
    commit = record_head(tmp_path / "repo")

    run = actions.start_run(commit)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.progress_done, run.progress_total) == (6, 6)
    # Which TVM compiled each model reads in the log, the worker's own included.
    assert "residual-cnn on cpu with the worker's TVM 0.27" in run.log
    results = Result.objects.filter(run=run)
    assert results.count() == 6
    for result in results:
        assert result.status == Result.Status.OK, result.error
        assert result.outputs_match is True
        assert result.planned_bytes > 0
        assert result.latency_median_ms > 0
        assert result.tvm_version.startswith("0.27")
    by_strategy = {r.strategy.name: r for r in results.filter(model__name="residual-cnn")}
    # No reuse can never beat a plan with reuse; the bound holds for every plan.
    assert by_strategy["none"].planned_bytes > by_strategy["greedy-by-size"].planned_bytes
    assert by_strategy["greedy-by-size"].intermediate_bytes >= by_strategy[
        "greedy-by-size"].lower_bound_bytes
    plan = Artifact.objects.get(result=by_strategy["greedy-by-size"], name="plan.json")
    document = json.loads(plan.file.read())
    assert document["strategy"] == "greedy-by-size"
    assert all(t["offset"] is not None for t in document["tensors"])


def test_it_fails_the_run_with_a_clear_error_when_the_manifest_is_broken(tmp_path):
    repo = tmp_path / "repo"
    create_demo_repository(repo, TINY)
    (repo / "peakwatch.toml").write_text("[suite\n")
    git(repo, "commit", "-qam", "Break the manifest")
    commit = record_head(repo)

    run = actions.start_run(commit)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "not valid TOML" in run.error


def test_it_records_a_failed_result_for_a_model_that_does_not_build(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    text = render_manifest({"small-cnn": {"channels": 4, "resolution": 16}}, ["tvm-stock"])
    commit_file(repo, "peakwatch.toml", text.replace("channels = 4", "chanels = 4"),
                "Misspell a parameter", datetime.now(UTC))
    commit = record_head(repo)

    run = actions.start_run(commit)

    run.refresh_from_db()
    result = Result.objects.get(run=run)
    # Its only result failed: nothing of the run succeeded.
    assert (run.status, run.status_text) == (Run.Status.FAILED, "failed: none of 1 succeeded")
    assert not run.error
    assert result.status == Result.Status.FAILED
    assert "chanels" in result.error
