"""Helpers for the zoo tests: a small compile, and an ONNX file written in code."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

STRATEGIES = ["tvm-stock", "none", "greedy-by-size"]


def compile_small(source, strategies=STRATEGIES):
    """``compile_model`` with one timing round and, where it can, no memory measurement.

    The measurement runs every build again in fresh processes; these tests are about the
    zoo's networks, and the machine they run on has two cores.
    """
    from planner.tvm.compile import compile_model

    extra = {}
    if "memory_configs" in inspect.signature(compile_model).parameters:
        extra["memory_configs"] = ()
    reports = compile_model(source, strategies, repeat=1, **extra)
    return {report.strategy: report for report in reports}


@pytest.fixture
def onnx_model_path(tmp_path):
    """A conv -> relu -> (conv + skip) -> concat -> conv graph with initialisers."""
    onnx = pytest.importorskip("onnx", reason="ONNX sources need the onnx package")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name, *shape):
        values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        return numpy_helper.from_array(values, name)

    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r2"]),
        helper.make_node("Concat", ["r1", "r2"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_skip_concat",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 2, 8, 8])],
        initializer=[
            weight("w1", 4, 3, 3, 3),
            weight("b1", 4),
            weight("w2", 4, 4, 3, 3),
            weight("b2", 4),
            weight("w3", 2, 8, 1, 1),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / "tiny_skip_concat.onnx"
    onnx.save(model, str(path))
    return path
