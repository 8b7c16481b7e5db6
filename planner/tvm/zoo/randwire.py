"""Randomly wired networks (Xie et al., "Exploring Randomly Wired Neural Networks", 2019).

Each stage is a random graph, made a DAG by pointing every edge from the lower node index
to the higher. A node sums its inputs (the paper's weighted sum, with unit weights here),
applies ReLU, a 3x3 convolution and batch norm, and sends the result to all its successors.
Nodes without predecessors read the stage input (with stride 2 after the first stage);
the stage output is the mean of the nodes without successors. Graphs come from
Erdos-Renyi (``graph="er"``, edge probability ``p``) or Watts-Strogatz (``graph="ws"``,
ring of ``k`` neighbours, rewiring probability ``p``), drawn from ``seed`` alone.

The forward pass visits nodes in index order, which is the program order Relax keeps;
with many nodes alive at once, that order is rarely the one that needs the least memory,
which is what these networks are for here (see :mod:`planner.order`).
"""

from __future__ import annotations

import random

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn
from planner.tvm.zoo.layers import ConvBN, check_resolution, global_avg_pool

GRAPHS = ("ws", "er")


def random_dag(nodes: int, graph: str, k: int, p: float, rng: random.Random) -> list[list[int]]:
    """Predecessors of each node of a random DAG on ``nodes`` nodes (index order is valid)."""
    edges: set[tuple[int, int]] = set()
    if graph == "er":
        for j in range(nodes):
            for i in range(j):
                if rng.random() < p:
                    edges.add((i, j))
    elif graph == "ws":
        half = max(1, k // 2)
        ring = [(i, (i + step) % nodes) for step in range(1, half + 1) for i in range(nodes)]
        undirected = {frozenset(e) for e in ring if e[0] != e[1]}
        # Rewire each lattice edge's far end with probability p, as Watts and Strogatz do,
        # avoiding self-loops and duplicate edges.
        for a, b in ring:
            edge = frozenset((a, b))
            if edge not in undirected or rng.random() >= p:
                continue
            choices = [c for c in range(nodes) if c != a and frozenset((a, c)) not in undirected]
            if choices:
                undirected.discard(edge)
                undirected.add(frozenset((a, rng.choice(choices))))
        edges = {(min(e), max(e)) for e in undirected}
    else:
        raise ValueError(f"graph must be one of {', '.join(GRAPHS)}, got {graph!r}")
    preds: list[list[int]] = [[] for _ in range(nodes)]
    for i, j in sorted(edges):
        preds[j].append(i)
    return preds


class _Stage(nn.Module):
    def __init__(self, preds: list[list[int]], cin: int, cout: int, stride: int):
        self.preds = preds
        self.nodes = nn.ModuleList(
            [
                ConvBN(cout if p else cin, cout, 3, stride=1 if p else stride, activation=None)
                for p in preds
            ]
        )
        readers = {i for p in preds for i in p}
        self.outputs = [i for i in range(len(preds)) if i not in readers]

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        values: list[nn.Tensor] = []
        for node, preds in zip(self.nodes, self.preds, strict=True):
            if preds:
                total = values[preds[0]]
                for i in preds[1:]:
                    total = total + values[i]
            else:
                total = x
            values.append(node(nn.op.relu(total)))
        out = values[self.outputs[0]]
        for i in self.outputs[1:]:
            out = out + values[i]
        if len(self.outputs) > 1:
            out = out * (1.0 / len(self.outputs))
        return out


class _RandWire(nn.Module):
    def __init__(self, stages: list[list[list[int]]], channels: int, classes: int):
        self.stem = ConvBN(3, channels, 3, stride=1, activation="relu")
        modules, cin = [], channels
        for index, preds in enumerate(stages):
            cout = channels * 2**index
            modules.append(_Stage(preds, cin, cout, stride=1 if index == 0 else 2))
            cin = cout
        self.stages = nn.ModuleList(modules)
        self.classifier = nn.Linear(cin, classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        return self.classifier(global_avg_pool(nn.op.relu(x)))


def randwire(
    seed: int = 0,
    nodes: int = 16,
    graph: str = "ws",
    k: int = 4,
    p: float = 0.75,
    stages: int = 1,
    channels: int = 8,
    resolution: int = 32,
    classes: int = 10,
) -> Network:
    """A randomly wired network: ``stages`` random graphs of ``nodes`` nodes each.

    The defaults follow the paper's WS(4, 0.75) generator, at a size that compiles in
    seconds. The same ``seed`` always gives the same wiring.
    """
    if nodes < 2 or stages < 1 or channels < 1:
        raise ValueError("randwire needs at least 2 nodes, 1 stage and 1 channel")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability, got {p}")
    if graph == "ws" and not 2 <= k < nodes:
        raise ValueError(f"a Watts-Strogatz graph needs 2 <= k < nodes, got k={k}")
    check_resolution(resolution, 2 ** (stages - 1), "randwire")
    rng = random.Random(seed)
    wiring = [random_dag(nodes, graph, k, p, rng) for _ in range(stages)]
    return export_nn(
        "randwire", _RandWire(wiring, channels, classes), (1, 3, resolution, resolution)
    )
