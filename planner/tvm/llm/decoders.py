"""Language-model decoders written the way TVM's users deploy them.

MLC-LLM and TVM's own LLM examples write a decoder with ``tvm.relax.frontend.nn`` and keep
its keys and values in TVM's paged KV cache (``relax.frontend.nn.llm.kv_cache``), whose TIR
kernels build for ``llvm`` as for ``cuda``. One module has several entry functions:
``prefill`` (a chunk of one sequence's tokens), ``decode`` (one token), their batched
forms ``batch_prefill`` and ``batch_decode``, and ``create_paged_kv_cache``, which allocates
the cache for a context window and a prefill chunk chosen at run time.

:func:`decoder_deployment` builds such a module for a :class:`DecoderConfig` (Llama-style:
RMSNorm, rotary embeddings, grouped-query attention, SwiGLU; ``family="qwen2"`` adds
Qwen2's biases on the query, key and value projections) together with the matching
``transformers`` model (random weights), whose weights the TVM module runs with and whose
own cache is the reference for every step (:mod:`planner.tvm.llm.deployment`).

A repository's model file may return its own :class:`LLMDeployment` (docs/llm.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op, spec

#: The entry functions a deployment exports, in the order a Result lists them.
FUNCTIONS = ("prefill", "decode", "batch_prefill", "batch_decode", "create_paged_kv_cache")
#: The functions that run the model (the cache's creation plans nothing).
MODEL_FUNCTIONS = FUNCTIONS[:4]
FAMILIES = ("llama", "qwen2")
#: The only page size TVM 0.27's TIR kernels of the paged KV cache work with.
TIR_PAGE_SIZE = 16
#: The symbolic lengths of the exported functions: tokens in a prefill, sequences in a batch.
SEQ_LEN, BATCH_SIZE = "seq_len", "batch_size"


class LLMError(ValueError):
    """A decoder's configuration is wrong, or transformers is missing."""


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder's sizes and the cache it runs with.

    ``context_window`` is the most tokens the cache holds (all sequences together),
    ``prefill_chunk`` the most tokens one prefill call takes; both are run-time arguments of
    ``create_paged_kv_cache`` and the upper bounds the functions' memory is planned for.
    """

    family: str = "llama"
    layers: int = 2
    hidden: int = 256
    heads: int = 8
    kv_heads: int = 2
    intermediate: int = 512
    vocab: int = 4096
    page_size: int = 16
    context_window: int = 512
    prefill_chunk: int = 64
    max_batch: int = 2
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if not isinstance(self.family, str) or not self.family:
            raise LLMError(f"family must be a name, not {self.family!r}")
        for name in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab",
                     "page_size", "context_window", "prefill_chunk", "max_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise LLMError(f"{name} must be a positive integer, not {value!r}")
        if self.hidden % self.heads:
            raise LLMError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise LLMError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2:
            raise LLMError(f"the head size ({self.head_dim}) must be even for rotary embeddings")
        if self.prefill_chunk > self.context_window:
            raise LLMError(
                f"prefill_chunk ({self.prefill_chunk}) is larger than the context window "
                f"({self.context_window}) the cache holds"
            )
        if self.page_size != TIR_PAGE_SIZE:
            # TIRPagedKVCache builds its append kernel with _kv_cache_transpose_append's
            # default page size whatever the cache is created with: any other size fails
            # at the first prefill ("Mismatched pages.strides").
            raise LLMError(
                f"page_size must be {TIR_PAGE_SIZE}: TVM {tvm.__version__}'s TIR KV cache "
                f"writes pages of {TIR_PAGE_SIZE} tokens whatever size the cache is created with"
            )
        if self.dtype not in ("float32", "float16"):
            raise LLMError(f"dtype must be float32 or float16, not {self.dtype!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def shape_bounds(self) -> dict[str, int]:
        return {SEQ_LEN: self.prefill_chunk, BATCH_SIZE: self.max_batch}

    def cache_arguments(self) -> tuple[int, ...]:
        """``create_paged_kv_cache``'s arguments: sequences, context window, prefill chunk,
        page size, sliding window (off)."""
        return (self.max_batch, self.context_window, self.prefill_chunk, self.page_size, 0)


class _Attention(nn.Module):
    def __init__(self, config: DecoderConfig):
        self.config = config
        width = (config.heads + 2 * config.kv_heads) * config.head_dim
        self.qkv_proj = nn.Linear(
            config.hidden, width, bias=config.family == "qwen2", dtype=config.dtype
        )
        self.o_proj = nn.Linear(
            config.heads * config.head_dim, config.hidden, bias=False, dtype=config.dtype
        )

    def forward(self, x: nn.Tensor, cache, layer: int) -> nn.Tensor:
        c = self.config
        b, s, _ = x.shape
        qkv = op.reshape(self.qkv_proj(x), (b, s, c.heads + 2 * c.kv_heads, c.head_dim))
        out = cache.attention_with_fused_qkv(layer, qkv, c.heads, sm_scale=c.head_dim**-0.5)
        return self.o_proj(op.reshape(out, (b, s, c.heads * c.head_dim)))


class _MLP(nn.Module):
    def __init__(self, config: DecoderConfig):
        self.intermediate = config.intermediate
        self.gate_up_proj = nn.Linear(
            config.hidden, 2 * config.intermediate, bias=False, dtype=config.dtype
        )
        self.down_proj = nn.Linear(
            config.intermediate, config.hidden, bias=False, dtype=config.dtype
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        gate, up = op.split(self.gate_up_proj(x), 2, axis=-1)
        return self.down_proj(op.silu(gate) * up)


class _Layer(nn.Module):
    def __init__(self, config: DecoderConfig):
        norm = dict(axes=-1, epsilon=config.rms_eps, bias=False, dtype=config.dtype)
        self.input_layernorm = nn.RMSNorm(config.hidden, **norm)
        self.self_attn = _Attention(config)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden, **norm)
        self.mlp = _MLP(config)

    def forward(self, x: nn.Tensor, cache, layer: int) -> nn.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cache, layer)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """The decoder with its entry functions, as ``export_tvm`` exports them."""

    def __init__(self, config: DecoderConfig):
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden, dtype=config.dtype)
        self.layers = nn.ModuleList([_Layer(config) for _ in range(config.layers)])
        self.norm = nn.RMSNorm(
            config.hidden, axes=-1, epsilon=config.rms_eps, bias=False, dtype=config.dtype
        )
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False, dtype=config.dtype)

    def _hidden(self, ids: nn.Tensor, cache) -> nn.Tensor:
        x = self.embed_tokens(ids)
        for index, layer in enumerate(self.layers):
            x = layer(x, cache, index)
        return self.norm(x)

    def _logits(self, x: nn.Tensor) -> nn.Tensor:
        logits = self.lm_head(x)
        return logits if logits.dtype == "float32" else logits.astype("float32")

    def prefill(self, ids: nn.Tensor, cache):
        """A chunk of one sequence's tokens: the last token's logits, as a server samples."""
        return self._logits(last_token(self._hidden(ids, cache))), cache

    def decode(self, ids: nn.Tensor, cache):
        return self._logits(self._hidden(ids, cache)), cache

    def batch_prefill(self, ids: nn.Tensor, logit_positions: nn.Tensor, cache):
        """Several sequences' chunks laid end to end in ``ids`` (one row, as the cache takes
        them); the logits at ``logit_positions``, each sequence's last token."""
        x = self._hidden(ids, cache)
        return self._logits(op.take(x, logit_positions, axis=1)), cache

    def batch_decode(self, ids: nn.Tensor, cache):
        return self._logits(self._hidden(ids, cache)), cache

    def create_paged_kv_cache(
        self, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
        support_sliding_window,
    ):
        return paged_kv_cache(
            self.config, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
            support_sliding_window,
        )

    def export_spec(self) -> dict:
        return standard_spec(batched=True)


