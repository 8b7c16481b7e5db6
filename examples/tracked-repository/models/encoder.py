"""A transformer encoder block written with torch.nn, measured at several sequence lengths.

The factory returns (module, example inputs, dynamic_shapes): the dynamic_shapes are what
torch.export.export takes, and the Dim's name is the shape axis the manifest measures
(``shapes = { seq = [...] }``). Peakwatch calls build with seq set to the axis's largest
point, so the example input is within the Dim's range.
"""

import torch
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.project = nn.Linear(hidden, hidden)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden)
        )
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        batch, seq, hidden = x.shape
        head = hidden // self.heads
        qkv = self.qkv(x).reshape(batch, seq, 3, self.heads, head).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        weights = (q @ k.transpose(-1, -2) / head**0.5).softmax(-1)
        attended = (weights @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.norm1(x + self.project(attended))
        return self.norm2(x + self.mlp(x))


def build(seq: int = 32, vocab: int = 32, hidden: int = 16, heads: int = 2):
    torch.manual_seed(0)
    example = torch.randint(0, vocab, (1, seq))
    # The sequence length is symbolic up to 512; the manifest's points must lie within.
    length = torch.export.Dim("seq", min=2, max=512)
    return EncoderBlock(vocab, hidden, heads), (example,), ({1: length},)
