"""A BERT encoder (Devlin et al., 2018) with random weights, BERT-tiny by default.

BERT-tiny (Turc et al., 2019) has 2 layers, hidden size 128, 2 attention heads and a
512-wide GELU feed-forward. Each post-norm layer computes Q, K and V projections, softmax
attention scores of shape (batch, heads, seq, seq), the output projection, a residual add and
layer norm, then the feed-forward with its own residual add and layer norm. The input is the
already embedded sequence, (batch, seq, hidden) floats, so no embedding table is needed.
"""

from __future__ import annotations

import math

from tvm.relax.frontend import nn

from planner.tvm.network import Network, export_nn


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)

    def _split_heads(self, x: nn.Tensor) -> nn.Tensor:
        # Dimensions stay expressions: ``seq`` may be symbolic.
        batch, seq, _ = x.shape
        x = nn.op.reshape(x, (batch, seq, self.heads, self.head_dim))
        return nn.op.permute_dims(x, (0, 2, 1, 3))  # (batch, heads, seq, head_dim)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        batch, seq, hidden = x.shape
        q = self._split_heads(self.query(x))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        scores = nn.op.matmul(q, nn.op.permute_dims(k, (0, 1, 3, 2)))
        probs = nn.op.softmax(scores / math.sqrt(self.head_dim), axis=-1)
        context = nn.op.permute_dims(nn.op.matmul(probs, v), (0, 2, 1, 3))
        return self.output(nn.op.reshape(context, (batch, seq, hidden)))


class _EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int):
        self.attention = _SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(nn.op.gelu(self.intermediate(x))))


class _Encoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, intermediate: int):
        self.layers = nn.ModuleList(
            [_EncoderLayer(hidden, heads, intermediate) for _ in range(layers)]
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def bert_tiny(
    seq: int = 128,
    batch: int = 1,
    layers: int = 2,
    hidden: int = 128,
    heads: int = 2,
    intermediate: int | None = None,
    dynamic: bool = False,
) -> Network:
    """A BERT encoder stack; ``intermediate`` defaults to four times ``hidden``.
    ``dynamic`` makes the sequence length symbolic (``seq``) with ``seq`` as its bound."""
    if min(seq, batch, layers, hidden, heads) < 1 or hidden % heads:
        raise ValueError("bert_tiny needs positive sizes and hidden divisible by heads")
    return export_nn(
        "bert_tiny",
        _Encoder(layers, hidden, heads, intermediate or 4 * hidden),
        (batch, "seq" if dynamic else seq, hidden),
        shape_bounds={"seq": seq} if dynamic else None,
    )
