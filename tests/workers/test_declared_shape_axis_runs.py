"""A tracked repository's model file that leaves its sequence length static, measured at two
lengths because its manifest says where the length is (issue 31): real git, sandboxed
import and compile, TVM and the database.
"""

from datetime import UTC, datetime

import pytest

from dashboard import actions
from dashboard.demo import commit_file, git
from dashboard.models import Result, Run
from tests.helpers import record_head

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: As a user writes it: torch.nn's own attention, nothing of Peakwatch.
ENCODER = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden=16, heads=2):
        super().__init__()
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(hidden, 32), nn.GELU(), nn.Linear(32, hidden))
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, tokens):
        attended, _ = self.attention(tokens, tokens, tokens, need_weights=False)
        x = self.norm1(tokens + attended)
        return self.norm2(x + self.mlp(x))


def build(seq: int = 32):
    torch.manual_seed(0)
    return Block(), (torch.randn(1, seq, 16),)
'''

MANIFEST = """
[suite]
strategies = ["tvm-stock"]
boards = ["cpu"]

[[models]]
name = "encoder"
source = "models/encoder.py:build"
shapes = { seq = [8, 16] }
dims = { seq = "tokens:1" }
"""

STRATEGIES = ("tvm-stock",)


def test_a_model_file_told_where_its_length_is_gets_a_result_at_each_length(tmp_path):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit_file(repo, "models/encoder.py", ENCODER, "An encoder block", datetime.now(UTC))
    commit_file(repo, "peakwatch.toml", MANIFEST, "Measure it at two lengths", datetime.now(UTC))

    run = actions.start_run(record_head(repo))

    run.refresh_from_db()
    results = Result.objects.filter(run=run).select_related("strategy")
    errors = [(r.strategy.name, r.shape_label, r.error) for r in results if r.error]
    assert run.status == Run.Status.SUCCEEDED, (run.error, errors, run.log[-2000:])
    found = {(r.strategy.name, r.shape_label): r for r in results}
    assert set(found) == {(s, p) for s in STRATEGIES for p in ("seq=8", "seq=16")}
    for (strategy, at), result in found.items():
        assert result.outputs_match is True, (strategy, at)
        assert result.shape_point == {"seq": int(at.removeprefix("seq="))}
        assert result.reserved_at_bound_bytes > 0, (strategy, at)
    for strategy in STRATEGIES:
        assert found[strategy, "seq=8"].planned_bytes < found[strategy, "seq=16"].planned_bytes


def test_a_point_that_fails_in_a_tracked_run_says_why(tmp_path):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit_file(repo, "models/encoder.py", ENCODER, "An encoder block", datetime.now(UTC))
    # The input is called tokens: the manifest's name finds no input.
    wrong = MANIFEST.replace('"tokens:1"', '"input_ids:1"').replace(
        '["tvm-stock", "greedy-by-size"]', '["tvm-stock"]'
    )
    commit_file(repo, "peakwatch.toml", wrong, "Measure it at two lengths", datetime.now(UTC))

    run = actions.start_run(record_head(repo))

    results = Result.objects.filter(run=run)
    assert sorted(r.shape_label for r in results) == ["seq=16", "seq=8"]
    for result in results:
        assert "no report" not in result.error
        assert "dims.seq = 'input_ids:1': encoder.py:build's module has no input named " \
            "'input_ids'; its inputs (name and position): tokens (0)" in result.error
