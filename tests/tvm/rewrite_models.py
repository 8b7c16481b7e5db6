"""Small networks for the rewrites' soundness tests, loaded as ``models.py:NAME`` sources.

The torch ones go through ``torch.export`` and TVM's importer, like a tracked repository's
models; ``hidden_transpose`` is a Relax module with a hand-written kernel whose declared
reads leave out the load it makes.
"""

import torch
import torch.nn.functional as F
from torch import nn


class _Ghost(nn.Module):
    """GhostNet's module: a cheap depthwise branch doubles the channels, then the first
    ``cout`` are kept."""

    def __init__(self, cin: int, cout: int, relu: bool = True):
        super().__init__()
        half = (cout + 1) // 2
        self.cout = cout
        act = nn.ReLU() if relu else nn.Identity()
        self.primary = nn.Sequential(nn.Conv2d(cin, half, 1, bias=False), nn.BatchNorm2d(half),
                                     act)
        self.cheap = nn.Sequential(
            nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False), nn.BatchNorm2d(half),
            nn.ReLU() if relu else nn.Identity(),
        )

    def forward(self, x):
        a = self.primary(x)
        return torch.cat([a, self.cheap(a)], 1)[:, : self.cout]


class _GhostNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.g1, self.g2 = _Ghost(8, 12), _Ghost(12, 6, relu=False)
        # Two batch-normed branches concatenated and sliced in one fused kernel: the
        # temporaries of the two batch norms share names but not shapes.
        self.a, self.bn_a = nn.Conv2d(6, 6, 1), nn.BatchNorm2d(6)
        self.b, self.bn_b = nn.Conv2d(6, 12, 1), nn.BatchNorm2d(12)
        self.head = nn.Linear(6, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x[:, :6] + self.g2(self.g1(x))
        x = torch.cat([self.bn_a(self.a(x)), self.bn_b(self.b(x))], 1)[:, :6]
        return self.head(x.mean((2, 3)))


def ghostnet(image: int = 32):
    torch.manual_seed(0)
    return _GhostNet().eval(), (torch.randn(1, 3, image, image),)


def _cbr(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class _HRNet(nn.Module):
    """HRNet's exchange: three resolutions, each fused with the others, upsampled or
    strided to its size, by adds."""

    def __init__(self):
        super().__init__()
        self.stem = _cbr(3, 16, 2)
        self.b1, self.down1 = _cbr(16, 16), _cbr(16, 32, 2)
        self.b2, self.down2 = _cbr(32, 32), _cbr(32, 32, 2)
        self.b3 = _cbr(32, 32)
        self.fuse21, self.fuse31 = nn.Conv2d(32, 16, 1), nn.Conv2d(32, 16, 1)
        self.fuse32, self.down12 = nn.Conv2d(32, 32, 1), _cbr(16, 32, 2)
        self.head = nn.Linear(16 + 32 + 32, 10)

    def forward(self, x):
        x = self.stem(x)
        h1, h2 = self.b1(x), self.b2(self.down1(x))
        h3 = self.b3(self.down2(h2))
        o1 = F.relu(h1 + F.interpolate(self.fuse21(h2), scale_factor=2)
                    + F.interpolate(self.fuse31(h3), scale_factor=4))
        o2 = F.relu(h2 + self.down12(h1) + F.interpolate(self.fuse32(h3), scale_factor=2))
        o3 = F.relu(h3 + F.max_pool2d(h2, 2))
        pooled = [o.mean((2, 3)) for o in (o1, o2, o3)]
        return self.head(torch.cat(pooled, 1))


def hrnet(image: int = 32):
    torch.manual_seed(0)
    return _HRNet().eval(), (torch.randn(1, 3, image, image),)


def hidden_transpose(size: int = 32):
    """x -> doubled -> transposed by a kernel that does not declare its read -> doubled twice.

    The doubled tensor dies at the transpose, which is the same size: a rule that trusted
    the declared reads would write the transpose over its own input.
    """
    import tvm
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    from planner.tvm.network import Network

    n = size

    @I.ir_module
    class Module:
        @T.prim_func(private=True, s_tir=True)
        def double(a: T.Buffer((n, n), "float32"), b: T.Buffer((n, n), "float32")):
            for i, j in T.grid(n, n):
                with T.sblock("double"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    b[vi, vj] = a[vi, vj] * T.float32(2)

        @T.prim_func(private=True, s_tir=True)
        def transpose(a: T.Buffer((n, n), "float32"), b: T.Buffer((n, n), "float32")):
            for i, j in T.grid(n, n):
                with T.sblock("transpose"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads()
                    T.writes(b[vi, vj])
                    b[vi, vj] = a[vj, vi]

        @R.function
        def main(x: R.Tensor((n, n), "float32")) -> R.Tensor((n, n), "float32"):
            cls = Module
            with R.dataflow():
                y = R.call_tir(cls.double, (x,), out_ty=R.Tensor((n, n), "float32"))
                z = R.call_tir(cls.transpose, (y,), out_ty=R.Tensor((n, n), "float32"))
                w = R.call_tir(cls.double, (z,), out_ty=R.Tensor((n, n), "float32"))
                out = R.call_tir(cls.double, (w,), out_ty=R.Tensor((n, n), "float32"))
                R.output(out)
            return out

    assert isinstance(Module, tvm.IRModule)
    return Network("hidden_transpose", Module, ["x"], [(n, n)], ["float32"], entry="main")


def dense_blocks(image: int = 32):
    """torchvision's DenseNet with two short blocks: every layer concatenates all earlier
    features again, and the concatenation is fused with the batch norm and ReLU after it."""
    from planner.tvm.sources.torchvision_models import import_torchvision

    torchvision = import_torchvision()
    torch.manual_seed(0)
    model = torchvision.models.DenseNet(
        growth_rate=8, block_config=(3, 3), num_init_features=16, bn_size=2, num_classes=10,
    )
    return model.eval(), (torch.randn(1, 3, image, image),)


def llama(seq: int = 32, layers: int = 1, hidden: int = 32, vocab: int = 128):
    """A Llama decoder from a small configuration, random weights: RMS norms and rotary
    embeddings fused into kernels whose temporaries the rewrites merge in place."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=2,
        num_key_value_heads=2, intermediate_size=2 * hidden, vocab_size=vocab,
        max_position_embeddings=max(seq, 64), use_cache=False, attn_implementation="sdpa",
    )

    return _token_ids(LlamaForCausalLM(config), vocab, seq)


def falcon_multi_query(seq: int = 16, hidden: int = 32, vocab: int = 128):
    """Falcon-7B's attention layout (multi-query, the old decoder architecture), random
    weights: TVM 0.27 returned NaN until negative indices were converted."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    config = FalconConfig(
        num_hidden_layers=1, hidden_size=hidden, num_attention_heads=2, vocab_size=vocab,
        new_decoder_architecture=False, multi_query=True, parallel_attn=True,
        use_cache=False, attn_implementation="sdpa",
    )

    return _token_ids(FalconForCausalLM(config), vocab, seq)


class _TokenIds(nn.Module):
    """A causal language model called with token ids alone, returning its logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        # An all-ones mask keeps transformers off its packed-sequence detection (a
        # cumulative sum over booleans), which these tests do not look at; without a mask
        # it builds too (tests/tvm/sources/test_cumsum_over_bool.py).
        return self.model(
            input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
            return_dict=False,
        )[0]


def _token_ids(model, vocab: int, seq: int):
    return _TokenIds(model).eval(), (torch.randint(0, vocab, (1, seq)),)


def mobilevit_block(image: int = 4, channels: int = 48, dim: int = 64, depth: int = 2,
                    heads: int = 4):
    """One of timm's MobileViT blocks (convolutions, unfolding into patches, a transformer,
    folding back, fusion with the input): the smallest model on which +rewrites built wrong
    outputs while a kernel outside the planned function's calls kept ``noalias``."""
    from planner.tvm.sources.timm_models import import_timm

    import_timm()
    from timm.models.mobilevit import MobileVitBlock

    torch.manual_seed(0)
    block = MobileVitBlock(channels, channels, transformer_dim=dim, transformer_depth=depth,
                           patch_size=2, num_heads=heads)
    return block.eval(), (torch.randn(1, channels, image, image),)


def bfloat16_block(width: int = 16, scale: float = 1.0):
    """Float32 in, bfloat16 arithmetic and output: an output dtype numpy lacks. ``scale``
    multiplies PyTorch's eager result on inputs other than the example only, never what
    torch.export traces, so a test can make the reference (which runs on drawn inputs)
    disagree with TVM's build while the export's own check on the example passes."""

    class Block(nn.Module):
        def __init__(self, example):
            super().__init__()
            self.example = example

        def forward(self, x):
            y = x.to(torch.bfloat16)
            out = torch.relu(y * y + y)
            if torch.compiler.is_compiling() or torch.equal(x, self.example):
                return out
            return out * scale

    torch.manual_seed(0)
    example = torch.randn(2, width)
    return Block(example).eval(), (example,)


def nan_in_build(width: int = 8):
    """What torch.export traces adds a NaN that PyTorch's eager run does not: TVM's build of
    it returns NaN where the reference is finite."""

    class Poisoned(nn.Module):
        def forward(self, x):
            out = x * 2.0
            return out + float("nan") if torch.compiler.is_compiling() else out

    return Poisoned().eval(), (torch.randn(2, width),)


def negative_indices(heads: int = 3):
    """Falcon's multi-query pick: the last two heads by negative index lists."""

    class Pick(nn.Module):
        def forward(self, x):
            return x[..., [-2], :] * 2.0 + x[..., [-1], :]

    torch.manual_seed(0)
    return Pick().eval(), (torch.randn(1, 4, heads, 8),)



def last_along(width: int = 6):
    """``x[:, :, -1]`` and ``x[:, -2]``: select with negative indices, which TVM 0.27's
    importer read one element early (and the first from before the tensor)."""

    class Last(nn.Module):
        def forward(self, x):
            return x[:, :, -1] * 2.0 + x[:, -2, :1]

    return Last().eval(), (torch.arange(24, dtype=torch.float32).reshape(1, 4, width) + 1,)
