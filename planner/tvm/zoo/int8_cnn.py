"""An int8-quantised VGG-style CNN, the kind deployed to microcontrollers from TFLite.

Blocks of two 3x3 convolutions and a 2x2 max-pool, then a global average and a dense
layer. Weights and activations are int8; each convolution accumulates in int32, adds an
int32 bias and requantises with an integer multiplier and a rounding right shift (TFLite's
scheme with a power-of-two denominator), so every build computes bit-identical outputs and
a check can demand exact equality. With the defaults (32x32x3 input, 16/32/48 channels)
the weights and biases take about 52 KB: case 2's model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from tvm import relax

from planner.tvm.network import Network

#: The scale a requantised activation aims for: int8 values of this standard deviation use
#: the range without saturating most of them.
_TARGET_STD = 32.0


def _requantise(bb: relax.BlockBuilder, acc: relax.Expr, fan_in: int, relu: bool):
    # acc has a standard deviation of about sqrt(fan_in) * std(x) * std(w); scale it back
    # to _TARGET_STD as multiplier / 2**shift with a 7-bit multiplier, which keeps
    # acc * multiplier inside int32 for fan-ins up to 1024.
    scale = _TARGET_STD / (math.sqrt(fan_in) * 40.0 * 73.0)
    shift = max(1, int(math.floor(math.log2(127.0 / scale))))
    multiplier = max(1, round(scale * 2**shift))
    scaled = bb.emit(relax.op.multiply(acc, relax.const(multiplier, "int32")))
    rounded = bb.emit(relax.op.add(scaled, relax.const(1 << (shift - 1), "int32")))
    shifted = bb.emit(relax.op.right_shift(rounded, relax.const(shift, "int32")))
    low = 0 if relu else -128
    clipped = bb.emit(relax.op.clip(shifted, low, 127))
    return bb.emit(relax.op.astype(clipped, "int8"))


def int8_vgg(
    resolution: int = 32,
    channels: Sequence[int] = (16, 32, 48),
    classes: int = 10,
    seed: int = 0,
) -> Network:
    """The quantised VGG-style CNN; ``channels`` gives each block's width."""
    if resolution % (2 ** len(channels)):
        raise ValueError(f"resolution {resolution} must be divisible by {2 ** len(channels)}")
    rng = np.random.default_rng(seed)
    params: list[tuple[str, np.ndarray]] = []

    def weight(name: str, shape: tuple[int, ...], dtype: str, low: int, high: int):
        value = rng.integers(low, high, size=shape, endpoint=True).astype(dtype)
        var = relax.Var(name, relax.TensorType(shape, dtype))
        params.append((name, value))
        return var

    x = relax.Var("x", relax.TensorType((1, 3, resolution, resolution), "int8"))
    bb = relax.BlockBuilder()
    weight_vars = []
    # The parameters are created while the layers are, so they are given at the end.
    with bb.function("forward", attrs={"num_input": 1}, pure=True):
        with bb.dataflow():
            h = x
            cin = 3
            size = resolution
            for block, cout in enumerate(channels):
                for layer in range(2):
                    prefix = f"block{block}_conv{layer}"
                    w = weight(f"{prefix}_weight", (cout, cin, 3, 3), "int8", -127, 127)
                    b = weight(f"{prefix}_bias", (1, cout, 1, 1), "int32", -2000, 2000)
                    weight_vars += [w, b]
                    acc = bb.emit(
                        relax.op.nn.conv2d(h, w, padding=1, out_dtype="int32")
                    )
                    acc = bb.emit(relax.op.add(acc, b))
                    h = _requantise(bb, acc, cin * 9, relu=True)
                    cin = cout
                h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=2, strides=2))
                size //= 2
            # Global average in int32: the sum over the remaining size x size positions,
            # divided by rounding (a shift when the area is a power of two).
            wide = bb.emit(relax.op.astype(h, "int32"))
            total = bb.emit(relax.op.sum(wide, axis=[2, 3]))
            area = size * size
            mean = bb.emit(relax.op.floor_divide(
                relax.op.add(total, relax.const(area // 2, "int32")),
                relax.const(area, "int32"),
            ))
            pooled = bb.emit(relax.op.astype(relax.op.clip(mean, -128, 127), "int8"))
            w = weight("dense_weight", (cin, classes), "int8", -127, 127)
            b = weight("dense_bias", (1, classes), "int32", -2000, 2000)
            weight_vars += [w, b]
            logits = bb.emit(relax.op.matmul(pooled, w, out_dtype="int32"))
            logits = bb.emit(relax.op.add(logits, b))
            out = bb.emit_output(_requantise(bb, logits, cin, relu=False))
        bb.emit_func_output(out, params=[x, *weight_vars])
    mod = bb.get()
    names = ["x"] + [name for name, _ in params]
    shapes = [(1, 3, resolution, resolution)] + [tuple(v.shape) for _, v in params]
    dtypes = ["int8"] + [str(v.dtype) for _, v in params]
    return Network(
        "int8_vgg", mod, names, shapes, dtypes, fixed_inputs=dict(params),
    )


__all__ = ["int8_vgg"]
