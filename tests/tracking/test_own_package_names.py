"""A repository whose top-level packages have Peakwatch's names builds like any other.

The sandboxed child runs ``python -m planner.tvm.job`` in the checkout: a checkout's own
``planner/`` first on the path would have stood for Peakwatch's, and every build failed
("No module named 'planner.tvm'"). Runs here execute in process (the embedded default);
every compile still goes through the sandbox.
"""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Result, Run
from tests.helpers import record_head
from workers.boards.base import BoardOptions
from workers.boards.cpu import CpuBoard

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

#: The repository's own packages, named as Peakwatch's are. Importing any of them as
#: Peakwatch's would fail loudly: none of these names exists in Peakwatch's.
OWN = {
    "planner/__init__.py": "REPOSITORY_PLANNER = True\n",
    "workers/__init__.py": "WIDTH = 8\n",
    "dashboard/__init__.py": "raise RuntimeError('the job imported the checkout's dashboard')\n",
}

MODEL = '''import torch

import workers
from models.blocks import block


def build():
    torch.manual_seed(0)
    return block(workers.WIDTH), (torch.randn(2, workers.WIDTH),)
'''

BLOCKS = '''import torch


def block(width):
    return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU())
'''

#: Asks for the repository's planner/ under the name Peakwatch's planner has in a job.
CLASHING = '''from planner import REPOSITORY_PLANNER


def build():
    raise AssertionError("unreachable")
'''

MANIFEST = '''[suite]
strategies = ["tvm-stock", "best-fit"]
boards = ["cpu"]

[[models]]
name = "mlp"
source = "models/net.py:build"

[[models]]
name = "clash"
source = "models/clash.py:build"
'''


def test_a_repository_with_planner_workers_and_dashboard_packages_builds(
    empty_repo, monkeypatch, django_capture_on_commit_callbacks
):
    # What is under test is where imports come from: timing and the allocator
    # measurements (a process each) do not change that.
    monkeypatch.setattr(
        CpuBoard, "compile_options", lambda self, job: BoardOptions(repeat=0, memory_configs=())
    )
    for path, text in OWN.items():
        empty_repo.write(path, text)
    empty_repo.write("models/__init__.py", "")
    empty_repo.write("models/blocks.py", BLOCKS)
    empty_repo.write("models/net.py", MODEL)
    empty_repo.write("models/clash.py", CLASHING)
    empty_repo.write("peakwatch.toml", MANIFEST)
    empty_repo.commit("Packages named planner, workers and dashboard of our own")
    commit = record_head(empty_repo.path, "tracked")

    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)  # eager: it runs here and now

    run.refresh_from_db()
    results = Result.objects.filter(run=run).select_related("model", "strategy")
    by_model: dict[str, list[Result]] = {}
    for result in results:
        by_model.setdefault(result.model.name, []).append(result)
    mlp = by_model["mlp"]
    assert [r.status for r in mlp] == [Result.Status.OK] * 2, [(r.error, run.log[-2000:])
                                                                for r in mlp]
    assert all(r.details["reference_check"] == "PyTorch (run in the import sandbox)"
               for r in mlp)
    # The one model that asks for its planner/ by that name fails, and says why.
    for result in by_model["clash"]:
        assert result.status == Result.Status.FAILED
        assert "cannot import name 'REPOSITORY_PLANNER' from 'planner'" in result.error
        assert "rename it" in result.error
    assert run.status == Run.Status.PARTIAL
