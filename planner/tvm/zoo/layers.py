"""Layers the zoo's architectures share that ``relax.frontend.nn`` does not have itself.

Pooling and transposed 2-D convolutions exist as Relax operators but not as ``nn`` modules or
``nn.op`` functions, so they are wrapped here.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax.frontend import nn


def scaled(channels: int, width: float, divisor: int = 1) -> int:
    """``channels`` times a width multiplier, at least one and a multiple of ``divisor``."""
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")
    value = channels * width
    if divisor == 1:
        return max(1, int(round(value)))
    # MobileNet's rounding: never drop more than 10% below the scaled value.
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


def check_resolution(resolution: int, multiple: int, model: str) -> None:
    # A bad resolution would otherwise surface as a shape error deep inside the export.
    if resolution < multiple or resolution % multiple:
        raise ValueError(f"{model} needs a resolution that is a multiple of {multiple}")


class BatchNorm2D(nn.Module):
    """Inference-time batch norm: the per-channel scale and shift it folds to.

    Running statistics are not modelled: with random weights a negative variance would
    produce NaN, and a deployed network computes exactly this affine map.
    """

    def __init__(self, channels: int):
        self.scale = nn.Parameter((1, channels, 1, 1))
        self.shift = nn.Parameter((1, channels, 1, 1))

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return x * self.scale + self.shift


class ConvBN(nn.Module):
    """Convolution without bias, batch norm, then an optional activation."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        activation: str | None = "relu",
    ):
        self.conv = nn.Conv2D(
            cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False
        )
        self.bn = BatchNorm2D(cout)
        self.activation = activation

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.bn(self.conv(x))
        if self.activation == "relu":
            return nn.op.relu(x)
        if self.activation == "relu6":
            return nn.op.relu6(x)
        return x


class ConvTranspose2D(nn.Module):
    """Transposed 2-D convolution (a learned upsampling), weight in IOHW layout."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int):
        self.weight = nn.Parameter((cin, cout, kernel, kernel))
        self.bias = nn.Parameter((1, cout, 1, 1))
        self.stride = stride

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = nn.op.wrap_nested(
            relax.op.nn.conv2d_transpose(x._expr, self.weight._expr, strides=self.stride),
            name="conv2d_transpose",
        )
        return y + self.bias


def max_pool2d(x: nn.Tensor, size: int, stride: int, padding: int = 0) -> nn.Tensor:
    return nn.op.wrap_nested(
        relax.op.nn.max_pool2d(x._expr, size, stride, padding), name="max_pool2d"
    )


def avg_pool2d(x: nn.Tensor, size: int, stride: int) -> nn.Tensor:
    return nn.op.wrap_nested(relax.op.nn.avg_pool2d(x._expr, size, stride), name="avg_pool2d")


def global_avg_pool(x: nn.Tensor) -> nn.Tensor:
    """(N, C, H, W) -> (N, C): the pooling before every classifier head here."""
    pooled = nn.op.wrap_nested(relax.op.nn.adaptive_avg_pool2d(x._expr, 1), name="avg_pool")
    batch, channels = (int(d) for d in x.shape[:2])
    return nn.op.reshape(pooled, (batch, channels))
