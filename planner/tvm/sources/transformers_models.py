"""Hugging Face ``transformers`` models with random weights: ``transformers:gpt2`` and
``transformers:bert``.

A decoder and an encoder nobody here wrote, built from a small configuration in code (no
download, no ``from_pretrained``) and exported with ``torch.export``. Their memory grows with
the sequence length, which is what a deployment sizes: with ``dynamic=True`` the length is a
symbolic dimension named ``seq`` with ``seq`` (the parameter) as its bound, as TVM plans it
(``tir_var_upper_bound``). Parameters: ``seq`` (the length, or its bound; default 128),
``dynamic`` (default False), ``layers`` (2), ``hidden`` (64), ``heads`` (4), ``vocab`` (256),
``batch`` (1) and ``seed`` (the weights' seed, 0).

``transformers`` is installed without its requirements (``pip install --no-deps``): PyPI's
wheel asks for nothing that pulls torch, but pinning each requirement ourselves keeps a
second torch from ever arriving. It imports torchvision when torchvision is installed, whose
operator registrations fail beside our CPU torch (see
:mod:`planner.tvm.torch_libraries`), so those are stubbed first.
"""

from __future__ import annotations

from planner.tvm.network import Network, torch_framework
from planner.tvm.sources import python_file as python_source
from planner.tvm.sources.python_file import export_to_relax
from planner.tvm.sources.torchvision_models import TorchvisionError, import_torchvision

#: The name the symbolic sequence length has in the network, whatever torch called it.
SEQ = "seq"
ARCHITECTURES = ("bert", "gpt2")
#: torch.export specialises a dimension whose example is 0 or 1, so the range starts at 2.
SHORTEST_DYNAMIC = 2


class TransformersError(ValueError):
    """transformers is missing, the name or a parameter is wrong, or the model does not
    export."""


def import_transformers():
    try:
        import torch  # noqa: F401  (transformers builds PyTorch models only when torch is there)
    except ImportError as exc:
        raise TransformersError("transformers models need torch, which is not installed") from exc
    try:
        import_torchvision()
    except TorchvisionError:
        pass  # not installed: then transformers does not import it either
    try:
        import transformers
    except ImportError as exc:
        raise TransformersError(
            "transformers is not installed (bash .ci/setup --test installs it with --no-deps)"
        ) from exc
    return transformers


def transformers_network(
    name: str,
    seq: int = 128,
    dynamic: bool = False,
    layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    vocab: int = 256,
    batch: int = 1,
    seed: int = 0,
) -> Network:
    if name not in ARCHITECTURES:
        raise TransformersError(
            f"unknown transformers model {name!r}; known: {', '.join(ARCHITECTURES)}"
        )
    _check_parameters(name, seq, dynamic, layers, hidden, heads, vocab, batch)
    import_transformers()
    import torch

    torch.manual_seed(seed)
    module = _build_module(name, seq, layers, hidden, heads, vocab)
    # Drawn after the weights from the same seed, as the image classifiers draw theirs.
    example = torch.randint(0, vocab, (batch, seq), dtype=torch.int64)
    network = _export(name, module, example, seq if dynamic else None, vocab)
    if dynamic:
        network.shape_limits = {SEQ: position_limit(module.model.config)}
    return network


def position_limit(config) -> tuple[int, str]:
    """The longest sequence a transformers ``config`` has positions for, and the key that
    says so: the model reads past its position table beyond it."""
    found = python_source.config_positions(config)
    if found is None:
        raise TransformersError(f"{type(config).__name__} names no maximum sequence length")
    return found


