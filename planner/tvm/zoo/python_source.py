"""Networks from a factory function in a Python file: ``path/to/module.py:factory``.

The factory returns either a :class:`~planner.tvm.zoo.network.Network`, or a PyTorch module with
example inputs, ``(module, (tensor, ...))``, which is exported with ``torch.export`` and
imported with ``tvm.relax.frontend.torch``. Torch is imported only in that second case: it
costs seconds and hundreds of megabytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner.tvm.zoo.network import Network, from_imported


class PythonSourceError(ValueError):
    """The file or factory is missing, or the factory returned something unusable."""


def load_factory(path: Path, factory_name: str, params: Mapping[str, Any]) -> Network:
    if not path.is_file():
        raise PythonSourceError(f"no Python file at {path}")
    module = _import_file(path)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise PythonSourceError(f"{path.name} has no function {factory_name!r}")
    try:
        result = factory(**params)
    except TypeError as exc:
        raise PythonSourceError(f"bad parameters for {path.name}:{factory_name}: {exc}") from exc
    except Exception as exc:  # the factory is user code: any failure is the source's fault
        raise PythonSourceError(
            f"{path.name}:{factory_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(result, Network):
        return result
    if isinstance(result, tuple) and len(result) == 2:
        return network_from_torch(f"{path.stem}.{factory_name}", *result)
    raise PythonSourceError(
        f"{path.name}:{factory_name} returned {type(result).__name__}; expected a Network or "
        "(torch.nn.Module, example inputs)"
    )


def _import_file(path: Path):
    from planner.tvm.repo_code import import_file

    try:
        return import_file(path)
    except ImportError as exc:
        raise PythonSourceError(str(exc)) from exc


def export_to_relax(
    module: Any, example_inputs: tuple, error: type[ValueError], failure: str,
    dynamic_shapes: Any = None,
):
    """``module`` in eval mode, exported by ``torch.export`` on ``example_inputs`` and imported
    as a Relax module with its weights as parameters; ``error("{failure}: ...")`` if either
    step fails."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    try:
        with torch.no_grad():
            exported = torch.export.export(
                module.eval(), example_inputs, dynamic_shapes=dynamic_shapes
            )
        return from_exported_program(
            exported, keep_params_as_input=True, unwrap_unit_return_tuple=True
        )
    except Exception as exc:  # export and import fail in many ways on unsupported code
        raise error(f"{failure}: {type(exc).__name__}: {exc}") from exc


def network_from_torch(name: str, module: Any, example_inputs: Any) -> Network:
    """Export ``module`` with ``torch.export`` and import it; its weights become fixed inputs."""
    try:
        import torch
    except ImportError as exc:
        raise PythonSourceError(
            f"{name} returned a torch module, but torch is not installed"
        ) from exc
    if not isinstance(module, torch.nn.Module):
        raise PythonSourceError(f"{name} returned {type(module).__name__}, not a torch.nn.Module")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    mod = export_to_relax(
        module, tuple(example_inputs), PythonSourceError, f"cannot export {name} with torch.export"
    )
    try:
        return from_imported(name, mod, entry="main")
    except ValueError as exc:
        raise PythonSourceError(f"{name}: {exc}") from exc
