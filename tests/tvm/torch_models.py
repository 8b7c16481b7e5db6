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
    on inputs other than the example (the export checks its program on the example, the
    reference check runs on drawn inputs), which torch.export never traces: that point's
    check fails, the others pass."""

    def __init__(self, width: int, wrong_at: int, example):
        super().__init__()
        self.first, self.second = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.wrong_at = wrong_at
        self.example = example

    def forward(self, x):
        out = self.second(torch.relu(self.first(x)))
        if torch.compiler.is_compiling() or x.shape[1] != self.wrong_at:
            return out
        if x.shape == self.example.shape and torch.equal(x, self.example):
            return out
        return out + 1


def wrong_at(width: int = 8, seq: int = 16, at: int = 16):
    torch.manual_seed(0)
    example = torch.randn(1, seq, width)
    return _WrongAt(width, at, example).eval(), (example,)


def gpt2_table(positions: int = 16, seq: int = 8, masked: bool = True):
    """A two-layer GPT-2 with a ``positions``-row position table (``n_positions``), called
    with an all-ones mask or (``masked=False``) with token ids alone."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=positions,
                        use_cache=False)
    model = _Logits(GPT2LMHeadModel(config), masked=masked)
    return model.eval(), (torch.zeros(1, seq, dtype=torch.int64),)


class _Logits(nn.Module):
    """A causal language model called as a deployment calls it: token ids in, logits out,
    no cache; with an all-ones mask unless ``masked`` is False."""

    def __init__(self, model, masked: bool = True):
        super().__init__()
        self.model, self.masked = model, masked

    def forward(self, ids):
        mask = {"attention_mask": torch.ones_like(ids)} if self.masked else {}
        return self.model(input_ids=ids, use_cache=False, **mask).logits


class _EmptyPieces(nn.Module):
    """A split with pieces of width 0 in it, as Mamba2 splits its projection."""

    def forward(self, x):
        empty, left, nothing, right = torch.split(x, [0, 4, 0, 4], dim=-1)
        return left * 2 + right, empty.sum() + nothing.sum()


def empty_pieces():
    return _EmptyPieces().eval(), (torch.randn(2, 8),)


def mamba2(seq: int = 8):
    """Mamba2 from a small configuration (no gated MLP: ``d_mlp`` is 0), random weights."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import Mamba2Config, Mamba2ForCausalLM

    torch.manual_seed(0)
    config = Mamba2Config(
        num_hidden_layers=1, hidden_size=32, state_size=8, num_heads=4, head_dim=16,
        expand=2, n_groups=1, vocab_size=64, chunk_size=8,
    )
    model = _Logits(Mamba2ForCausalLM(config), masked=False)
    return model.eval(), (torch.zeros(1, seq, dtype=torch.int64),)


class _ComplexRotary(nn.Module):
    """A rotary embedding in complex arithmetic, as Llama's first release and DeepSeek-V2
    write it: view_as_complex, polar, a complex product, view_as_real."""

    def __init__(self, width: int, scale: float, reduce: bool):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, width, 2) / width))
        self.scale, self.reduce = scale, reduce

    def forward(self, x):  # (batch, seq, heads, width)
        seq = x.shape[1]
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), self.inv_freq)
        turns = torch.polar(torch.ones_like(angles), angles) * self.scale
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        rotated = pairs * turns.unsqueeze(1)
        if self.reduce:
            return rotated.sum(-1).real  # a complex sum: not converted
        return torch.view_as_real(rotated).flatten(3)


def complex_rotary(seq: int = 6, width: int = 8, scale: float = 0.5, reduce: bool = False):
    torch.manual_seed(0)
    return _ComplexRotary(width, scale, reduce).eval(), (torch.randn(1, seq, 2, width),)


def deepseek_v2(seq: int = 8):
    """DeepSeek-V2's attention (complex rotary, low-rank keys and values) in one dense layer,
    random weights."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

    torch.manual_seed(0)
    config = DeepseekV2Config(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_attention_heads=2, num_key_value_heads=2, vocab_size=64, q_lora_rank=None,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
        first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64,
    )
    model = _Logits(DeepseekV2ForCausalLM(config))
    return model.eval(), (torch.zeros(1, seq, dtype=torch.int64),)


