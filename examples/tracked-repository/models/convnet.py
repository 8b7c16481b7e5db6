"""A small convolutional network, as a PyTorch module plus example inputs."""

import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.body = nn.ModuleList(nn.Conv2d(width, width, 3, padding=1) for _ in range(depth))
        self.head = nn.Conv2d(width, 4, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for conv in self.body:
            x = torch.relu(conv(x)) + x
        return self.head(x)


def build(width: int = 8, depth: int = 3, resolution: int = 16):
    """Peakwatch calls this with the manifest's params; it returns (module, inputs)."""
    torch.manual_seed(0)
    return ConvNet(width, depth), (torch.randn(1, 3, resolution, resolution),)
