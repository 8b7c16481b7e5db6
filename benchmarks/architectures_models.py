"""Tiny configurations of the architectures users bring, random weights: the model file of
``benchmarks/architectures.py`` (``benchmarks/architectures_models.py:model`` with
``{"arch": NAME}``). Each is called as a deployment calls it: ids or pixels in, one tensor
out; a decoder is called with token ids alone (no mask, no cache), as docs/tvm.md says it
may be, an encoder-decoder with its default cache."""

from __future__ import annotations

import torch
from torch import nn

SEQ = 16
IMAGE = 32
VOCAB = 96


class _Ids(nn.Module):
    """A model called with token ids alone, its first output; defaults otherwise (the
    encoder-decoders keep their default cache)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, return_dict=False)[0]


class _Pair(_Ids):
    """An encoder-decoder called with encoder and decoder ids of the same length."""

    def forward(self, input_ids, decoder_input_ids):
        return self.model(
            input_ids=input_ids, decoder_input_ids=decoder_input_ids, return_dict=False
        )[0]


class _Pixels(_Ids):
    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values, return_dict=False)[0]


class _Speech(_Ids):
    def forward(self, input_features, decoder_input_ids):
        return self.model(
            input_features=input_features, decoder_input_ids=decoder_input_ids,
            return_dict=False,
        )[0]


def _ids(seq: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, seq))


def _causal(config_class, model_class, **config):
    config = config_class(vocab_size=VOCAB, **config)
    # use_cache=False: no cache object in the exported outputs.
    model = model_class(config)
    model.config.use_cache = False
    return _Ids(model), (_ids(),)


def _decoder(name: str):
    import transformers as t

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
    if name == "gpt2":
        return _causal(t.GPT2Config, t.GPT2LMHeadModel, n_embd=32, n_layer=2, n_head=4,
                       n_positions=64)
    if name == "llama":
        return _causal(t.LlamaConfig, t.LlamaForCausalLM, intermediate_size=64,
                       num_key_value_heads=2, max_position_embeddings=64, **small)
    if name == "falcon-mqa":
        return _causal(t.FalconConfig, t.FalconForCausalLM, new_decoder_architecture=False,
                       multi_query=True, parallel_attn=True, **small)
    # DeepSeek-V3 dense (its MoE layers start past the last) and with one routed layer.
    v3 = dict(intermediate_size=64, moe_intermediate_size=16, num_key_value_heads=4,
              num_experts_per_tok=2, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
              qk_nope_head_dim=8, v_head_dim=8, max_position_embeddings=64, **small)
    if name == "deepseek-v3":
        return _causal(t.DeepseekV3Config, t.DeepseekV3ForCausalLM, first_k_dense_replace=2,
                       n_routed_experts=4, n_group=1, topk_group=1, **v3)
    if name == "deepseek-v3-moe":
        return _causal(t.DeepseekV3Config, t.DeepseekV3ForCausalLM, first_k_dense_replace=1,
                       n_routed_experts=8, n_group=2, topk_group=1, **v3)
    if name == "deepseek-v2":
        return _causal(t.DeepseekV2Config, t.DeepseekV2ForCausalLM, intermediate_size=64,
                       moe_intermediate_size=16, first_k_dense_replace=1, num_key_value_heads=4,
                       n_routed_experts=4, num_experts_per_tok=2, q_lora_rank=None,
                       kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                       max_position_embeddings=64, **small)
    if name == "mixtral":
        return _causal(t.MixtralConfig, t.MixtralForCausalLM, intermediate_size=64,
                       num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                       max_position_embeddings=64, **small)
    if name == "qwen2-moe":
        return _causal(t.Qwen2MoeConfig, t.Qwen2MoeForCausalLM, intermediate_size=64,
                       moe_intermediate_size=16, shared_expert_intermediate_size=32,
                       num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                       max_position_embeddings=64, **small)
    if name == "olmoe":
        return _causal(t.OlmoeConfig, t.OlmoeForCausalLM, intermediate_size=16,
                       num_key_value_heads=4, num_experts=4, num_experts_per_tok=2,
                       max_position_embeddings=64, **small)
    if name == "mamba":
        return _causal(t.MambaConfig, t.MambaForCausalLM, hidden_size=32, num_hidden_layers=2,
                       state_size=8)
    if name == "mamba2":
        return _causal(t.Mamba2Config, t.Mamba2ForCausalLM, hidden_size=32,
                       num_hidden_layers=1, num_heads=4, head_dim=16, state_size=8, n_groups=1,
                       chunk_size=8)
    return None


def _seq2seq(name: str):
    import transformers as t

    small = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                 max_position_embeddings=64, vocab_size=VOCAB)
    if name == "bart":
        return _Pair(t.BartModel(t.BartConfig(**small))), (_ids(), _ids())
    if name == "mbart":
        return _Pair(t.MBartModel(t.MBartConfig(**small))), (_ids(), _ids())
    if name == "marian":
        config = t.MarianConfig(decoder_vocab_size=VOCAB, pad_token_id=0, **small)
        return _Pair(t.MarianModel(config)), (_ids(), _ids())
    if name == "t5":
        config = t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                            num_decoder_layers=1, num_heads=4)
        return _Pair(t.T5Model(config)), (_ids(), _ids())
    if name == "whisper":
        config = t.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, encoder_layers=1,
                                 decoder_layers=1, encoder_attention_heads=4,
                                 decoder_attention_heads=4, d_model=32, encoder_ffn_dim=64,
                                 decoder_ffn_dim=64, max_source_positions=16,
                                 max_target_positions=32, pad_token_id=0, bos_token_id=1,
                                 eos_token_id=2, decoder_start_token_id=1)
        return _Speech(t.WhisperModel(config)), (torch.randn(1, 8, 32), _ids())
    return None


def _vision(name: str):
    import transformers as t

    pixels = (torch.randn(1, 3, IMAGE, IMAGE),)
    if name == "vit":
        config = t.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, image_size=IMAGE, patch_size=8)
        return _Pixels(t.ViTModel(config)), pixels
    if name == "deit":
        config = t.DeiTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, image_size=IMAGE, patch_size=8)
        return _Pixels(t.DeiTModel(config)), pixels
    if name == "swin":
        config = t.SwinConfig(image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1],
                              num_heads=[2, 4], window_size=4)
        return _Pixels(t.SwinModel(config)), pixels
    if name == "convnext":
        config = t.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])
        return _Pixels(t.ConvNextModel(config)), pixels
    if name == "mobilevit":
        import timm

        return timm.create_model("mobilevit_xxs", pretrained=False, num_classes=10), pixels
    return None


def model(arch: str = "llama"):
    """The tiny ``arch`` (see ARCHITECTURES in benchmarks/architectures.py) and its input."""
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    torch.manual_seed(0)
    found = _decoder(arch) or _seq2seq(arch) or _vision(arch)
    if found is None:
        raise ValueError(f"no architecture {arch!r} here")
    module, inputs = found
    return module.eval(), inputs
