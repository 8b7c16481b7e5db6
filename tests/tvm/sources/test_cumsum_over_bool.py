"""A cumulative sum over booleans or narrow integers is imported with torch's dtype (int64),
so it builds. A decoder called without an attention mask, which runs one, is built and
checked against PyTorch through a tracked run: tests/tracking/test_model_file_libraries.py."""

import numpy as np
import torch
import tvm
from tvm import relax

from planner.tvm.sources.python_file import PythonSourceError, export_to_relax


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
