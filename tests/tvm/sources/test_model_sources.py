"""Model sources beyond the zoo: ONNX files and ``module.py:factory`` Python factories."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from tests.tvm.conftest import compile_small

REPO = Path(__file__).resolve().parents[3]
TORCH_FACTORY = "tests/tvm/sources/data/torch_model.py:tiny_residual"
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (pip install torch==2.13.0)",
)


@pytest.mark.slow
def test_it_compiles_an_onnx_file_under_every_strategy(onnx_model_path):
    reports = compile_small(ModelSource(str(onnx_model_path)))

    for strategy, report in reports.items():
        assert report.error is None, f"{strategy}: {report.error}"
        assert report.outputs_match is True, strategy
    assert reports["none"].planned_bytes >= reports["greedy-by-size"].planned_bytes


def test_tvm_stocks_build_of_an_onnx_file_is_checked_against_onnxruntime(onnx_model_path):
    reports = compile_small(ModelSource(str(onnx_model_path)), ["tvm-stock"])

    stock = reports["tvm-stock"]
    assert stock.error is None
    assert stock.reference_check == "onnxruntime"
    assert stock.reference_max_abs_diff is not None and stock.reference_max_abs_diff < 1e-4


def test_it_keeps_the_onnx_weights_as_fixed_inputs(onnx_model_path):
    import onnx
    from onnx import numpy_helper

    network = build_network(ModelSource(str(onnx_model_path)))

    assert network.entry == "main"
    assert network.input_names[0] == "input"
    assert network.input_shapes[0] == (1, 3, 8, 8)
    stored = {
        init.name: numpy_helper.to_array(init)
        for init in onnx.load(str(onnx_model_path)).graph.initializer
    }
    assert set(network.fixed_inputs) == set(stored)
    inputs = dict(zip(network.input_names, network.random_inputs(1), strict=True))
    for name, values in stored.items():
        np.testing.assert_array_equal(inputs[name], values)


def test_it_resolves_a_relative_onnx_path_against_the_base_dir(onnx_model_path):
    source = ModelSource(onnx_model_path.name)

    network = build_network(source, base_dir=onnx_model_path.parent)

    assert network.name == "tiny_skip_concat"


def test_it_names_a_corrupt_onnx_file(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07this is not a protobuf \xff\xfe" * 10)

    with pytest.raises(ModelSourceError, match="broken.onnx is not a readable ONNX model"):
        build_network(ModelSource(str(path)))


def test_it_names_a_missing_onnx_file(tmp_path):
    with pytest.raises(ModelSourceError, match="no ONNX file at .*missing.onnx"):
        build_network(ModelSource("missing.onnx"), base_dir=tmp_path)


def test_it_asks_for_the_shape_of_a_symbolic_onnx_input(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "symbolic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    path = tmp_path / "symbolic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))

    with pytest.raises(ModelSourceError, match="input 'x' has a symbolic dimension N"):
        build_network(ModelSource(str(path)))
    network = build_network(ModelSource(str(path), {"input_shapes": {"x": [2, 4]}}))
    assert network.input_shapes == [(2, 4)]


@needs_torch
@pytest.mark.slow
def test_it_compiles_a_torch_module_from_a_python_factory():
    network = build_network(ModelSource(TORCH_FACTORY, {"channels": 4}), base_dir=REPO)
    assert network.entry == "main"
    assert network.input_shapes[0] == (1, 3, 8, 8)

    # compile_model resolves relative paths against the working directory.
    reports = compile_small(ModelSource(str(REPO / TORCH_FACTORY), {"channels": 4}))

    for strategy, report in reports.items():
        assert report.error is None, f"{strategy}: {report.error}"
        assert report.outputs_match is True, strategy
    assert reports["none"].planned_bytes >= reports["greedy-by-size"].planned_bytes


def test_it_takes_a_network_from_a_python_factory(tmp_path):
    (tmp_path / "models.py").write_text(
        "from planner.tvm.zoo.mlp import mlp\n\n\n"
        "def tiny(hidden=8):\n"
        "    return mlp(features=4, hidden=[hidden], classes=2)\n"
    )

    network = build_network(ModelSource("models.py:tiny", {"hidden": 6}), base_dir=tmp_path)

    assert network.name == "mlp"
    assert network.input_shapes[:2] == [(1, 4), (6, 4)]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("models.py:nope", "models.py has no function 'nope'"),
        ("absent.py:tiny", "no Python file at .*absent.py"),
        ("models.py:returns_text", "returned str; expected a Network"),
        ("models.py:broken", "importing models.py failed: ZeroDivisionError"),
        ("models.py:raises", "models.py:raises failed: RuntimeError: no weights"),
    ],
)
def test_it_names_what_is_wrong_with_a_python_factory(tmp_path, source, message):
    body = (
        "def returns_text():\n    return 'resnet'\n\n\n"
        "def raises():\n    raise RuntimeError('no weights')\n"
    )
    if source.endswith(":broken"):
        body += "1 / 0\n"
    (tmp_path / "models.py").write_text(body)

    with pytest.raises(ModelSourceError, match=message):
        build_network(ModelSource(source), base_dir=tmp_path)


def test_it_rejects_a_source_it_does_not_know():
    with pytest.raises(ModelSourceError, match="unsupported model source 'model.pt'"):
        build_network(ModelSource("model.pt"))
