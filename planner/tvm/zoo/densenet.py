"""DenseNet-BC (Huang et al., 2017) with random weights.

Every layer of a dense block reads the concatenation of the block input and all earlier
layer outputs (BN-ReLU-1x1 conv to ``4 * growth`` channels, BN-ReLU-3x3 conv to ``growth``),
and its output is concatenated onto that input: feature maps grow inside a block, and every
concatenation allocates a fresh, larger tensor. Transitions halve channels (compression 0.5)
and resolution. ``densenet(resolution=224, growth=32, blocks=(6, 12, 24, 16))`` is
DenseNet-121; the default is a small DenseNet-BC.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn
from planner.tvm.zoo.layers import (
    BatchNorm2D,
    avg_pool2d,
    check_resolution,
    global_avg_pool,
    max_pool2d,
)


class _BNReLUConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int):
        self.bn = BatchNorm2D(cin)
        self.conv = nn.Conv2D(cin, cout, kernel, padding=kernel // 2, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.conv(nn.op.relu(self.bn(x)))


class _DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        self.bottleneck = _BNReLUConv(cin, 4 * growth, 1)
        self.conv = _BNReLUConv(4 * growth, growth, 3)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return nn.op.concat([x, self.conv(self.bottleneck(x))], dim=1)


class _Transition(nn.Module):
    def __init__(self, cin: int, cout: int):
        self.conv = _BNReLUConv(cin, cout, 1)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return avg_pool2d(self.conv(x), 2, 2)


class _DenseNet(nn.Module):
    def __init__(self, growth: int, blocks: Sequence[int], classes: int):
        channels = 2 * growth
        self.stem = nn.Conv2D(3, channels, 7, stride=2, padding=3, bias=False)
        self.stem_bn = BatchNorm2D(channels)
        layers: list[nn.Module] = []
        for index, count in enumerate(blocks):
            for _ in range(count):
                layers.append(_DenseLayer(channels, growth))
                channels += growth
            if index != len(blocks) - 1:
                layers.append(_Transition(channels, channels // 2))
                channels //= 2
        self.features = nn.ModuleList(layers)
        self.final_bn = BatchNorm2D(channels)
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = max_pool2d(nn.op.relu(self.stem_bn(self.stem(x))), 3, 2, padding=1)
        for layer in self.features:
            x = layer(x)
        return self.classifier(global_avg_pool(nn.op.relu(self.final_bn(x))))


def densenet(
    resolution: int = 64,
    growth: int = 12,
    blocks: Sequence[int] = (4, 4, 4),
    batch: int = 1,
    classes: int = 1000,
) -> Network:
    """A DenseNet-BC; ``blocks`` gives the number of layers in each dense block."""
    blocks = [int(b) for b in blocks]
    if growth < 1 or not blocks or min(blocks) < 1:
        raise ValueError("densenet needs a positive growth and at least one non-empty block")
    # The stem divides the input by 4, every transition by 2 more.
    check_resolution(resolution, 4 * 2 ** (len(blocks) - 1), "densenet")
    return export_nn(
        "densenet", _DenseNet(growth, blocks, classes), (batch, 3, resolution, resolution)
    )