def mixtral(seq: int = 8):
    """Mixtral's mixture of experts (4 experts, top-2) in two layers, random weights: its
    block loops over the experts the router hit, which torch.export refuses."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64,
    )
    return _Logits(MixtralForCausalLM(config)).eval(), (torch.randint(0, 64, (1, seq)),)


def gpt_oss(seq: int = 8):
    """GPT-OSS (4 experts, top-2) in two layers, random weights: its experts are stacked
    weight tensors indexed by expert, not modules, and its router (its own class, a
    softmax over the top-k logits) hands the experts every token's scores."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    config = GptOssConfig(
        vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64, sliding_window=4,
        rope_scaling=None,
    )
    return _Logits(GptOssForCausalLM(config)).eval(), (torch.randint(0, 64, (1, seq)),)


def granitemoe(seq: int = 8):
    """GraniteMoE (4 experts, top-2) in two layers, random weights: its router itself reads
    the routing (each expert's token count as a Python list), its experts one stacked
    matmul split by those counts."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import GraniteMoeConfig, GraniteMoeForCausalLM

    torch.manual_seed(0)
    config = GraniteMoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64,
    )
    return _Logits(GraniteMoeForCausalLM(config)).eval(), (torch.randint(0, 64, (1, seq)),)


class _ByCapacity(nn.Module):
    """Stacked experts whose outputs are divided by how many tokens each expert got (a
    load-dependent scale): routing every token to every expert changes those counts, so
    the block is not a weighting of its experts on each token."""

    def __init__(self, width: int = 8, experts: int = 4):
        super().__init__()
        self.route = nn.Linear(width, experts, bias=False)
        self.weight = nn.Parameter(torch.randn(experts, width, width) / width**0.5)
        self.top_k = 2

    def forward(self, x):
        weights, chosen = torch.topk(torch.softmax(self.route(x), dim=-1), self.top_k)
        out = torch.zeros_like(x)
        for number in range(self.weight.shape[0]):
            rows, slot = torch.where(chosen == number)
            load = rows.numel()
            part = x[rows] @ self.weight[number] * weights[rows, slot, None] / max(load, 1)
            out = out.index_add(0, rows, part)
        return out


def by_capacity(tokens: int = 6):
    torch.manual_seed(0)
    return _ByCapacity().eval(), (torch.randn(tokens, 8),)


class _SortedStacked(nn.Module):
    """Stacked experts run on the tokens sorted by expert, in slices cut by each expert's
    count (the permute, grouped matmul and unpermute a grouped-GEMM deployment does), its
    top-k count read again to un-sort: written here, not by any family."""

    def __init__(self, width: int = 8, experts: int = 4):
        super().__init__()
        self.scores = nn.Linear(width, experts, bias=False)
        self.up = nn.Parameter(torch.randn(experts, width, 2 * width) / width**0.5)
        self.down = nn.Parameter(torch.randn(experts, 2 * width, width) / width**0.5)
        self.per_token = 2

    def forward(self, x):
        top, chosen = torch.topk(self.scores(x), self.per_token, dim=-1)
        weights = torch.softmax(top, dim=-1)
        order = torch.argsort(chosen.reshape(-1))
        rows = x[order // self.per_token]
        counts = torch.bincount(chosen.reshape(-1), minlength=self.up.shape[0]).tolist()
        parts, start = [], 0
        for number, count in enumerate(counts):
            piece = rows[start:start + count]
            parts.append(torch.relu(piece @ self.up[number]) @ self.down[number])
            start += count
        done = torch.empty_like(rows).index_copy(0, order, torch.cat(parts))
        return (done.reshape(x.shape[0], self.per_token, -1) * weights[..., None]).sum(1)


def sorted_stacked(tokens: int = 6):
    torch.manual_seed(0)
    return _SortedStacked().eval(), (torch.randn(tokens, 8),)


def deepseek_v3_moe(seq: int = 8):
    """DeepSeek-V3 with a routed layer (8 experts in 2 groups, top-2 of one group, a shared
    expert) after a dense one: its router picks experts with an unsorted top-k and hands
    them to a ``moe`` method that loops over the experts."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(0)
    config = DeepseekV3Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
        num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
        topk_group=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=8, max_position_embeddings=64,
    )
    model = DeepseekV3ForCausalLM(config)
    # Zero (as initialised) the correction bias would leave the group choice to the weights
    # alone; drawn, it moves the choice as a trained model's does.
    for name, buffer in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            buffer.normal_()
    return _Logits(model).eval(), (torch.randint(0, 64, (1, seq)),)


