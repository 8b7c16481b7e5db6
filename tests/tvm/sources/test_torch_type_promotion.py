"""Elementwise operators of two operands compute in torch's type, whatever the types of
their operands: torch's promotion table over integer and float tensors, 0-d tensors and
Python numbers, built and run, every result's dtype and value equal to torch's. The
importer alone refused an int64 tensor floor-divided by a Python number (GraniteMoE's and
Llama4's chunked attention: ``Binary operators must have the same datatype``)."""

import itertools
import operator

import numpy as np
import pytest
import torch
import tvm
from tvm import relax

from planner.tvm.sources.python_file import PythonSourceError, export_to_relax

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float32,
          torch.float64]
#: Small positive values: no product overflows int8 and no divisor is 0.
BASE = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "remainder": torch.remainder, "maximum": torch.maximum,
    "lt": operator.lt, "eq": operator.eq,
}
def _pairs():
    for (left, right), name in itertools.product(itertools.product(DTYPES, repeat=2), OPERATORS):
        yield left, right, name


class _Table(torch.nn.Module):
    def forward(self, *tensors):
        by_dtype = dict(zip(DTYPES, tensors[: len(DTYPES)], strict=True))
        zero_d = tensors[len(DTYPES):]
        out = []
        for left, right, name in _pairs():
            out.append(OPERATORS[name](by_dtype[left], by_dtype[right]))
        for dtype, name in itertools.product(DTYPES, ("add", "mul", "div", "floordiv", "lt")):
            for number in (3, 0.5):
                out.append(OPERATORS[name](by_dtype[dtype], number))
            for other in zero_d:
                out.append(OPERATORS[name](by_dtype[dtype], other))
        return tuple(out)


@pytest.fixture(scope="module")
def table():
    inputs = (*(BASE.to(dtype) for dtype in DTYPES), torch.tensor(3),
              torch.tensor(0.5, dtype=torch.float64))
    mod = export_to_relax(_Table(), inputs, PythonSourceError, "promotion")
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    outputs = vm["main"](*(tvm.runtime.tensor(x.numpy()) for x in inputs))
    return outputs, _Table()(*inputs)


def test_every_result_has_torchs_dtype_and_value(table):
    outputs, expected = table

    assert len(outputs) == len(expected)
    for index, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert str(got.numpy().dtype) == str(want.numpy().dtype), index
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=str(index))


def test_an_int64_tensor_floor_divided_by_a_number_stays_int64():
    class Chunks(torch.nn.Module):
        def forward(self, x):
            return torch.arange(x.shape[0]) // 4

    x = torch.zeros(16)
    mod = export_to_relax(Chunks(), (x,), PythonSourceError, "chunks")
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())

    got = vm["main"](tvm.runtime.tensor(x.numpy())).numpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, Chunks()(x).numpy())


class _Rounding(torch.nn.Module):
    def forward(self, x, signs):
        two = torch.tensor(2, dtype=torch.int32)
        return (
            torch.div(x, 2, rounding_mode="trunc"), torch.div(x, two, rounding_mode="trunc"),
            torch.div(x.float(), 2, rounding_mode="trunc"), torch.div(x, 2, rounding_mode="floor"),
            x // signs, torch.remainder(x, signs), x / two,
        )


def test_division_rounds_negative_numbers_as_torch_does():
    x = torch.tensor([-7, -3, 3, 7])
    signs = torch.tensor([2, -2, 2, -2], dtype=torch.int32)
    mod = export_to_relax(_Rounding(), (x, signs), PythonSourceError, "rounding")
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())

    outputs = vm["main"](tvm.runtime.tensor(x.numpy()), tvm.runtime.tensor(signs.numpy()))
    for got, want in zip(outputs, _Rounding()(x, signs), strict=True):
        assert got.numpy().dtype == want.numpy().dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
