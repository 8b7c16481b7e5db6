"""The compile cache through a real ``celery worker``: a configuration read by a program the
model starts is seen by the worker's view of the checkout, so changing only it compiles the
model again, and changing a file nothing read reuses the figures."""

from __future__ import annotations

import pytest

from dashboard import actions, gitrepo
from dashboard.models import Result, Run
from tests.workers.conftest import wait_for
from workers.sandbox import view

pytestmark = [
    pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow,
    pytest.mark.skipif(bool(view.unavailable()), reason="no FUSE view on this host"),
]

MANIFEST = '''[suite]
strategies = ["greedy-by-size"]
boards = ["cpu"]

[[models]]
name = "net"
source = "models/net.py:build"
'''

#: Reads its width with cat, found by its absolute path: nothing in this process opens it.
MODEL = '''import shutil
import subprocess

from planner.tvm.zoo.mlp import mlp


def build():
    width = subprocess.run([shutil.which("cat"), "config/width.txt"], capture_output=True,
                           check=True).stdout
    return mlp(features=8, hidden=(int(width),), classes=2)
'''


def test_a_worker_compiles_again_what_a_program_read_and_reuses_the_rest(
    empty_repo, start_worker
):
    repo = empty_repo
    repo.write("peakwatch.toml", MANIFEST)
    repo.write("models/net.py", MODEL)
    repo.write("config/width.txt", "16")
    repo.write("config/notes.txt", "unread")
    repository = actions.track_repository("through-worker", str(repo.path))
    worker = start_worker()

    def run(message: str) -> Result:
        info = gitrepo.commit_info(repo.path, repo.commit(message))
        commit = actions.record_commit(
            repository, sha=info.sha, parent_sha=info.parent_sha, branch="main",
            author=info.author, message=info.message, committed_at=info.committed_at,
        )
        started = actions.start_run(commit)
        wait_for(lambda: Run.objects.get(pk=started.pk).is_finished, 240,
                 f"the run of {message!r}", [worker.log_path])
        done = Run.objects.get(pk=started.pk)
        assert done.status == Run.Status.SUCCEEDED, (done.error, done.log[-2000:])
        return Result.objects.get(run=done)

    first = run("Width 16")
    repo.write("config/width.txt", "256")
    wider = run("Width 256, in the config alone")
    repo.write("config/notes.txt", "changed")
    notes = run("Change a file nothing reads")

    assert first.reads.get("observed_by") and "config/width.txt" in first.reads["files"]
    assert not wider.is_reused and wider.planned_bytes > first.planned_bytes
    assert notes.reused_from == wider