def paged_kv_cache(
    config: DecoderConfig, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
    support_sliding_window,
):
    """TVM's paged KV cache with TIR kernels for ``config``'s attention (rotary embeddings
    applied as keys enter the cache), for a module's ``create_paged_kv_cache`` to return."""
    from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, RopeMode, TIRPagedKVCache

    c = config
    cache = TIRPagedKVCache(
        attn_kind="mha",
        max_batch_size=max_batch_size,
        max_total_seq_len=max_total_seq_len,
        prefill_chunk_size=prefill_chunk_size,
        page_size=page_size,
        support_sliding_window=support_sliding_window,
        layer_partition=relax.ShapeExpr([0, c.layers]),
        num_hidden_layers=c.layers,
        num_attention_heads=c.heads,
        num_key_value_heads=c.kv_heads,
        qk_head_dim=c.head_dim,
        v_head_dim=c.head_dim,
        mla_original_qk_head_dim=0,
        mla_original_v_head_dim=0,
        rope_mode=RopeMode.NORMAL,
        rope_scale=1,
        rope_theta=c.rope_theta,
        rope_scaling={},
        rope_ext_factors=relax.prim_value(0),
        rotary_dim=c.head_dim,
        enable_disaggregation=False,
        dtype=c.dtype,
        target=tvm.target.Target.current() or tvm.target.Target("llvm"),
    )
    # An Object the exported function returns, under the name the runtime expects.
    return PagedKVCache(_expr=cache._expr, _name="paged_kv_cache")


