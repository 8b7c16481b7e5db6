"""Repository planners and manifests that go wrong fail their Results or runs, clearly.

Runs here execute in process (the embedded default); every compile still goes through the
sandbox.
"""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Result, Run
from tests.helpers import record_head

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TINY = 'source = "zoo:small_cnn"\nparams = { channels = 2, resolution = 8, depth = 3 }\n'

OVERLAPPING = '''def plan(problem):
    return {buffer.id: 0 for buffer in problem.buffers}
'''
MISSING = '''def plan(problem):
    return {buffer.id: 0 for buffer in problem.buffers[1:]}
'''
SLOW = '''import time


def plan(problem):
    time.sleep(600)
'''


@pytest.fixture
def run_commit(django_capture_on_commit_callbacks):
    def run(repo, name="tracked") -> Run:
        commit = record_head(repo.path, name)
        with django_capture_on_commit_callbacks(execute=True):
            started = actions.start_run(commit)  # eager: it runs here and now
        started.refresh_from_db()
        return started

    return run


def test_a_repository_planner_is_validated_and_time_limited(empty_repo, settings, run_commit):
    settings.PEAKWATCH = {
        **settings.PEAKWATCH, "SANDBOX": {**settings.PEAKWATCH["SANDBOX"], "PLANNER_SECONDS": 3}
    }
    empty_repo.write("planning/overlap.py", OVERLAPPING)
    empty_repo.write("planning/missing.py", MISSING)
    empty_repo.write("planning/slow.py", SLOW)
    strategies = ["tvm-stock", "repo:planning/overlap.py:plan", "repo:planning/missing.py:plan",
                  "repo:planning/slow.py:plan", "repo:planning/gone.py:plan"]
    empty_repo.write("peakwatch.toml", "[suite]\nstrategies = [" + ", ".join(
        f'"{s}"' for s in strategies) + ']\n\n[[models]]\nname = "tiny"\n' + TINY)
    empty_repo.commit("Try three planners of our own")

    run = run_commit(empty_repo)

    errors = dict(Result.objects.filter(run=run).values_list("strategy__name", "error"))
    assert errors.get("tvm-stock") == "", (run.error, errors)
    assert "InvalidPlan" in errors["repo:planning/overlap.py:plan"]
    assert "share addresses" in errors["repo:planning/overlap.py:plan"]
    assert "InvalidPlan" in errors["repo:planning/missing.py:plan"]
    assert "no offset" in errors["repo:planning/missing.py:plan"]
    assert "ran past its time limit of 3 s" in errors["repo:planning/slow.py:plan"]
    assert "no file planning/gone.py in the repository" in errors["repo:planning/gone.py:plan"]
    # Failed Results are Results: the run finished, and says how many failed.
    assert run.status == Run.Status.PARTIAL and run.progress_done == len(strategies)
    assert run.status_text == "partial: 4 of 5 failed"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ('name = "a/b"\n' + TINY, "model name 'a/b'"),
        ('name = "abs"\nsource = "/etc/passwd.py:build"\n', "paths are relative"),
        ('name = "up"\nsource = "../outside.py:build"\n', "stay inside it"),
        ('name = "x"\nsource = "models/x.py:build"\n[suite]\npipeline = "/tmp/p.py:passes"\n',
         "paths are relative"),
    ],
)
def test_a_bad_manifest_fails_its_run_with_a_clear_message_and_breaks_no_page(
    empty_repo, client, model, message, run_commit
):
    empty_repo.write("peakwatch.toml", "[[models]]\n" + model)
    empty_repo.commit("A manifest that cannot work")

    run = run_commit(empty_repo)

    assert run.status == Run.Status.FAILED
    assert message in run.error
    for url in ("/", "/api/models/", "/api/runs/", run.get_absolute_url(), "/alerts/"):
        assert client.get(url).status_code == 200, url


def test_a_manifest_past_its_size_limit_is_refused_before_it_is_read(empty_repo, run_commit):
    # Valid TOML: what refuses it is its size (a 256 MiB one was parsed whole).
    empty_repo.write("peakwatch.toml", "# padding\n" * 200_000 + "[[models]]\n" + TINY)
    empty_repo.commit("A manifest of two megabytes")

    run = run_commit(empty_repo)

    assert run.status == Run.Status.FAILED
    assert "peakwatch.toml at" in run.error and "has 2,000,089 bytes" in run.error
    assert "PEAKWATCH_GIT_FILE_BYTES=1048576" in run.error


def test_a_model_file_that_leaves_the_tree_through_a_link_is_refused(
    empty_repo, tmp_path, run_commit
):
    outside = tmp_path / "outside.py"
    outside.write_text("def build():\n    raise SystemExit('ran code outside the tree')\n")
    (empty_repo.path / "models").mkdir()
    (empty_repo.path / "models" / "net.py").symlink_to(outside)
    empty_repo.write(
        "peakwatch.toml", '[[models]]\nname = "linked"\nsource = "models/net.py:build"\n'
    )
    empty_repo.commit("Link a model from elsewhere")

    run = run_commit(empty_repo)

    # The checkout refuses the link itself: nothing of the tree is written, nothing runs.
    assert run.status == Run.Status.FAILED
    assert "unsafe entry" in run.error and "models/net.py" in run.error
    assert "ran code outside the tree" not in run.log + run.error
