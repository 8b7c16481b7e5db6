"""The function of "can the pooling reuse the conv buffer?" (case 1 of the users' cases).

``x: (1, 3, h, w)`` -> NHWC -> conv2d + bias + leaky ReLU, twice -> 2x2 average pooling with
stride 2 in NHWC -> back to NCHW. The pooled tensor is a quarter of the conv output it reads,
and the conv output dies at the pooling: the question is whether the pooling may write into
the start of that buffer. Built in Relax directly, so the layouts are exactly the user's.
"""

from __future__ import annotations

import tvm
from tvm import relax

from planner.tvm.network import Network


def pool_reuse(
    resolution: int = 32, channels: int = 64, dtype: str = "float16", dynamic: bool = False
) -> Network:
    """Case 1; ``dynamic`` makes h and w symbolic with ``resolution`` as their bound."""
    if resolution < 2 or resolution % 2:
        raise ValueError("pool_reuse needs an even resolution of at least 2")
    if dynamic:
        h, w = tvm.tirx.Var("h", "int64"), tvm.tirx.Var("w", "int64")
        shape: tuple = (1, 3, "h", "w")
        bounds = {"h": resolution, "w": resolution}
    else:
        h = w = resolution
        shape, bounds = (1, 3, resolution, resolution), {}
    x = relax.Var("x", relax.TensorType((1, 3, h, w), dtype))
    weights = [
        relax.Var("conv1_weight", relax.TensorType((channels, 3, 3, 3), dtype)),
        relax.Var("conv1_bias", relax.TensorType((channels,), dtype)),
        relax.Var("conv2_weight", relax.TensorType((channels, 3, 3, channels), dtype)),
        relax.Var("conv2_bias", relax.TensorType((channels,), dtype)),
    ]
    builder = relax.BlockBuilder()
    with builder.function("forward", [x, *weights]):
        with builder.dataflow():
            y = builder.emit(relax.op.permute_dims(x, [0, 2, 3, 1]))
            for weight, bias in (weights[0:2], weights[2:4]):
                y = builder.emit(
                    relax.op.nn.conv2d(
                        y,
                        weight,
                        padding=1,
                        data_layout="NHWC",
                        kernel_layout="OHWI",
                    )
                )
                y = builder.emit(relax.op.add(y, bias))
                y = builder.emit(relax.op.nn.leakyrelu(y, 0.1))
            y = builder.emit(relax.op.nn.avg_pool2d(y, 2, 2, layout="NHWC"))
            out = builder.emit_output(relax.op.permute_dims(y, [0, 3, 1, 2]))
        builder.emit_func_output(out)
    names = ["x"] + [v.name for v in weights]
    shapes = [shape] + [tuple(int(d) for d in v.ty.shape) for v in weights]
    return Network(
        "pool_reuse", builder.get(), names, shapes, [dtype] * len(names), shape_bounds=bounds
    )
