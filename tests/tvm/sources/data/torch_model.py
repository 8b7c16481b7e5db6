"""A tiny PyTorch model for the ``module.py:factory`` source form."""

import torch
from torch import nn


class TinyResidual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Conv2d(2 * channels, 4, 1)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        y = torch.relu(self.conv(x) + x)
        return self.head(torch.cat([x, y], dim=1))


def tiny_residual(channels: int = 4, resolution: int = 8):
    torch.manual_seed(0)
    return TinyResidual(channels), (torch.randn(1, 3, resolution, resolution),)
