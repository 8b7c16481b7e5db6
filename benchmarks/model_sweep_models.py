"""The model file of ``benchmarks/model_sweep.py``: any architecture of the installed
transformers, tiny and with random weights, built from its own configuration class, as a
user with a model file of their own would build it.

``model(family="causal-lm", arch="llama")`` returns the module and its example input. The
configuration is the class's defaults with one generic tiny shape laid over them
(:data:`TINY`: hidden 64, 2 layers, 4 heads, 2 KV heads, vocabulary 1,024), every name the
class knows it by (its ``attribute_map``) and in every sub-configuration (a text or vision
config inside a composite one). Nothing here names a family: what an architecture needs
beyond that is read from its configuration (a head size that must fit the hidden size, an
image size its patches must divide).
"""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

SEQ = 64
IMAGE = 32
VOCAB = 1024
HIDDEN = 64
HEADS = 4

#: The generic tiny shape, by transformers' standard attribute names.
TINY = {
    "hidden_size": HIDDEN,
    "num_hidden_layers": 2,
    "num_attention_heads": HEADS,
    "num_key_value_heads": 2,
    "vocab_size": VOCAB,
    "intermediate_size": 2 * HIDDEN,
    "max_position_embeddings": 4 * SEQ,
}
#: Sizes some classes name outside the standard ones; set only where the class has them.
TINY_EXTRA = {
    "head_dim": HIDDEN // HEADS,
    "moe_intermediate_size": HIDDEN // 2,
    "shared_expert_intermediate_size": HIDDEN,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "image_size": IMAGE,
    "patch_size": 8,
    "num_channels": 3,
    "use_cache": False,
    # A CPU deployment: the reference paths, not kernels that need CUDA.
    "use_mamba_kernels": False,
}
#: Sizes named by pattern, as encoder-decoders and multi-latent attention name theirs.
TINY_PATTERNS = (
    (re.compile(r"(^|_)attention_heads$"), HEADS),
    (re.compile(r"^(encoder|decoder)_layers$"), 2),
    (re.compile(r"(ffn_dim|^dim_ff)$"), 2 * HIDDEN),
    # Head, rotary and latent widths above the tiny head size shrink to it.
    (re.compile(r"(head_dim|^dim_head|rotary_dim|_rank)$"), HIDDEN // HEADS),
    # A state-space block's heads, state and chunk, and any other inner width.
    (re.compile(r"(^|_)n_heads$"), HEADS),
    (re.compile(r"(d_state|state_size|chunk_size)$"), HIDDEN // HEADS),
    (re.compile(r"(d_ssm|intermediate_size)$"), 2 * HIDDEN),
    # A vision model's blocks per stage (ConvNeXt's depths); its widths per stage are left
    # as they are (BiT's bottlenecks divide them into norm groups).
    (re.compile(r"^depths$"), 2),
)
#: Sizes that only ever shrink to the tiny value: a patch or image smaller than the class's
#: own already fits its stages.
NEVER_GROW = ("patch_size", "image_size")
#: The transformers mappings the sweep walks, by family: (mapping name, how it is called).
FAMILIES = {
    "causal-lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "ids"),
    "image-classification": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "pixels"),
    "base": ("MODEL_MAPPING_NAMES", "either"),
    "timm": ("", "pixels"),
}


class _Called(nn.Module):
    """One keyword input in, the first output out, as a deployment calls a model."""

    def __init__(self, model: nn.Module, keyword: str):
        super().__init__()
        self.model = model
        self.keyword = keyword

    def forward(self, x):
        out = self.model(**{self.keyword: x})
        for name in ("logits", "last_hidden_state"):
            if getattr(out, name, None) is not None:
                return getattr(out, name)
        return out[0] if isinstance(out, (tuple, list)) else out


#: How many timm families the sweep takes, spread over timm's sorted family names.
TIMM_FAMILIES = 40


def timm_architectures() -> list[str]:
    """One model of each of :data:`TIMM_FAMILIES` timm families (a family: the name's
    leading letters), its variant with the fewest parameters, the families spread evenly
    over timm's."""
    import re

    from planner.tvm.torch_libraries import prepare_torch_libraries

    prepare_torch_libraries()
    import timm

    families: dict[str, list[str]] = {}
    for name in timm.list_models():
        families.setdefault(re.match(r"[a-z]+", name).group(0), []).append(name)
    names = sorted(f for f in families if f != "test")  # timm's own test models, not a family
    step = max(1, len(names) // TIMM_FAMILIES)
    return [min(families[family], key=_parameters) for family in names[::step][:TIMM_FAMILIES]]


def _parameters(name: str) -> tuple[int, str]:
    """How many parameters timm's ``name`` has, counted on the meta device (no memory, no
    weights drawn); a model that cannot be built so comes last."""
    import timm

    try:
        with torch.device("meta"):
            module = timm.create_model(name, pretrained=False, num_classes=10)
        return sum(p.numel() for p in module.parameters()), name
    except Exception:  # some build helpers need real tensors
        return 1 << 62, name


def _timm_model(name: str):
    """``name`` from timm with random weights, 10 classes, at a 64-pixel image where it
    takes one (its own default size where it does not)."""
    from planner.tvm.torch_libraries import prepare_torch_libraries

    prepare_torch_libraries()
    import timm

    try:
        module = timm.create_model(name, pretrained=False, num_classes=10, img_size=IMAGE * 2)
        size = IMAGE * 2
    except TypeError:  # a network without an image-size argument takes any size, or its own
        module = timm.create_model(name, pretrained=False, num_classes=10)
        size = IMAGE * 2
        try:
            with torch.no_grad():
                module.eval()(torch.randn(1, 3, size, size))
        except Exception:  # too small for its pooling: its own default size
            size = module.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
    return module.eval(), (torch.randn(1, 3, size, size),)


def architectures(family: str) -> list[str]:
    """The model types of ``family``'s mapping in the installed transformers, sorted."""
    if family == "timm":
        return timm_architectures()
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers.models.auto import modeling_auto

    mapping = getattr(modeling_auto, FAMILIES[family][0])
    return sorted(mapping)


def tiny_config(arch: str, decoder: bool = False):
    """``arch``'s configuration class with :data:`TINY` laid over its defaults."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[arch]
    default = config_class()
    sizes = _tiny_sizes(default)
    # Given to the constructor where it takes them, so what it derives from them (a query
    # width from its parts, a layer-type list) is derived from the tiny ones.
    try:
        taken = set(inspect.signature(config_class.__init__).parameters)
    except (TypeError, ValueError):
        taken = set()
    renamed = getattr(config_class, "attribute_map", {}) or {}
    given = {}
    for name, value in sizes.items():
        for candidate in (name, renamed.get(name)):
            if candidate and candidate in taken:
                given[candidate] = _per_stage(getattr(default, candidate, None), value)
                break
    config = config_class(**given)
    _shrink(config, getattr(default, "num_hidden_layers", None), given=set(given))
    if decoder and _has(config, "is_decoder"):
        config.is_decoder = True  # an encoder class in the causal-LM mapping, as its head asks
    return config


def _tiny_sizes(default) -> dict:
    """The tiny sizes for a configuration whose defaults are ``default``."""
    sizes = {**TINY, **TINY_EXTRA}
    for name in NEVER_GROW:
        value = getattr(default, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value <= sizes[name]:
            del sizes[name]
    for name, value in vars(default).items():
        for pattern, tiny in TINY_PATTERNS:
            many = isinstance(value, list | tuple) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value)
            if pattern.search(name) and (many and max(value) > tiny or isinstance(value, int)
                                         and not isinstance(value, bool) and value > tiny):
                sizes.setdefault(name, tiny)
    # A state-space block's heads tile its expanded width.
    expand = getattr(default, "expand", None)
    if isinstance(expand, int) and "num_heads" in vars(default) and "head_dim" in vars(default):
        sizes["num_heads"] = HIDDEN * expand // sizes["head_dim"]
    return sizes


def _shrink(config, default_layers: int | None, depth: int = 0, given=None) -> None:
    """Set the tiny sizes on ``config`` and its sub-configurations where it has them (at the
    top, those its constructor did not take: what it derived from them stays)."""
    from transformers import PretrainedConfig

    sizes = {**TINY, **TINY_EXTRA} if given is not None else _tiny_sizes(config)
    for name, value in sizes.items():
        if name in (given or ()):
            continue
        if _has(config, name):
            try:
                setattr(config, name, _per_stage(getattr(config, name, None), value))
            except (AttributeError, TypeError, ValueError):
                pass
    vocab = getattr(config, "vocab_size", None)
    for name, value in list(vars(config).items()):
        # Special tokens past the tiny vocabulary would index past its embedding.
        if name.endswith("token_id") and isinstance(value, int) and vocab and value >= vocab:
            setattr(config, name, vocab - 1)
    # A per-layer list sized by the default depth follows the tiny depth, keeping the
    # pattern's variety (each kind it had, cycled).
    layers = getattr(config, "num_hidden_layers", None)
    for name, value in list(vars(config).items()):
        if isinstance(value, list) and default_layers and layers and value \
                and len(value) == default_layers != layers:
            distinct = list(dict.fromkeys(map(str, value)))
            chosen = [next(v for v in value if str(v) == d) for d in distinct]
            setattr(config, name, [chosen[i % len(chosen)] for i in range(layers)])
    if depth < 2:
        for value in list(vars(config).values()):
            if isinstance(value, PretrainedConfig):
                _shrink(value, getattr(type(value)(), "num_hidden_layers", None), depth + 1)


def _per_stage(default, tiny):
    """``tiny``, or where the default holds one size per stage or per axis (a vision
    model's heads per stage, an image's height and width), that list with each entry at
    most ``tiny``: a number in its place is another configuration the class cannot read."""
    if isinstance(default, list | tuple) and default and all(
        isinstance(v, int) and not isinstance(v, bool) for v in default
    ) and isinstance(tiny, int) and not isinstance(tiny, bool):
        return type(default)(min(v, tiny) for v in default)
    return tiny


#: Image sides tried, smallest first: a model whose stages shrink a small image below a
#: kernel or a window is built again at the next (its configuration's image size with it).
SIDES = (IMAGE, 2 * IMAGE, 4 * IMAGE, 224)


def _built(arch: str, auto, family: str, side: int):
    """``arch``'s tiny configuration, its image size ``side`` where it has one, and the
    model ``auto`` maps it to."""
    config = tiny_config(arch, decoder=family == "causal-lm")
    size = getattr(config, "image_size", None)
    if isinstance(size, int) and not isinstance(size, bool):
        config.image_size = side
    elif isinstance(size, list | tuple) and len(size) == 2:
        config.image_size = type(size)((side, side))
    model_class = auto._model_mapping[type(config)]
    if isinstance(model_class, tuple):  # several heads for one configuration: the first
        model_class = model_class[0]
    wanted = getattr(model_class, "config_class", None)
    if wanted is not None and not isinstance(config, wanted):
        # A composite configuration whose causal-LM class takes its text part.
        config = config.get_text_config()
    return config, model_class(config).eval()


def _pixels(config, side: int):
    channels = getattr(config, "num_channels", 3)
    return torch.randn(1, channels if isinstance(channels, int) else 3, side, side)


def _has(config, name: str) -> bool:
    renamed = getattr(type(config), "attribute_map", {}) or {}
    return name in vars(config) or name in renamed


def model(family: str = "causal-lm", arch: str = "llama", seed: int = 0):
    """The tiny ``arch`` of ``family`` and its example input."""
    torch.manual_seed(seed)
    if family == "timm":
        return _timm_model(arch)
    from planner.tvm.sources.transformers_models import import_transformers

    import_transformers()
    from transformers.models.auto import modeling_auto

    mapping, called = FAMILIES[family]
    auto = {
        "causal-lm": modeling_auto.AutoModelForCausalLM,
        "image-classification": modeling_auto.AutoModelForImageClassification,
        "base": modeling_auto.AutoModel,
    }[family]
    built = None
    for side in SIDES:
        torch.manual_seed(seed)
        config, module = _built(arch, auto, family, side)
        if called == "either":
            called = "pixels" if "pixel_values" in inspect.signature(module.forward).parameters \
                else "ids"
        if called != "pixels":
            break
        image = _pixels(config, side)
        built = built or (module, image)
        try:
            with torch.no_grad():
                module(pixel_values=image)
        except RuntimeError as exc:
            if "size" in str(exc):  # the stages shrink this side below a kernel or window
                continue
        return _Called(module, "pixel_values").eval(), (image,)
    if called == "pixels":  # no side runs: the smallest, for the probe to report
        return _Called(built[0], "pixel_values").eval(), (built[1],)
    vocab = getattr(config, "vocab_size", VOCAB) or VOCAB
    ids = torch.randint(0, min(vocab, VOCAB), (1, SEQ))
    return _Called(module, "input_ids").eval(), (ids,)
