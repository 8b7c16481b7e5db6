"""Writes models/mlp.onnx: a two-layer perceptron with fixed random weights.

    python3 models/make_mlp_onnx.py
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(hidden: int = 96) -> None:
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((64, hidden)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Relu", ["h"], ["a"]),
            helper.make_node("MatMul", ["a", "w2"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(Path(__file__).with_name("mlp.onnx")))


if __name__ == "__main__":
    main()