def _loop_over_hit(experts, x, chosen, weights, fed=None):
    """transformers' dispatch: each expert the router hit, on its own rows of ``fed`` (``x``
    unless given), weighted by its slot's weight, added into the rows of an output like
    ``x``: sizes read from the data, which torch.export refuses."""
    fed = x if fed is None else fed
    out = torch.zeros_like(x)
    for number in chosen.unique():
        rows, slot = torch.where(chosen == number)
        out[rows] += experts[number](fed[rows]) * weights[rows, slot, None]
    return out


class _SigmoidRouted(nn.Module):
    """A block built like Mixtral's (gate, experts, top_k) that routes by a sigmoid, not a
    softmax: its fixed-shape form would be another model."""

    def __init__(self, width: int = 8, experts: int = 4):
        super().__init__()
        self.top_k = 2
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(width, width) for _ in range(experts))

    def forward(self, x):
        weights, chosen = torch.topk(torch.sigmoid(self.gate(x)), self.top_k, dim=-1)
        return _loop_over_hit(self.experts, x, chosen, weights)


class _WideExperts(nn.Module):
    """Four wide experts (8 -> 512 -> 8), a softmax top-2 router: the experts' activations
    are nearly all of its memory, so the form decides the plan."""

    def __init__(self, width: int = 8, inner: int = 512, experts: int = 4):
        super().__init__()
        self.top_k = 2
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(width, inner), nn.ReLU(), nn.Linear(inner, width))
            for _ in range(experts)
        )

    def forward(self, x):
        scores = torch.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(scores, self.top_k, dim=-1)
        return _loop_over_hit(self.experts, x, chosen, weights)


def wide_experts(tokens: int = 16):
    torch.manual_seed(0)
    return _WideExperts().eval(), (torch.randn(tokens, 8),)


class _ClampedIndex(nn.Module):
    """Integer positions clamped on one side only (``clamp(max=...)``, ``clamp_min``), as
    SAM's relative positions are: the importer leaves the other bound infinite."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(8, 4))

    def forward(self, x):
        index = (x * 12 - 2).long()
        return self.table[torch.clamp(index, max=7).clamp_min(0)] * 2


def clamped_index():
    torch.manual_seed(0)
    return _ClampedIndex().eval(), (torch.rand(10),)


class _GroupNormed(nn.Module):
    """A convolution then a GroupNorm: TVM 0.27 lowers the norm with let-bindings (``Bind``
    statements, which hold for the rest of their sequence and have no body of their own)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.norm(self.conv(x)) - x


def group_normed():
    torch.manual_seed(0)
    return _GroupNormed().eval(), (torch.randn(1, 4, 8, 8),)


class _WidePool(nn.Module):
    """Average pools whose window is wider than the map (``ceil_mode``; EfficientNet's
    pooler is ``AvgPool2d(hidden_dim, ceil_mode=True)``), beside one whose single window
    leaves a row out (2 x 2 over 3 x 3): torch clips the first to the map."""

    def __init__(self, window: int = 512):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1)
        self.wide = nn.AvgPool2d(window, ceil_mode=True)
        self.part = nn.AvgPool2d(2)

    def forward(self, x):
        y = self.conv(x)
        return self.wide(y) * 2 + self.part(y)


