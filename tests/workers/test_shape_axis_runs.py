"""A tracked repository's model with a shape axis, run in process: real git, TVM, database.

Each (strategy, point) of the manifest is a Result of its own, measured at that point, with
what TVM's planner reserves when the model is built once for the whole range.
"""

from datetime import UTC, datetime

import pytest

from dashboard import actions
from dashboard.demo import commit_file, git
from dashboard.models import Result, Run, Series
from tests.helpers import record_head
from tests.tracking.conftest import FIRST_FIT_PLANNER

#: TVM's own planner (built whatever is asked) and a repository's: each plans points its own
#: way. Another of ours would add builds and measurements, and prove nothing new.
STRATEGIES = ("tvm-stock", "repo:planning/mine.py:plan")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MANIFEST = """
[suite]
strategies = ["tvm-stock", "repo:planning/mine.py:plan"]
boards = ["cpu"]

[[models]]
name = "pool"
source = "zoo:pool_reuse"
params = { resolution = 16, channels = 4, dynamic = true }
shapes = { h = [8, 16], w = "h" }
"""


def test_a_run_records_a_result_per_strategy_and_shape_point(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "planning").mkdir()
    commit_file(repo, "planning/mine.py", FIRST_FIT_PLANNER, "A planner", datetime.now(UTC))
    commit_file(repo, "peakwatch.toml", MANIFEST, "Track case 1 at two sizes", datetime.now(UTC))
    commit = record_head(repo)

    run = actions.start_run(commit)

    run.refresh_from_db()
    results = Result.objects.filter(run=run).select_related("strategy")
    errors = [(r.strategy.name, r.shape_label, r.error) for r in results if r.error]
    assert run.status == Run.Status.SUCCEEDED, (run.error, errors, run.log[-2000:])
    results_expected = len(STRATEGIES) * 2
    assert (run.progress_done, run.progress_total) == (results_expected, results_expected)
    found = {(r.strategy.name, r.shape_label): r for r in results}
    assert set(found) == {
        (s, p) for s in STRATEGIES for p in ("h=8,w=8", "h=16,w=16")
    }
    for (strategy, at), result in found.items():
        assert result.outputs_match is True, (strategy, at)
        assert result.shape_point == {"h": int(at[2:at.index(",")]), "w": result.shape_point["h"]}
        assert result.reserved_at_bound_bytes is not None and result.reserved_at_bound_bytes > 0
        # A point's arena never needs more than TVM reserves for the whole range.
        assert result.intermediate_bytes <= result.reserved_at_bound_bytes, (strategy, at)
        assert result.artifact_named("plan.json") is not None, (strategy, at)
    # Four times the pixels: the larger point needs more, under every strategy.
    # The repository's planner planned each point's own problem, not the bound's.
    for strategy in STRATEGIES:
        large, small = found[strategy, "h=16,w=16"], found[strategy, "h=8,w=8"]
        assert large.planned_bytes > small.planned_bytes
    assert "at h=8,w=8; h=16,w=16" in run.log
    assert Series.objects.filter(model__name="pool").count() == results_expected
