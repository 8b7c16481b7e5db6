"""A multi-layer perceptron with random weights: dense layers with ReLU between them."""

from __future__ import annotations

from collections.abc import Sequence

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn


class _MLP(nn.Module):
    def __init__(self, features: int, hidden: Sequence[int], classes: int):
        sizes = [features, *hidden]
        self.layers = nn.ModuleList(
            [nn.Linear(cin, cout) for cin, cout in zip(sizes, sizes[1:], strict=False)]
        )
        self.head = nn.Linear(sizes[-1], classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for layer in self.layers:
            x = nn.op.relu(layer(x))
        return self.head(x)


def mlp(
    features: int = 784,
    hidden: Sequence[int] = (512, 256),
    classes: int = 10,
    batch: int = 1,
) -> Network:
    """An MNIST-sized MLP by default; ``hidden`` lists the widths of the hidden layers."""
    if features < 1 or classes < 1 or any(int(h) < 1 for h in hidden):
        raise ValueError("mlp needs positive features, classes and hidden widths")
    return export_nn("mlp", _MLP(features, [int(h) for h in hidden], classes), (batch, features))