def standard_spec(*, batched: bool = True) -> dict:
    """The ``export_tvm`` spec of the functions Peakwatch runs: ``prefill(ids, cache)``,
    ``decode(ids, cache)``, with ``batched`` ``batch_prefill(ids, logit_positions, cache)``
    and ``batch_decode(ids, cache)``, all with packed parameters, and
    ``create_paged_kv_cache`` with the five integers of
    :meth:`DecoderConfig.cache_arguments`."""
    from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache

    cache = spec.Object(object_type=PagedKVCache)
    packed = {"param_mode": "packed", "effect_mode": "none"}
    functions = {
        "prefill": {"ids": spec.Tensor([1, SEQ_LEN], "int32"), "cache": cache, "$": packed},
        "decode": {"ids": spec.Tensor([1, 1], "int32"), "cache": cache, "$": packed},
    }
    if batched:
        functions["batch_prefill"] = {
            "ids": spec.Tensor([1, SEQ_LEN], "int32"),
            "logit_positions": spec.Tensor([BATCH_SIZE], "int32"),
            "cache": cache,
            "$": packed,
        }
        functions["batch_decode"] = {
            "ids": spec.Tensor([BATCH_SIZE, 1], "int32"), "cache": cache, "$": packed,
        }
    functions["create_paged_kv_cache"] = {
        **{name: int for name in (
            "max_batch_size", "max_total_seq_len", "prefill_chunk_size", "page_size",
            "support_sliding_window",
        )},
        "$": {"param_mode": "none", "effect_mode": "none"},
    }
    return functions


def last_token(x: nn.Tensor) -> nn.Tensor:
    """The hidden state of a prefill's last token, as MLC-LLM's decoders take it before the
    vocabulary projection (the only logits a server samples from)."""
    return op.tensor_expr_op(_last_token, name_hint="index", args=[x])


def _last_token(x):
    from tvm import te

    batch, length, width = x.shape
    return te.compute((batch, 1, width), lambda i, _, k: x[i, length - 1, k], name="index")


@dataclass
class LLMDeployment:
    """A TVM LLM module with its entry functions, the weights it runs with, and what checks it.

    ``params`` are the module's packed parameters in the order of its ``params`` tuple;
    ``reference`` (None where none exists) runs the same steps in the framework the weights
    came from (:class:`Reference`).
    """

    name: str
    config: DecoderConfig
    mod: tvm.IRModule
    param_names: list[str]
    params: list[np.ndarray]
    reference: Reference | None = None
    #: Said in every Result, as for any network (:attr:`Network.assumptions`).
    assumptions: tuple[str, ...] = ()
    functions: tuple[str, ...] = FUNCTIONS

    @property
    def params_bytes(self) -> int:
        return sum(int(p.nbytes) for p in self.params)


