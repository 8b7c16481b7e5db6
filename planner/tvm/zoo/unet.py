"""U-Net (Ronneberger et al., 2015) with random weights.

An encoder of double 3x3 convolutions and 2x2 max pools, a bottleneck, and a decoder that
upsamples with 2x2 transposed convolutions and concatenates the encoder feature map of the
same resolution (the skip connection) before its double convolution; a 1x1 conv gives the
per-pixel class scores. Convolutions are padded, as in most implementations since, so the
output has the input's resolution. ``unet(resolution=572, width=1.0)`` has the paper's
channels (64 to 1024); the skips keep every encoder output alive until the decoder needs
it, which is what makes U-Nets hard on memory planners.
"""

from __future__ import annotations

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn
from planner.tvm.zoo.layers import (
    BatchNorm2D,
    ConvTranspose2D,
    check_resolution,
    max_pool2d,
    scaled,
)


class _DoubleConv(nn.Module):
    def __init__(self, cin: int, cout: int):
        self.conv1 = nn.Conv2D(cin, cout, 3, padding=1, bias=False)
        self.bn1 = BatchNorm2D(cout)
        self.conv2 = nn.Conv2D(cout, cout, 3, padding=1, bias=False)
        self.bn2 = BatchNorm2D(cout)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = nn.op.relu(self.bn1(self.conv1(x)))
        return nn.op.relu(self.bn2(self.conv2(x)))


class _Up(nn.Module):
    def __init__(self, cin: int, cout: int):
        self.up = ConvTranspose2D(cin, cout, 2, stride=2)
        self.conv = _DoubleConv(2 * cout, cout)

    def forward(self, x: nn.Tensor, skip: nn.Tensor) -> nn.Tensor:
        return self.conv(nn.op.concat([skip, self.up(x)], dim=1))


class _UNet(nn.Module):
    def __init__(self, width: float, depth: int, in_channels: int, classes: int):
        channels = [scaled(64 * 2**level, width) for level in range(depth + 1)]
        self.down = nn.ModuleList(
            [_DoubleConv(in_channels, channels[0])]
            + [_DoubleConv(channels[i], channels[i + 1]) for i in range(depth)]
        )
        self.up = nn.ModuleList([_Up(channels[i + 1], channels[i]) for i in reversed(range(depth))])
        self.head = nn.Conv2D(channels[0], classes, 1)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        skips = []
        for level, block in enumerate(self.down):
            if level:
                x = max_pool2d(x, 2, 2)
            x = block(x)
            skips.append(x)
        skips.pop()  # the bottleneck output is x itself
        for block in self.up:
            x = block(x, skips.pop())
        return self.head(x)


def unet(
    resolution: int = 64,
    width: float = 0.25,
    depth: int = 4,
    batch: int = 1,
    in_channels: int = 3,
    classes: int = 2,
) -> Network:
    """U-Net; the default is a quarter-width one (16 to 256 channels) on a 64x64 input."""
    if depth < 1:
        raise ValueError("unet needs a depth of at least 1")
    check_resolution(resolution, 2**depth, "unet")
    return export_nn(
        "unet",
        _UNet(width, depth, in_channels, classes),
        (batch, in_channels, resolution, resolution),
    )
