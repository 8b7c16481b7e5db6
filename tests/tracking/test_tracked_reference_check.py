"""A tracked run checks TVM's stock build against PyTorch, though its compile has no torch.

The import runs the repository's model file and PyTorch on the compile's own draws in the
sandbox; the compile, which imports nothing of the repository, checks the stock build
against what it handed over. Runs here execute in process (the embedded default); every
compile still goes through the sandbox.
"""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Result
from tests.helpers import record_head

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TINY_TORCH_MODEL = '''import torch
from torch import nn


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 1))
    return model, (torch.randn(1, 3, 8, 8),)
'''

MANIFEST = '''[suite]
strategies = ["tvm-stock", "greedy-by-size"]
boards = ["cpu"]

[[models]]
name = "tiny-torch"
source = "models/tiny.py:build"
'''


def test_a_tracked_torch_model_records_its_stock_build_checked_against_pytorch(
    empty_repo, client, django_capture_on_commit_callbacks
):
    empty_repo.write("models/tiny.py", TINY_TORCH_MODEL)
    empty_repo.write("peakwatch.toml", MANIFEST)
    empty_repo.commit("Track a tiny PyTorch model")
    commit = record_head(empty_repo.path, "tracked")

    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)  # eager: it runs here and now

    results = Result.objects.filter(run=run).select_related("strategy")
    assert results.count() == 2
    for result in results:
        assert result.status == Result.Status.OK, result.error
        assert result.details["reference_check"] == "PyTorch (run in the import sandbox)"
        assert 0 <= result.details["reference_max_abs_diff"] < 1e-4
    page = client.get(run.get_absolute_url()).content.decode()
    assert "data-reference" in page
    assert "vs PyTorch (run in the import sandbox)" in page
