"""A language model written for TVM, as MLC-LLM writes them: ``relax.frontend.nn`` with
TVM's paged KV cache.

A GPT-NeoX-style decoder (layer norms, attention and MLP side by side from the same input,
GELU), not the Llama shape Peakwatch builds itself: Peakwatch plans whatever module a file
returns. Try it with

    python3 -m planner llm --model examples/tracked-repository/models/decoder.py:build \
        --context 256,1024 --prefill-chunk 32,128

``build`` returns an ``LLMDeployment``; Peakwatch passes it the context window and the
prefill chunk of each point, because it takes them.
"""

from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op

from planner.tvm.llm.decoders import (
    DecoderConfig,
    deployment_of,
    last_token,
    paged_kv_cache,
    standard_spec,
)


class Block(nn.Module):
    def __init__(self, config: DecoderConfig):
        self.config = config
        width = (config.heads + 2 * config.kv_heads) * config.head_dim
        self.ln_attn = nn.LayerNorm(config.hidden, eps=1e-5)
        self.ln_mlp = nn.LayerNorm(config.hidden, eps=1e-5)
        self.qkv = nn.Linear(config.hidden, width, bias=True)
        self.out = nn.Linear(config.hidden, config.hidden, bias=True)
        self.up = nn.Linear(config.hidden, config.intermediate, bias=True)
        self.down = nn.Linear(config.intermediate, config.hidden, bias=True)

    def forward(self, x, cache, layer: int):
        c = self.config
        b, s, _ = x.shape
        qkv = op.reshape(self.qkv(self.ln_attn(x)), (b, s, c.heads + 2 * c.kv_heads, c.head_dim))
        attention = cache.attention_with_fused_qkv(layer, qkv, c.heads, c.head_dim**-0.5)
        attention = self.out(op.reshape(attention, (b, s, c.hidden)))
        mlp = self.down(op.gelu(self.up(self.ln_mlp(x))))
        return x + attention + mlp


class ParallelDecoder(nn.Module):
    def __init__(self, config: DecoderConfig):
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.hidden)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
        self.ln_final = nn.LayerNorm(config.hidden, eps=1e-5)
        self.unembed = nn.Linear(config.hidden, config.vocab, bias=False)

    def _hidden(self, ids, cache):
        x = self.embed(ids)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        return self.ln_final(x)

    def prefill(self, ids, cache):
        return self.unembed(last_token(self._hidden(ids, cache))), cache

    def decode(self, ids, cache):
        return self.unembed(self._hidden(ids, cache)), cache

    def batch_prefill(self, ids, logit_positions, cache):
        return self.unembed(op.take(self._hidden(ids, cache), logit_positions, axis=1)), cache

    def batch_decode(self, ids, cache):
        return self.unembed(self._hidden(ids, cache)), cache

    def create_paged_kv_cache(self, max_batch_size, max_total_seq_len, prefill_chunk_size,
                              page_size, support_sliding_window):
        return paged_kv_cache(self.config, max_batch_size, max_total_seq_len,
                              prefill_chunk_size, page_size, support_sliding_window)


def build(layers=2, hidden=128, heads=4, vocab=1024, context_window=256, prefill_chunk=32):
    config = DecoderConfig(
        family="parallel", layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
        intermediate=4 * hidden, vocab=vocab, context_window=context_window,
        prefill_chunk=prefill_chunk,
    )
    # No framework model to compare with: every build is checked against TVM's own.
    return deployment_of(ParallelDecoder(config), config, name="parallel-decoder",
                         spec=standard_spec(batched=True))
