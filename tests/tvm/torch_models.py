"""Small PyTorch networks with the shapes that broke the wing on torchvision's models.

Loaded as ``tests/tvm/torch_models.py:NAME`` model sources, so they go through
``torch.export`` and TVM's importer like a tracked repository's models do.
"""

import torch
from torch import nn


class _Chunked(nn.Module):
    """ShuffleNet's pattern: split the channels, work on one half, keep the other, shuffle."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.branch = nn.Sequential(
            nn.Conv2d(channels // 2, channels // 2, 1), nn.ReLU(),
            nn.Conv2d(channels // 2, channels // 2, 3, padding=1), nn.ReLU(),
        )
        self.head = nn.Conv2d(channels, 4, 1)

    def forward(self, x):
        x = self.stem(x)
        kept, worked = x.chunk(2, dim=1)
        x = torch.cat((kept, self.branch(worked)), dim=1)
        n, c, h, w = x.shape
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.head(x)


def chunked(image: int = 16):
    torch.manual_seed(0)
    return _Chunked(), (torch.randn(1, 3, image, image),)


class _Classifier(nn.Module):
    def __init__(self, features: int, classes: int):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return torch.relu(self.fc(x))


def classifier(features: int = 256, classes: int = 512):
    """A linear layer: its weight is transposed for the matmul, which only weights feed."""
    torch.manual_seed(0)
    return _Classifier(features, classes), (torch.randn(1, features),)


class _Embedding(nn.Module):
    def __init__(self, vocabulary: int, width: int):
        super().__init__()
        self.table = nn.Embedding(vocabulary, width)
        self.out = nn.Linear(width, 8)

    def forward(self, tokens):
        return self.out(self.table(tokens).mean(dim=1))


def embedding(vocabulary: int = 50, width: int = 16):
    """Token ids: integers whose only meaningful values are the table's rows."""
    torch.manual_seed(0)
    return _Embedding(vocabulary, width), (torch.zeros(1, 12, dtype=torch.int64),)


class _WrongAt(nn.Module):
    """Two layers over a sequence; PyTorch's own (eager) result is off at one length only,
    which torch.export never traces: that point's check fails, the others pass."""

    def __init__(self, width: int, wrong_at: int):
        super().__init__()
        self.first, self.second = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.wrong_at = wrong_at

    def forward(self, x):
        out = self.second(torch.relu(self.first(x)))
        if torch.compiler.is_compiling() or x.shape[1] != self.wrong_at:
            return out
        return out + 1


def wrong_at(width: int = 8, seq: int = 16, at: int = 16):
    torch.manual_seed(0)
    return _WrongAt(width, at).eval(), (torch.randn(1, seq, width),)


def gpt2_table(positions: int = 16, seq: int = 8):
    """A two-layer GPT-2 with a ``positions``-row position table (``n_positions``)."""
    from planner.tvm.zoo.transformers_source import import_transformers

    import_transformers()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=positions,
                        use_cache=False)
    return _Logits(GPT2LMHeadModel(config)).eval(), (torch.zeros(1, seq, dtype=torch.int64),)


class _Logits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        # With a mask: without one a decoder along a symbolic length does not fold yet.
        return self.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits


class _EmptyPieces(nn.Module):
    """A split with pieces of width 0 in it, as Mamba2 splits its projection."""

    def forward(self, x):
        empty, left, nothing, right = torch.split(x, [0, 4, 0, 4], dim=-1)
        return left * 2 + right, empty.sum() + nothing.sum()


def empty_pieces():
    return _EmptyPieces().eval(), (torch.randn(2, 8),)


def mamba2(seq: int = 8):
    """Mamba2 from a small configuration (no gated MLP: ``d_mlp`` is 0), random weights."""
    from planner.tvm.zoo.transformers_source import import_transformers

    import_transformers()
    from transformers import Mamba2Config, Mamba2ForCausalLM

    torch.manual_seed(0)
    config = Mamba2Config(
        num_hidden_layers=1, hidden_size=32, state_size=8, num_heads=4, head_dim=16,
        expand=2, n_groups=1, vocab_size=64, chunk_size=8,
    )
    return _CacheFree(Mamba2ForCausalLM(config)).eval(), (torch.zeros(1, seq, dtype=torch.int64),)


class _CacheFree(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits
