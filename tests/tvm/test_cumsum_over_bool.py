"""A cumulative sum over booleans or narrow integers is imported with torch's dtype (int64),
so it builds, and a decoder called without an attention mask compiles and matches PyTorch."""

from pathlib import Path

import numpy as np
import pytest
import torch
import tvm
from tvm import relax

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.zoo import ModelSource
from planner.tvm.zoo.python_source import PythonSourceError, export_to_relax

MODELS = Path(__file__).with_name("torch_models.py")


class _Scans(torch.nn.Module):
    def forward(self, x, counts):
        return (x > 0).cumsum(-1), counts.cumsum(0), x.cumsum(1), (x > 0).cumprod(-1)


def test_a_cumsum_over_bool_counts_in_int64_as_torch_does():
    x = torch.tensor([[0.5, -1.0, 2.0, 3.0], [-0.5, 1.0, -2.0, 0.25]])
    counts = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=torch.int32)

    mod = export_to_relax(_Scans(), (x, counts), PythonSourceError, "scans")
    executable = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(executable, tvm.cpu())
    outputs = vm["main"](tvm.runtime.tensor(x.numpy()), tvm.runtime.tensor(counts.numpy()))

    expected = _Scans()(x, counts)
    assert [str(field.dtype) for field in mod["main"].ret_ty.fields] == [
        "int64", "int64", "float32", "int64"
    ]
    for got, want in zip(outputs, expected, strict=True):
        assert got.numpy().dtype == want.numpy().dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.slow
def test_a_llama_called_without_a_mask_builds_and_matches_pytorch():
    pytest.importorskip("transformers")

    reports = compile_model(
        ModelSource(f"{MODELS}:llama_without_mask", {"seq": 8}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.ok, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        assert 0 <= report.reference_max_abs_diff < 1e-4
