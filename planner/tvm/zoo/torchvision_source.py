"""torchvision's classification networks with random weights: ``torchvision:NAME``.

These are networks nobody here wrote, which is the point: rules shaped on our own zoo are
tried on them. Parameters: ``image`` (square input side, default 64), ``batch`` (default 1),
``seed`` (the weights' seed, default 0) and any keyword the torchvision builder takes.

torchvision from PyPI is built against a CUDA torch; its compiled operators fail to register
beside the CPU torch we pin, but the classification models need none of them. Only the
module registering fake kernels for those operators runs at import, so it is replaced by an
empty one before torchvision is imported.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from planner.tvm.zoo.network import Network

#: Networks whose stem needs a larger input than 64x64 to keep every pooling non-empty.
MINIMUM_IMAGE = {"inception_v3": 75}


class TorchvisionError(ValueError):
    """torchvision is missing, the name is not one of its classification models, or the
    network does not export."""


def import_torchvision():
    try:
        import torch  # noqa: F401  (torchvision needs it first)
    except ImportError as exc:
        raise TorchvisionError("torchvision models need torch, which is not installed") from exc
    sys.modules.setdefault(
        "torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations")
    )
    try:
        import torchvision
    except ImportError as exc:
        raise TorchvisionError(
            "torchvision is not installed (pip install --no-deps torchvision)"
        ) from exc
    return torchvision


def model_names() -> list[str]:
    """Every classification network torchvision builds (no detection, video or segmentation)."""
    torchvision = import_torchvision()
    return sorted(torchvision.models.list_models(module=torchvision.models))


def torchvision_network(
    name: str, image: int = 64, batch: int = 1, seed: int = 0, **kwargs: Any
) -> Network:
    torchvision = import_torchvision()
    import torch

    known = model_names()
    if name not in known:
        raise TorchvisionError(
            f"unknown torchvision classification model {name!r}; known: {', '.join(known)}"
        )
    smallest = MINIMUM_IMAGE.get(name, 1)
    if image < smallest:
        raise TorchvisionError(f"{name} needs an image of at least {smallest}x{smallest}")
    if name.startswith("vit_"):
        # A vision transformer fixes its input size; a small one keeps the test affordable.
        kwargs.setdefault("image_size", image)
    if name in ("inception_v3", "googlenet"):
        # The auxiliary heads exist for training only; an eval-mode export has none anyway.
        kwargs.setdefault("aux_logits", False)
        kwargs.setdefault("init_weights", True)
    torch.manual_seed(seed)
    try:
        module = torchvision.models.get_model(name, weights=None, **kwargs)
    except TypeError as exc:
        raise TorchvisionError(f"bad parameters for torchvision:{name}: {exc}") from exc
    return export_image_classifier(name, module, image, batch, TorchvisionError)


def export_image_classifier(
    name: str, module, image: int, batch: int, error: type[ValueError]
) -> Network:
    """A library's classifier exported on one random image batch (drawn after the weights,
    from the same seed); an export failure is raised as the library's ``error``."""
    import torch

    from planner.tvm.zoo.python_source import PythonSourceError, network_from_torch

    example = torch.randn(batch, 3, image, image)
    try:
        return network_from_torch(name, module, (example,))
    except PythonSourceError as exc:
        raise error(str(exc)) from exc
