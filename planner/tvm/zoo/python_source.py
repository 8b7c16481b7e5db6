"""Networks from a factory function in a Python file: ``path/to/module.py:factory``.

The factory returns either a :class:`~planner.tvm.zoo.network.Network`, or a PyTorch module with
example inputs, ``(module, (tensor, ...))``, which is exported with ``torch.export`` and
imported with ``tvm.relax.frontend.torch``. Torch is imported only in that second case: it
costs seconds and hundreds of megabytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.tvm.zoo.network import Network, from_imported, torch_framework


class PythonSourceError(ValueError):
    """The file or factory is missing, or the factory returned something unusable."""


def load_factory(
    path: Path,
    factory_name: str,
    params: Mapping[str, Any],
    *,
    axis_bounds: Mapping[str, int] | None = None,
) -> Network:
    """The network ``factory_name`` in ``path`` returns for ``params``; a parameter named
    after a symbol of ``axis_bounds`` and not in ``params`` is given that bound."""
    if not path.is_file():
        raise PythonSourceError(f"no Python file at {path}")
    module = _import_file(path)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise PythonSourceError(f"{path.name} has no function {factory_name!r}")
    params = {**_axis_parameters(factory, axis_bounds or {}), **params}
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
        return network_from_torch(f"{path.stem}.{factory_name}", *result, user_files=(path,))
    raise PythonSourceError(
        f"{path.name}:{factory_name} returned {type(result).__name__}; expected a Network or "
        "(torch.nn.Module, example inputs)"
    )


def _axis_parameters(factory, bounds: Mapping[str, int]) -> dict[str, int]:
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable says nothing of its parameters
        return {}
    return {symbol: bound for symbol, bound in bounds.items() if symbol in accepted}


def _import_file(path: Path):
    from planner.tvm.repo_code import import_file

    try:
        return import_file(path)
    except ImportError as exc:
        raise PythonSourceError(str(exc)) from exc


def export_to_relax(
    module: Any, example_inputs: tuple, error: type[ValueError], failure: str,
    dynamic_shapes: Any = None, user_files: tuple[Path, ...] = (),
):
    """``module`` in eval mode, exported by ``torch.export`` on ``example_inputs`` and imported
    as a Relax module with its weights as parameters; ``error("{step} failed: {failure}:
    ...")`` if either step fails, an export failure with the failing line (and the line of
    ``user_files`` that led there) and torch's advice first."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from planner.tvm.steps import describe
    from planner.tvm.zoo.export_failure import graph_dumps_held, summarise
    from planner.tvm.zoo.torch_conversions import CONVERSIONS

    try:
        with torch.no_grad(), graph_dumps_held():
            exported = torch.export.export(
                module.eval(), example_inputs, dynamic_shapes=dynamic_shapes
            )
    except Exception as exc:  # export fails in many ways on unsupported code
        raise error(f"export failed: {failure}: {summarise(exc, user_files)}") from exc
    try:
        # Converted with torch's dtypes where the importer's differ (a cumsum over bool).
        return from_exported_program(
            exported, keep_params_as_input=True, unwrap_unit_return_tuple=True,
            custom_convert_map=CONVERSIONS,
        )
    except Exception as exc:  # TVM's frontend lacks operators and shape rules
        raise error(f"import failed: {failure}: {describe(exc)}") from exc


def network_from_torch(
    name: str, module: Any, example_inputs: Any, user_files: tuple[Path, ...] = ()
) -> Network:
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
        module, tuple(example_inputs), PythonSourceError, f"cannot export {name} with torch.export",
        user_files=user_files,
    )
    try:
        network = from_imported(name, mod, entry="main")
    except ValueError as exc:
        raise PythonSourceError(f"{name}: {exc}") from exc
    return replace(network, framework=torch_framework(module.eval()))
