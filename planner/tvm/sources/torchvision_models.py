"""torchvision's classification networks with random weights: ``torchvision:NAME``.

These are networks nobody here wrote, which is the point: rules shaped on our own zoo are
tried on them. Parameters: ``image`` (square input side, default 64), ``batch`` (default 1),
``seed`` (the weights' seed, default 0), ``dynamic`` (height and width symbolic, ``h`` and
``w``, with ``image`` as their bound) and any keyword the torchvision builder takes.

torchvision from PyPI is built against a CUDA torch; its compiled operators fail to register
beside the CPU torch we pin, but the classification models need none of them:
:func:`~planner.tvm.torch_libraries.prepare_torch_libraries` stubs what would fail before
torchvision is imported, as it does for a repository's model file.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner.tvm.network import Network
from planner.tvm.torch_libraries import prepare_torch_libraries

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
    prepare_torch_libraries()
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
    name: str,
    image: int = 64,
    batch: int = 1,
    seed: int = 0,
    dynamic: bool = False,
    **kwargs: Any,
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
    if dynamic:
        return export_dynamic_image(name, module, image, batch, TorchvisionError)
    return export_image_classifier(name, module, image, batch, TorchvisionError)


def export_dynamic_image(
    name: str, module, image: int, batch: int, error: type[ValueError]
) -> Network:
    """``module`` exported with symbolic height and width (``h``, ``w``, bound ``image``).

    torch.export names the symbols itself (``s0``, ``s53``); they are renamed to what a
    shape axis declares. The importer cannot describe symbolic inputs, so the network is
    described from the module bound at ``image`` and then given the symbolic module back.
    """
    import torch
    from tvm import relax, tirx

    from planner.tvm.network import from_imported
    from planner.tvm.sources.python_file import export_to_relax

    example = torch.randn(batch, 3, image, image)
    # AUTO lets torch.export keep the ranges the network allows (a stride-32 stem needs
    # more than 32 pixels) instead of failing on a range declared here.
    auto = torch.export.Dim.AUTO
    mod = export_to_relax(
        module, (example,), error, f"cannot export {name} with symbolic h, w",
        dynamic_shapes=({2: auto, 3: auto},),
    )
    dims = mod["main"].params[0].ty.shape.values
    if not all(isinstance(d, tirx.Var) for d in dims[2:]):
        raise error(f"torch.export kept the image size of {name} static")
    renamed = {dims[2]: tirx.Var("h", "int64"), dims[3]: tirx.Var("w", "int64")}
    mod = relax.transform.BindSymbolicVars(renamed, "main")(mod)
    bounds = {"h": image, "w": image}
    network = from_imported(name, relax.transform.BindSymbolicVars(bounds, "main")(mod), "main")
    symbolic, _ = relax.frontend.detach_params(mod)
    shapes = [(batch, 3, "h", "w"), *network.input_shapes[1:]]
    return replace(network, mod=symbolic, input_shapes=shapes, shape_bounds=bounds)


def export_image_classifier(
    name: str, module, image: int, batch: int, error: type[ValueError]
) -> Network:
    """A library's classifier exported on one random image batch (drawn after the weights,
    from the same seed); an export failure is raised as the library's ``error``."""
    import torch

    from planner.tvm.sources.python_file import PythonSourceError, network_from_torch

    example = torch.randn(batch, 3, image, image)
    try:
        return network_from_torch(name, module, (example,))
    except PythonSourceError as exc:
        raise error(str(exc)) from exc
