"""A tracked repository's model file may import torchvision, timm and transformers.

PyPI's torchvision is built for a CUDA torch and fails to import beside ours unless prepared
as the built-in ``torchvision:`` source prepares it; timm imports it, and so does transformers
when it is installed. The import child prepares all three before it runs the repository's
file. Runs here execute in process (the embedded default); every compile still goes through
the sandbox.
"""

from __future__ import annotations

import pytest

from dashboard import actions
from dashboard.models import Result, Run
from tests.helpers import record_head
from workers.boards.base import BoardOptions
from workers.boards.cpu import CpuBoard

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

#: One file importing all three (each import alone would fail the same way, and one model
#: keeps the compile short), called as a user calls it: without an attention mask (the
#: cumulative sum over bool of tests/tvm/sources/test_cumsum_over_bool.py).
MODEL = '''import timm
import torch
import torchvision
from transformers import LlamaConfig, LlamaForCausalLM

assert torchvision.models.squeezenet1_1 and timm.create_model


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def build():
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=16, use_cache=False,
    )
    return Logits(LlamaForCausalLM(config)), (torch.randint(0, 64, (1, 8)),)
'''

MANIFEST = '''[suite]
strategies = ["tvm-stock"]
boards = ["cpu"]

[[models]]
name = "llama"
source = "models/decoder.py:build"
'''


def test_a_model_file_may_import_torchvision_timm_and_transformers(
    empty_repo, monkeypatch, django_capture_on_commit_callbacks
):
    # What is under test is the import: the check against PyTorch still runs, timing and
    # the allocator measurements (a process each) do not.
    monkeypatch.setattr(
        CpuBoard, "compile_options", lambda self, job: BoardOptions(repeat=0, memory_configs=())
    )
    empty_repo.write("models/decoder.py", MODEL)
    empty_repo.write("peakwatch.toml", MANIFEST)
    empty_repo.commit("Track models built with torchvision, timm and transformers")
    commit = record_head(empty_repo.path, "tracked")

    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)  # eager: it runs here and now

    run.refresh_from_db()
    results = {r.model.name: r for r in Result.objects.filter(run=run).select_related("model")}
    errors = {name: r.error for name, r in results.items() if r.error}
    assert run.status == Run.Status.SUCCEEDED, (run.error, errors, run.log[-2000:])
    assert set(results) == {"llama"}
    for name, result in results.items():
        assert result.status == Result.Status.OK, (name, result.error)
        assert result.details["reference_check"] == "PyTorch (run in the import sandbox)", name
        assert 0 <= result.details["reference_max_abs_diff"] < 1e-4, name
