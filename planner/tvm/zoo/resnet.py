"""ResNet-18 (He et al., 2015) with random weights.

``resnet18(resolution=224, width=1.0)`` is the real network: a 7x7 stem and max pool, four
stages of two basic blocks (64, 128, 256, 512 channels), global average pooling and a
1000-way classifier. ``width`` scales every channel count, ``resolution`` the input.
"""

from __future__ import annotations

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn
from planner.tvm.zoo.layers import ConvBN, check_resolution, global_avg_pool, max_pool2d, scaled

STAGES = (64, 128, 256, 512)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        self.conv1 = ConvBN(cin, cout, 3, stride=stride)
        self.conv2 = ConvBN(cout, cout, 3, activation=None)
        # The projection shortcut only where the shape changes, as in the paper's option B.
        self.shortcut = (
            ConvBN(cin, cout, 1, stride=stride, activation=None)
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        identity = x if self.shortcut is None else self.shortcut(x)
        return nn.op.relu(self.conv2(self.conv1(x)) + identity)


class _ResNet18(nn.Module):
    def __init__(self, width: float, classes: int):
        channels = [scaled(c, width) for c in STAGES]
        self.stem = ConvBN(3, channels[0], 7, stride=2)
        blocks, cin = [], channels[0]
        for stage, cout in enumerate(channels):
            stride = 1 if stage == 0 else 2
            blocks += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = max_pool2d(self.stem(x), 3, 2, padding=1)
        for block in self.blocks:
            x = block(x)
        return self.fc(global_avg_pool(x))


def resnet18(
    resolution: int = 64, width: float = 1.0, batch: int = 1, classes: int = 1000
) -> Network:
    """ResNet-18; the defaults keep the real channels at a small input."""
    check_resolution(resolution, 32, "resnet18")
    return export_nn("resnet18", _ResNet18(width, classes), (batch, 3, resolution, resolution))
