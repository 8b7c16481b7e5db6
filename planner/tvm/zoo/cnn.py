"""Small convolutional networks, built with TVM's ``relax.frontend.nn``."""

from __future__ import annotations

from tvm.relax.frontend import nn

# Network lives in planner.tvm.network; it stays importable from here for older callers.
from planner.tvm.network import Network
from planner.tvm.network import export_nn as _export

__all__ = ["Network", "residual_cnn", "small_cnn"]


class _ConvReLU(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        self.conv = nn.Conv2D(cin, cout, 3, stride=stride, padding=1)

    def forward(self, x):
        return nn.op.relu(self.conv(x))


class _SmallCNN(nn.Module):
    def __init__(self, channels: int, depth: int, classes: int):
        layers, cin = [], 3
        for i in range(depth):
            cout = channels * (2**i)
            layers.append(_ConvReLU(cin, cout, stride=1 if i == 0 else 2))
            cin = cout
        self.layers = nn.ModuleList(layers)
        self.head = nn.Conv2D(cin, classes, 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def small_cnn(
    channels: int = 16,
    resolution: int = 32,
    depth: int = 3,
    classes: int = 10,
    dynamic: bool = False,
) -> Network:
    """A plain conv stack: channels double while the resolution halves.

    With ``dynamic`` the height and width are symbolic (``h``, ``w``) and ``resolution`` is
    their upper bound, as for a model deployed at several resolutions.
    """
    module = _SmallCNN(channels, depth, classes)
    if dynamic:
        bounds = {"h": resolution, "w": resolution}
        return _export("small_cnn", module, (1, 3, "h", "w"), shape_bounds=bounds)
    return _export("small_cnn", module, (1, 3, resolution, resolution))


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        self.conv1 = nn.Conv2D(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2D(channels, channels, 3, padding=1)

    def forward(self, x):
        y = nn.op.relu(self.conv1(x))
        # The skip connection keeps x alive across both convolutions: the shape of
        # lifetime that whole-buffer reuse handles worst.
        return nn.op.relu(self.conv2(y) + x)


class _ResidualCNN(nn.Module):
    def __init__(self, channels: int, blocks: int, classes: int):
        self.stem = nn.Conv2D(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList([_ResidualBlock(channels) for _ in range(blocks)])
        self.down = nn.Conv2D(channels, channels * 2, 3, stride=2, padding=1)
        self.head = nn.Conv2D(channels * 2, classes, 1)

    def forward(self, x):
        x = nn.op.relu(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return self.head(nn.op.relu(self.down(x)))


def residual_cnn(
    channels: int = 16, resolution: int = 32, blocks: int = 2, classes: int = 10
) -> Network:
    """A ResNet-style stack of residual blocks followed by a downsampling head."""
    return _export(
        "residual_cnn",
        _ResidualCNN(channels, blocks, classes),
        (1, 3, resolution, resolution),
    )