def wide_pool(window: int = 512):
    torch.manual_seed(0)
    return _WidePool(window).eval(), (torch.randn(1, 4, 3, 3),)


class _CountedRows(nn.Module):
    """Keeps as many rows as its first column has positive entries: a size read from the
    values (``.item()``), beside the symbolic length of its input."""

    def forward(self, x):
        kept = (x[:, 0] > 0).sum().item()
        torch._check(kept >= 0)
        torch._check(kept <= x.shape[0])
        return (x[:kept] * 2).sum(0)


def counted_rows():
    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=16)
    return _CountedRows().eval(), (torch.randn(8, 4),), ({0: seq},)


class _Extremes(nn.Module):
    """``amax`` and ``amin`` over one dimension, several and all of them."""

    def forward(self, x):
        rows = x.amax(dim=-1, keepdim=True) - x.amin(dim=(0, 2), keepdim=True)
        return rows * 2 + x.amax()


def extremes():
    torch.manual_seed(0)
    return _Extremes().eval(), (torch.randn(3, 4, 5),)


class _Unfolded(nn.Module):
    """Patches taken with ``F.unfold`` (torch decomposes it to an index by broadcast row
    and column tensors), as timm's TNT splits its pixels."""

    def forward(self, x):
        patches = torch.nn.functional.unfold(x, kernel_size=3, stride=2, padding=1)
        return patches * 2 + x[:, :, [[0], [2]], [1, -1, 3]].sum()


def unfolded():
    torch.manual_seed(0)
    return _Unfolded().eval(), (torch.randn(1, 2, 8, 8),)


def sigmoid_routed(tokens: int = 6):
    torch.manual_seed(0)
    return _SigmoidRouted().eval(), (torch.randn(tokens, 8),)


class _TanhRouted(_SigmoidRouted):
    """Routed by a top-k over a tanh of the router's logits, shifted to be positive: neither
    a softmax nor a sigmoid (a ReLU would tie scores at 0, whose order TVM and torch may
    break differently)."""

    def forward(self, x):
        weights, chosen = torch.topk(torch.tanh(self.gate(x)) + 1.0, self.top_k, dim=-1)
        return _loop_over_hit(self.experts, x, chosen, weights)


def tanh_routed(tokens: int = 6):
    torch.manual_seed(0)
    return _TanhRouted().eval(), (torch.randn(tokens, 8),)


class _OnDoubled(_SigmoidRouted):
    """A routed block whose experts see twice the block's input: no weighting of the
    experts on the input reproduces it, whatever the router."""

    def forward(self, x):
        weights, chosen = torch.topk(torch.sigmoid(self.gate(x)), self.top_k, dim=-1)
        return _loop_over_hit(self.experts, x, chosen, weights, fed=2 * x)


def on_doubled(tokens: int = 6):
    torch.manual_seed(0)
    return _OnDoubled().eval(), (torch.randn(tokens, 8),)


def _sparse_mix(logits, top_k: int):
    """A router that is neither a softmax nor a sigmoid top-k: each pick's weight is a
    softmax over the scores not yet picked, the picked one masked out after (as a sparse
    mixer picks in turn)."""
    scores, weights, chosen = logits, [], []
    for _ in range(top_k):
        pick = scores.argmax(dim=-1, keepdim=True)
        weights.append(torch.softmax(scores, dim=-1).gather(-1, pick))
        chosen.append(pick)
        scores = scores.scatter(-1, pick, float("-inf"))
    return torch.cat(weights, dim=-1), torch.cat(chosen, dim=-1)