@dataclass
class Reference:
    """The framework's own run of a prefill followed by decode steps with its own cache.

    ``run(prompt, steps)`` takes the prompt's token ids and one token id per decode step and
    returns the logits after the prompt and after each step (each of shape ``[vocab]``).
    """

    name: str
    run: Callable[[list[int], list[int]], list[np.ndarray]] = field(repr=False)


def decoder_deployment(config: DecoderConfig | None = None, *, seed: int = 0,
                       target: str | tvm.target.Target = "llvm") -> LLMDeployment:
    """The TVM decoder for ``config`` with the weights of a transformers model of the same
    configuration (random initialisation from ``seed``), which is its reference."""
    config = config or DecoderConfig()
    if config.family not in FAMILIES:
        raise LLMError(f"unknown decoder family {config.family!r}; known: {', '.join(FAMILIES)}")
    model = _transformers_model(config, seed)
    return deployment_of(
        Decoder(config), config, name=f"{config.family}-decoder", target=target,
        params=lambda names: _params_from(model, config, names),
        reference=Reference("transformers", _reference_run(model)),
    )


def deployment_of(
    module: nn.Module,
    config: DecoderConfig,
    *,
    name: str,
    spec: dict | None = None,
    params: list[np.ndarray] | Callable[[list[str]], list[np.ndarray]] | None = None,
    reference: Reference | None = None,
    seed: int = 0,
    target: str | tvm.target.Target = "llvm",
) -> LLMDeployment:
    """A deployment of any ``relax.frontend.nn`` module with the functions of
    :data:`FUNCTIONS` (``prefill(ids, cache)`` and ``decode(ids, cache)`` at least, each
    returning ``(logits, cache)``, and ``create_paged_kv_cache`` with the five integer
    arguments of :meth:`DecoderConfig.cache_arguments`), exported with ``spec`` (default:
    ``module.export_spec()``). ``config`` gives the sizes the memory report and the cache's
    formula read. ``params``: the weights in the order of the module's parameters, or a
    function of their names returning them; random (from ``seed``) where None."""
    tgt = tvm.target.Target(target) if isinstance(target, str) else target
    if spec is None:
        if not callable(getattr(module, "export_spec", None)):
            raise LLMError(f"{name}: pass spec= or give the module an export_spec() method")
        spec = module.export_spec()
    missing = [f for f in ("prefill", "decode", "create_paged_kv_cache") if f not in spec]
    if missing:
        raise LLMError(f"{name}: the export spec has no {', '.join(missing)} function")
    try:
        with tgt:
            mod, named = module.export_tvm(spec=spec)
    except Exception as exc:  # the module is a user's: its export failure is its own
        raise LLMError(f"{name}: export_tvm failed: {type(exc).__name__}: {exc}") from exc
    # As MLC-LLM's pipeline does first: a linear layer's transposed weight is read by its
    # matmul, not copied out for every call (a vocabulary-sized copy in every decode step).
    mod = relax.transform.FuseTransposeMatmul()(mod)
    names = [n for n, _ in named]
    if callable(params):
        params = params(names)
    elif params is None:
        rng = np.random.default_rng(seed)
        params = [
            (rng.standard_normal([int(d) for d in p.shape]) * 0.02).astype(p.dtype)
            for _, p in named
        ]
    if len(params) != len(named):
        raise LLMError(f"{name}: {len(params)} weights for {len(named)} parameters")
    for (param, declared), value in zip(named, params, strict=True):
        shape = tuple(int(d) for d in declared.shape)
        if tuple(value.shape) != shape:
            raise LLMError(f"{name}: weight {param} has shape {tuple(value.shape)}, "
                           f"the module wants {shape}")
    return LLMDeployment(
        name=name, config=config, mod=mod, param_names=names, params=list(params),
        reference=reference,
        functions=tuple(f for f in FUNCTIONS if f in spec),
    )


