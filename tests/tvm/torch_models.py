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


class _LogitsWithoutMask(nn.Module):
    """A causal language model called as a user calls it: token ids, no attention mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False, return_dict=False)[0]


def llama_without_mask(seq: int = 8):
    """A one-layer Llama without a mask: transformers then looks for packed sequences in
    the position ids with a cumulative sum over booleans."""
    from planner.tvm.zoo.transformers_source import import_transformers

    import_transformers()
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
        intermediate_size=64, vocab_size=64, max_position_embeddings=max(seq, 16),
        use_cache=False, attn_implementation="sdpa",
    )
    return _LogitsWithoutMask(LlamaForCausalLM(config)).eval(), (torch.randint(0, 64, (1, seq)),)