class _MixedInTurn(nn.Module):
    """An MoE routed by :func:`_sparse_mix`, its router named neither gate nor router."""

    def __init__(self, width: int = 8, experts: int = 4):
        super().__init__()
        self.scorer = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(width, width) for _ in range(experts))

    def forward(self, x):
        mixed, picked = _sparse_mix(self.scorer(x), 2)
        return _loop_over_hit(self.experts, x, picked, mixed)


def mixed_in_turn(tokens: int = 6):
    torch.manual_seed(0)
    return _MixedInTurn().eval(), (torch.randn(tokens, 8),)


class _ReadsAConstant(nn.Module):
    """Sizes a table by a number read from a tensor no input reaches (PhiMoE's rotary
    embedding reads ``cache_position[-1] + 1`` so)."""

    def forward(self, x):
        positions = torch.arange(x.shape[-1])
        length = int(positions[-1]) + 1
        table = torch.arange(length, dtype=x.dtype) / length
        return x * table


def reads_a_constant():
    torch.manual_seed(0)
    return _ReadsAConstant().eval(), (torch.randn(2, 8),)


class _IndexAdded(_SigmoidRouted):
    """Every expert's tokens gathered with ``where`` and added back with ``index_add``, as
    OLMoE does: torch.export takes it (the sizes become unbacked symbols), TVM does not."""

    def forward(self, x):
        weights, chosen = torch.topk(torch.sigmoid(self.gate(x)), self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for number, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == number)
            out = out.index_add(0, rows, expert(x[rows]) * weights[rows, slot, None])
        return out


def index_added(tokens: int = 6):
    torch.manual_seed(0)
    return _IndexAdded().eval(), (torch.randn(tokens, 8),)


class _DenseByHand(_SigmoidRouted):
    """The same attributes as a routed block, its forward written by a user in fixed shapes
    (every expert on every token, weighted): a block Peakwatch must leave as it is."""

    def forward(self, x):
        weights, chosen = torch.topk(torch.sigmoid(self.gate(x)), self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for number, expert in enumerate(self.experts):
            share = (weights * (chosen == number)).sum(dim=-1, keepdim=True)
            out = out + expert(x) * share * 0.5
        return out


def dense_by_hand(tokens: int = 6):
    torch.manual_seed(0)
    return _DenseByHand().eval(), (torch.randn(tokens, 8),)


class _EmptyCache(nn.Module):
    """Keys appended to an empty cache, as an encoder-decoder's default cache does it: a cat
    of an empty 1-D tensor with a 4-D one, which torch allows."""

    def forward(self, keys):
        cache = torch.zeros(0, dtype=keys.dtype)
        return torch.cat([cache, keys], dim=-2) * 2


def empty_cache(seq: int = 4):
    torch.manual_seed(0)
    return _EmptyCache().eval(), (torch.randn(1, 2, seq, 8),)


def mamba(seq: int = 8):
    """A one-layer Mamba (v1): its slow path loops over the sequence in Python."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(0)
    config = MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, state_size=4)
    return _Logits(MambaForCausalLM(config), masked=False).eval(), (
        torch.zeros(1, seq, dtype=torch.int64),
    )


class _EncoderDecoder(nn.Module):
    """An encoder-decoder called with encoder and decoder ids, its default cache and all."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, decoder_ids):
        return self.model(input_ids=ids, decoder_input_ids=decoder_ids, return_dict=False)[0]


def encoder_decoder(family: str = "bart", seq: int = 8):
    """A one-layer BART or T5 (hidden 16), random weights."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    import transformers

    torch.manual_seed(0)
    if family == "t5":
        config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1,
                                       num_decoder_layers=1, num_heads=4)
        model = transformers.T5Model(config)
    else:
        config = transformers.BartConfig(
            vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
            decoder_ffn_dim=32, max_position_embeddings=64,
        )
        model = transformers.BartModel(config)
    ids = torch.randint(0, 64, (1, seq))
    return _EncoderDecoder(model).eval(), (ids, ids.clone())