def _check_parameters(name, seq, dynamic, layers, hidden, heads, vocab, batch) -> None:
    where = f"transformers:{name}"
    for key, value in (("seq", seq), ("layers", layers), ("hidden", hidden),
                       ("heads", heads), ("vocab", vocab), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TransformersError(f"{where}: {key} must be a positive integer, not {value!r}")
    if not isinstance(dynamic, bool):
        raise TransformersError(f"{where}: dynamic must be true or false, not {dynamic!r}")
    if dynamic and seq < SHORTEST_DYNAMIC:
        raise TransformersError(
            f"{where}: a dynamic sequence length needs a bound of at least {SHORTEST_DYNAMIC}"
        )
    if hidden % heads:
        raise TransformersError(
            f"{where}: hidden ({hidden}) must be a multiple of heads ({heads})"
        )
    if vocab < 2:
        raise TransformersError(f"{where}: vocab must be at least 2")
    if name == "gpt2" and batch != 1:
        # torch 2.13's export drops the copy after GPT-2's sdpa transpose at batch > 1, and
        # the next view then fails; eager attention cannot keep the length symbolic.
        raise TransformersError(f"{where}: only batch 1 exports (got batch {batch})")


def _build_module(name: str, seq: int, layers: int, hidden: int, heads: int, vocab: int):
    """The model in eval mode behind a ``forward(input_ids)`` that returns one tensor."""
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    # sdpa, not eager: GPT-2's eager attention slices a fixed causal buffer by the length,
    # which torch.export cannot keep symbolic.
    if name == "gpt2":
        config = GPT2Config(
            n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, n_positions=seq,
            use_cache=False, attn_implementation="sdpa",
        )
        model = GPT2LMHeadModel(config)
    else:
        config = BertConfig(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
            intermediate_size=4 * hidden, vocab_size=vocab, max_position_embeddings=seq,
            attn_implementation="sdpa",
        )
        model = BertModel(config, add_pooling_layer=False)

    class TokenIds(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            if name == "gpt2":
                # An all-ones mask (a batch without padding) keeps transformers off its
                # packed-sequence detection, which it runs on position ids when no mask is
                # given and which imports into TVM with shapes it cannot resolve.
                return self.model(
                    input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    use_cache=False, return_dict=False,
                )[0]
            # BERT slices its position and token-type buffers to the length; TVM types that
            # slice min(seq, bound) and then cannot add it to a tensor of length seq.
            positions = torch.arange(input_ids.shape[1], dtype=torch.int64).unsqueeze(0)
            return self.model(
                input_ids=input_ids, position_ids=positions,
                token_type_ids=torch.zeros_like(input_ids), return_dict=False,
            )[0]

    return TokenIds(model).eval()


def _export(name: str, module, example, bound: int | None, vocab: int) -> Network:
    """``module`` exported on ``example``; with a ``bound``, the length symbolic up to it."""
    import torch
    import tvm
    from tvm import relax

    dynamic_shapes = None
    if bound is not None:
        length = torch.export.Dim(SEQ, min=SHORTEST_DYNAMIC, max=bound)
        dynamic_shapes = ({1: length},)
    assumptions: list[str] = []
    mod = export_to_relax(
        module, (example,), TransformersError, f"cannot export transformers:{name}",
        dynamic_shapes=dynamic_shapes, assumptions=assumptions,
    )
    mod, weights = relax.frontend.detach_params(mod)
    func = mod["main"]
    shapes: list[tuple] = []
    for param in func.params:
        dims = param.ty.shape.values
        shapes.append(tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else d for d in dims))
    bounds: dict[str, int] = {}
    if bound is not None:
        # torch names the length s0, s27, ...; the shape axis and the reports call it seq.
        symbols = {d for shape in shapes for d in shape if isinstance(d, tvm.tirx.Var)}
        if len(symbols) != 1:
            raise TransformersError(
                f"transformers:{name}: expected one symbolic dimension, found "
                f"{sorted(str(s) for s in symbols)}"
            )
        (symbol,) = symbols
        func = func.bind_symbolic_vars({symbol: tvm.tirx.Var(SEQ, "int64")})
        func = func.without_attr("tir_var_lower_bound").with_attrs(
            {"tir_var_upper_bound": {SEQ: bound}, "tir_var_lower_bound": {SEQ: SHORTEST_DYNAMIC}}
        )
        mod.update_func(mod.get_global_var("main"), func)
        shapes = [tuple(SEQ if isinstance(d, tvm.tirx.Var) else d for d in s) for s in shapes]
        bounds = {SEQ: bound}
    names = [param.name for param in func.params]
    dtypes = [str(param.ty.dtype) for param in func.params]
    values = [w.numpy() for w in weights.get("main", [])]
    data = len(names) - len(values)
    return Network(
        name,
        mod,
        names,
        shapes,
        dtypes,
        entry="main",
        fixed_inputs=dict(zip(names[data:], values, strict=True)),
        shape_bounds=bounds,
        data_inputs=data,
        # Token ids index the embedding table: any id at or above vocab reads past it.
        input_ranges={names[0]: (0, vocab)},
        framework=torch_framework(module),
        assumptions=tuple(assumptions),
    )
