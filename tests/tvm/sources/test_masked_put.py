"""``x[mask] = value`` with a boolean mask over ``x``'s leading dimensions (Gemma3 zeroes its
image tokens so) stopped TVM 0.27's importer: ``IndexPut requires each index tensor to have
integer dtype``. It converts to what torch computes, a ``where`` (issue 59)."""

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = '''import torch


class MaskedPut(torch.nn.Module):
    """Ids equal to 3 become 0 (the mask covers every dimension), then rows of the
    embedding whose id was odd are set to -1.5 (a mask over the leading two of three) and
    rows whose id was 5 get 2.0 added (accumulate)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 4)

    def forward(self, ids):
        ids = ids % 8
        ids[ids == 3] = 0
        x = self.embed(ids)
        x[ids % 2 == 1] = -1.5
        x.index_put_((ids == 5,), torch.tensor(2.0), accumulate=True)
        return x


def masked_put():
    torch.manual_seed(0)
    return MaskedPut(), (torch.arange(16).reshape(2, 8) % 8,)
'''


@pytest.fixture
def models(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def test_a_boolean_mask_put_converts_to_what_torch_computes(models):
    reports = compile_model(
        ModelSource(str(models / "models.py") + ":masked_put"), [STOCK, "best-fit"],
        repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff == 0.0