def load_deployment(path, factory_name: str, params: dict,
                    defaults: dict | None = None) -> LLMDeployment:
    """The deployment ``factory_name`` in the Python file ``path`` returns for ``params``
    (a repository's model file; docs/llm.md), with those of ``defaults`` it takes and
    ``params`` does not set (the context window and prefill chunk of a point)."""
    from pathlib import Path

    from planner.tvm.repo_code import import_file

    path = Path(path)
    if not path.is_file():
        raise LLMError(f"no Python file at {path}")
    try:
        factory = getattr(import_file(path), factory_name, None)
    except ImportError as exc:
        raise LLMError(str(exc)) from exc
    if not callable(factory):
        raise LLMError(f"{path.name} has no function {factory_name!r}")
    return call_factory(factory, f"{path.name}:{factory_name}", params, defaults)


def call_factory(factory: Callable, where: str, params: dict,
                 defaults: dict | None = None) -> LLMDeployment:
    """``factory(**params)`` with those of ``defaults`` it takes and ``params`` does not
    set; LLMError unless it returns an :class:`LLMDeployment`."""
    from planner.tvm.sources.python_file import accepted_parameters

    params = {**{k: v for k, v in (defaults or {}).items() if k in accepted_parameters(factory)},
              **params}
    try:
        result = factory(**params)
    except LLMError:
        raise
    except Exception as exc:  # user code: any failure is the model file's
        raise LLMError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, LLMDeployment):
        raise LLMError(
            f"{where} returned {type(result).__name__}; expected an LLMDeployment "
            "(planner.tvm.llm.decoders.deployment_of or decoder_deployment)"
        )
    return result


def _transformers_model(config: DecoderConfig, seed: int):
    from planner.tvm.sources.transformers_models import TransformersError, import_transformers

    try:
        transformers = import_transformers()
    except TransformersError as exc:
        raise LLMError(str(exc)) from None
    import torch

    common = dict(
        vocab_size=config.vocab,
        hidden_size=config.hidden,
        intermediate_size=config.intermediate,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.kv_heads,
        max_position_embeddings=config.context_window,
        rms_norm_eps=config.rms_eps,
        rope_theta=config.rope_theta,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    if config.family == "llama":
        made = transformers.LlamaConfig(attention_bias=False, mlp_bias=False, **common)
        cls = transformers.LlamaForCausalLM
    else:
        made = transformers.Qwen2Config(use_sliding_window=False, **common)
        cls = transformers.Qwen2ForCausalLM
    torch.manual_seed(seed)
    model = cls(made).eval()
    with torch.no_grad():
        # transformers initialises biases to zero, and a check on zeros passes whichever
        # way a bias is mapped: they are drawn like the weights.
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.normal_(0.0, made.initializer_range)
    if config.dtype == "float16":
        model = model.half()
    return model


def _params_from(model, config: DecoderConfig, names: list[str]) -> list[np.ndarray]:
    """The TVM module's parameters, by name, from the transformers model's state: the query,
    key and value projections concatenated into one (the cache takes them fused), gate and
    up projections likewise."""
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}

    def weight(name: str) -> np.ndarray:
        parts = name.split(".")
        if parts[0] == "lm_head":
            return state[name]
        if parts[0] != "layers":
            return state[f"model.{name}"]
        prefix = f"model.layers.{parts[1]}"
        leaf = parts[-1]
        if parts[-2] == "qkv_proj":
            return np.concatenate(
                [state[f"{prefix}.self_attn.{p}_proj.{leaf}"] for p in ("q", "k", "v")]
            )
        if parts[-2] == "gate_up_proj":
            return np.concatenate(
                [state[f"{prefix}.mlp.{p}_proj.{leaf}"] for p in ("gate", "up")]
            )
        return state[f"model.{name}"]

    try:
        return [weight(name).astype(config.dtype) for name in names]
    except KeyError as exc:
        raise LLMError(f"the transformers model has no weight {exc} for the TVM module") from None


def _reference_run(model) -> Callable[[list[int], list[int]], list[np.ndarray]]:
    def run(prompt: list[int], steps: list[int]) -> list[np.ndarray]:
        import torch

        logits = []
        with torch.no_grad():
            out = model(torch.tensor([prompt]), use_cache=True)
            logits.append(out.logits[0, -1].float().numpy())
            cache = out.past_key_values
            for token in steps:
                out = model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                logits.append(out.logits[0, -1].float().numpy())
        return logits

    return run
