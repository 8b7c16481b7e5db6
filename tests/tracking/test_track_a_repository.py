"""A repository tracked for real: its model files, its pipeline and its own planner.

The example repository (examples/tracked-repository) is committed, tracked with ``manage.py
track`` and run with ``manage.py run --wait`` by a real Celery worker, commit after commit;
every compile runs in the real sandbox. Each kind of change moves its own series.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from dashboard.models import Repository, Result, Run
from tests.tracking.conftest import FIRST_FIT_PLANNER, FP16_PIPELINE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

REPO_PLANNER = "repo:planning/mine.py:plan"


def planned(sha: str) -> dict[tuple[str, str], int]:
    return {
        (r.model.name, r.strategy.name): r.planned_bytes
        for r in Result.objects.filter(commit__sha=sha).select_related("model", "strategy")
    }


def test_model_pipeline_and_planner_changes_each_move_their_series(
    example_repo, start_worker, capsys
):
    worker = start_worker()
    call_command("track", "example", str(example_repo.path))
    out = capsys.readouterr().out
    repository = Repository.objects.get(name="example")
    assert "/webhooks/github/example" in out and repository.webhook_secret in out

    shas = [_head(example_repo)]
    toml = example_repo.read("peakwatch.toml")
    example_repo.write("peakwatch.toml", toml.replace("width = 8", "width = 16"))
    shas.append(example_repo.commit("Widen the ConvNet to 16 channels"))
    example_repo.write("compile/pipeline.py", FP16_PIPELINE)
    shas.append(example_repo.commit("Compile in half precision"))
    example_repo.write("planning/mine.py", FIRST_FIT_PLANNER)
    shas.append(example_repo.commit("Plan with first fit by size"))

    for sha in shas:
        call_command("run", "example", "--sha", sha, "--wait")
        out = capsys.readouterr().out
        run = Run.objects.get(commit__sha=sha)
        assert run.status == Run.Status.SUCCEEDED, (run.error, run.log, _log(worker))
        assert "convnet" in out and REPO_PLANNER in out

    first, wider, half, first_fit = (planned(sha) for sha in shas)
    for figures in (first, wider, half, first_fit):
        assert len(figures) == 6 and None not in figures.values()
    # Results carry the manifest's strategy string, the repository planner included.
    assert ("convnet", REPO_PLANNER) in first

    # A model change moves that model's series, under every strategy, and no other.
    for strategy in ("tvm-stock", "greedy-by-size", REPO_PLANNER):
        assert wider[("convnet", strategy)] > first[("convnet", strategy)]
        assert wider[("mlp", strategy)] == first[("mlp", strategy)]
    # A pipeline change moves every strategy of every model it transforms.
    for strategy in ("tvm-stock", "greedy-by-size", REPO_PLANNER):
        for model in ("convnet", "mlp"):
            assert half[(model, strategy)] < wider[(model, strategy)]
    # A planner change moves only the repository planner's series.
    assert first_fit[("convnet", REPO_PLANNER)] < half[("convnet", REPO_PLANNER)]
    assert first_fit[("convnet", "tvm-stock")] == half[("convnet", "tvm-stock")]
    assert first_fit[("convnet", "greedy-by-size")] == half[("convnet", "greedy-by-size")]
    # Every build was checked against TVM's stock build.
    assert not Result.objects.exclude(outputs_match=True).exists()
    # And that against the framework, after the repository's pipeline: in half precision it
    # differs from it by design, which is said, not refused.
    for result in Result.objects.filter(commit__sha__in=shas):
        check = result.details["reference_check"]
        assert check.endswith("(run in the import sandbox), after the repository's pipeline")
    assert max(
        r.details["reference_max_abs_diff"] for r in Result.objects.filter(commit__sha=shas[2])
    ) > 1e-4


def _head(repo) -> str:
    from dashboard.demo import git

    return git(repo.path, "rev-parse", "HEAD")


def _log(worker) -> str:
    return open(worker.log_path).read()[-3000:]
