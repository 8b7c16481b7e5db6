"""timm's image classification networks with random weights: ``timm:NAME``.

Like ``torchvision:NAME``, these are networks nobody here wrote; timm (PyTorch Image Models)
has architectures torchvision lacks, such as GhostNet (blocks that concatenate channels and
keep the first k of them) and HRNet (branches at several resolutions fused by upsampling and
adding). Parameters: ``image`` (square input side, default 64), ``batch`` (default 1),
``seed`` (the weights' seed, default 0) and any keyword ``timm.create_model`` takes.

timm is installed without its requirements (``pip install --no-deps``): it needs torch and
torchvision, both present, and imports its hub and safetensors support only to load
pretrained weights, which are never loaded here (``pretrained=False``).
"""

from __future__ import annotations

from typing import Any

from planner.tvm.network import Network
from planner.tvm.sources.torchvision_models import (
    TorchvisionError,
    export_image_classifier,
    import_torchvision,
)


class TimmError(ValueError):
    """timm is missing, the name is not one of its models, or the network does not export."""


def import_timm():
    try:
        # timm imports torchvision; its operator registrations must be stubbed out first.
        import_torchvision()
    except TorchvisionError as exc:
        raise TimmError(f"timm models need torchvision: {exc}") from exc
    try:
        import timm
    except ImportError as exc:
        raise TimmError("timm is not installed (pip install --no-deps timm)") from exc
    return timm


def model_names() -> list[str]:
    """Every model architecture timm builds (pretrained tags left out)."""
    return sorted(import_timm().list_models())


def timm_network(
    name: str, image: int = 64, batch: int = 1, seed: int = 0, **kwargs: Any
) -> Network:
    timm = import_timm()
    import torch

    if not timm.is_model(name):
        raise TimmError(
            f"unknown timm model {name!r}; e.g. ghostnet_100, hrnet_w18_small, resnet18 "
            "(timm.list_models() lists them all)"
        )
    torch.manual_seed(seed)
    try:
        module = timm.create_model(name, pretrained=False, **kwargs)
    except TypeError as exc:
        raise TimmError(f"bad parameters for timm:{name}: {exc}") from exc
    return export_image_classifier(name, module, image, batch, TimmError)
