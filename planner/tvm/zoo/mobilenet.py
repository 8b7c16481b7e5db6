"""MobileNetV2 (Sandler et al., 2018) with random weights.

``mobilenet_v2(resolution=224, width=1.0)`` is the real network: a 3x3 stem, seventeen
inverted residual blocks (1x1 expansion, 3x3 depthwise, linear 1x1 projection, ReLU6, a
residual add where input and output shapes agree), a 1x1 conv to 1280 channels, global
average pooling and a 1000-way classifier.
"""

from __future__ import annotations

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn
from planner.tvm.zoo.layers import ConvBN, check_resolution, global_avg_pool, scaled

# (expansion t, output channels c, repeats n, first stride s), Table 2 of the paper.
BLOCKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int):
        hidden = cin * expansion
        self.expand = ConvBN(cin, hidden, 1, activation="relu6") if expansion != 1 else None
        self.depthwise = ConvBN(hidden, hidden, 3, stride=stride, groups=hidden, activation="relu6")
        self.project = ConvBN(hidden, cout, 1, activation=None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = x if self.expand is None else self.expand(x)
        y = self.project(self.depthwise(y))
        return x + y if self.residual else y


class _MobileNetV2(nn.Module):
    def __init__(self, width: float, classes: int):
        cin = scaled(32, width, divisor=8)
        self.stem = ConvBN(3, cin, 3, stride=2, activation="relu6")
        blocks = []
        for expansion, channels, repeats, stride in BLOCKS:
            cout = scaled(channels, width, divisor=8)
            for i in range(repeats):
                blocks.append(_InvertedResidual(cin, cout, stride if i == 0 else 1, expansion))
                cin = cout
        self.blocks = nn.ModuleList(blocks)
        # The last layer is never made narrower than 1280, as in the paper.
        last = scaled(1280, max(1.0, width), divisor=8)
        self.head = ConvBN(cin, last, 1, activation="relu6")
        self.classifier = nn.Linear(last, classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.classifier(global_avg_pool(self.head(x)))


def mobilenet_v2(
    resolution: int = 64, width: float = 1.0, batch: int = 1, classes: int = 1000
) -> Network:
    """MobileNetV2; the defaults keep the real channels at a small input."""
    check_resolution(resolution, 32, "mobilenet_v2")
    return export_nn(
        "mobilenet_v2", _MobileNetV2(width, classes), (batch, 3, resolution, resolution)
    )
