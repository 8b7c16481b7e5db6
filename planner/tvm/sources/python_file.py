"""Networks from a factory function in a Python file: ``path/to/module.py:factory``.

The factory returns either a :class:`~planner.tvm.network.Network`, or a PyTorch module with
example inputs, ``(module, (tensor, ...))``, which is exported with ``torch.export`` and
imported with ``tvm.relax.frontend.torch``. Torch is imported only in that second case: it
costs seconds and hundreds of megabytes.

A module's symbolic dimensions are declared in torch.export's own terms: the factory returns
``(module, example inputs, dynamic_shapes)`` (or ``{"module": ..., "inputs": ...,
"dynamic_shapes": ...}``), with ``dynamic_shapes`` exactly as ``torch.export.export`` takes
it and each ``torch.export.Dim`` named like a symbol of the shape axis; or the shape axis
says where its symbols are (``dims = { seq = "input_ids:1" }``, :attr:`ShapeAxis.dims`) and
the export is given ``torch.export.Dim(symbol, min=1, max=bound)`` there. Either way the
symbols keep those names in the network, bounded by the axis.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.shapes import ShapeAxis, ShapeError, parse_place
from planner.tvm.network import Network, from_imported, torch_framework

#: What a factory may return, as its errors say it.
RETURNS = (
    "a Network, (torch.nn.Module, example inputs), (module, example inputs, dynamic_shapes) "
    'or {"module": ..., "inputs": ..., "dynamic_shapes": ...}'
)
#: The smallest size of a dimension made symbolic from the axis's ``dims``: every point a
#: shape axis may list, and torch.export accepts it (the example itself must be 2 or more).
SMALLEST = 1


class PythonSourceError(ValueError):
    """The file or factory is missing, or the factory returned something unusable."""


class DeploymentReturned(ValueError):
    """A model file's factory returned an LLM deployment
    (:class:`planner.tvm.llm.decoders.LLMDeployment`) where a network was being built. A
    tracked run's import (:mod:`planner.tvm.job`) takes the deployment from here; anywhere
    else it says which command plans it."""

    def __init__(self, deployment, path: Path, factory: str, function) -> None:
        try:
            shown = path.relative_to(Path.cwd())
        except ValueError:
            shown = path
        super().__init__(
            f"{path.name}:{factory} returned an LLM deployment; plan it with "
            f"`python3 -m planner llm --model {shown}:{factory}`"
        )
        self.deployment, self.path, self.factory = deployment, path, factory
        #: The factory itself, to call again at other points without importing the file again.
        self.function = function


def load_factory(
    path: Path,
    factory_name: str,
    params: Mapping[str, Any],
    *,
    axis: ShapeAxis | None = None,
) -> Network:
    """The network ``factory_name`` in ``path`` returns for ``params``, built for the shape
    ``axis`` (see the module docstring); a parameter named after a symbol of ``axis`` and not
    in ``params`` is given its bound."""
    if not path.is_file():
        raise PythonSourceError(f"no Python file at {path}")
    module = _import_file(path)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise PythonSourceError(f"{path.name} has no function {factory_name!r}")
    params = {**_axis_parameters(factory, axis.bounds if axis else {}), **params}
    try:
        result = factory(**params)
    except TypeError as exc:
        raise PythonSourceError(f"bad parameters for {path.name}:{factory_name}: {exc}") from exc
    except Exception as exc:  # the factory is user code: any failure is the source's fault
        raise PythonSourceError(
            f"{path.name}:{factory_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    where = f"{path.name}:{factory_name}"
    llm = sys.modules.get("planner.tvm.llm.decoders")
    # Only a file that imported the deployment module can have returned one.
    if llm is not None and isinstance(result, llm.LLMDeployment):
        raise DeploymentReturned(result, path, factory_name, factory)
    if isinstance(result, Network):
        if axis is not None and axis.dims:
            raise PythonSourceError(
                f"{where} returned a Network, whose symbols are its own: dims (where a symbol "
                "is in the inputs) is for a torch module; drop dims"
            )
        return result
    module, inputs, dynamic_shapes = _torch_parts(result, where)
    return network_from_torch(
        f"{path.stem}.{factory_name}", module, inputs, user_files=(path,),
        dynamic_shapes=dynamic_shapes, axis=axis, where=where,
    )


def _torch_parts(result: Any, where: str) -> tuple[Any, Any, Any]:
    """``(module, example inputs, dynamic_shapes or None)`` of a factory's ``result``."""
    if isinstance(result, tuple) and len(result) in (2, 3):
        return result[0], result[1], result[2] if len(result) == 3 else None
    if isinstance(result, Mapping):
        unknown = sorted(str(k) for k in result if k not in ("module", "inputs", "dynamic_shapes"))
        if unknown or "module" not in result or "inputs" not in result:
            raise PythonSourceError(
                f"{where} returned a dict with "
                + (f"keys it does not know ({', '.join(unknown)})" if unknown
                   else "no " + " and no ".join(k for k in ("module", "inputs") if k not in result))
                + f"; expected {RETURNS}"
            )
        return result["module"], result["inputs"], result.get("dynamic_shapes")
    raise PythonSourceError(f"{where} returned {type(result).__name__}; expected {RETURNS}")


def _axis_parameters(factory, bounds: Mapping[str, int]) -> dict[str, int]:
    accepted = accepted_parameters(factory)
    return {symbol: bound for symbol, bound in bounds.items() if symbol in accepted}


def accepted_parameters(factory) -> set[str]:
    """The names ``factory`` takes (none known for a callable that does not say)."""
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin or C callable says nothing of its parameters
        return set()


def _import_file(path: Path):
    from planner.tvm.repo_code import import_file

    try:
        return import_file(path)
    except ImportError as exc:
        raise PythonSourceError(str(exc)) from exc


def export_to_relax(
    module: Any, example_inputs: tuple, error: type[ValueError], failure: str,
    dynamic_shapes: Any = None, user_files: tuple[Path, ...] = (),
    assumptions: list[str] | None = None,
):
    """``module`` in eval mode, exported by ``torch.export`` on ``example_inputs`` and imported
    as a Relax module with its weights as parameters; ``error("{step} failed: {failure}:
    ...")`` if either step fails, an export failure with the failing line (and the line of
    ``user_files`` that led there) and torch's advice first.

    Mixture-of-experts blocks are exported in fixed shapes (see
    :mod:`planner.tvm.sources.experts`); what that assumes is appended to ``assumptions``."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from planner.tvm.sources.experts import ExpertsError, fixed_shape_experts
    from planner.tvm.sources.export_failure import graph_dumps_held, summarise
    from planner.tvm.sources.infinite_fills import finite_fills
    from planner.tvm.sources.specialise import (
        TracedOtherwise,
        check_traced_as_eager,
        constant_reads,
        is_data_dependent,
    )
    from planner.tvm.sources.torch_conversions import CONVERSIONS, complex_refusal
    from planner.tvm.steps import describe

    module = module.eval()
    try:
        with (
            torch.no_grad(), graph_dumps_held(), plain_buffers(module),
            fixed_shape_experts(module, example_inputs) as assumed,
        ):
            exported = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes)
    except ExpertsError as exc:
        raise error(f"export failed: {failure}: {exc}") from exc
    except Exception as exc:  # export fails in many ways on unsupported code
        if not is_data_dependent(exc):
            raise error(f"export failed: {failure}: {summarise(exc, user_files)}") from exc
        exported, assumed = _specialised(
            module, example_inputs, dynamic_shapes, error, failure, exc, user_files
        )
    if assumptions is not None:
        assumptions.extend(assumed)
    try:
        with torch.no_grad(), graph_dumps_held(), plain_buffers(module):
            exported = constant_reads(exported, example_inputs, dynamic_shapes)
    except Exception as exc:  # re-exporting what export took once: any failure is torch's
        raise error(f"export failed: {failure}: {summarise(exc, user_files)}") from exc
    try:
        check_traced_as_eager(module, exported, example_inputs)
    except TracedOtherwise as exc:
        raise error(f"export failed: {failure}: {exc}") from exc
    refused = complex_refusal(exported)
    if refused:
        raise error(f"import failed: torch.export exported it; {refused}")
    try:
        # Converted with torch's dtypes where the importer's differ (a cumsum over bool).
        return finite_fills(from_exported_program(
            exported, keep_params_as_input=True, unwrap_unit_return_tuple=True,
            custom_convert_map=CONVERSIONS,
        ))
    except Exception as exc:  # TVM's frontend lacks operators and shape rules
        # The export succeeded: the words say so, not "cannot export".
        message = "import failed: torch.export exported it, TVM's importer did not take it: "
        message += describe(exc)
        if "Unsupported function types" in str(exc):
            message += (
                "; TVM 0.27's importer has no conversion for these operators: write that "
                "part of the model with operators it has (the list above names them)"
            )
        raise error(message) from exc


@contextmanager
def plain_buffers(module) -> Iterator[None]:
    """Within it, a buffer registered as an ``nn.Parameter`` (``register_buffer(name,
    nn.Parameter(...))``, as FalconMamba's RMS weights are) is held as a plain tensor of the
    same values: torch 2.13's export records it as both and then fails to rebuild the module
    (``KeyError: attribute 'b_c_rms' already exists``) when TVM's importer decomposes it."""
    import torch

    swapped = []
    for owner in module.modules():
        for name, value in list(owner._buffers.items()):
            if isinstance(value, torch.nn.Parameter):
                swapped.append((owner, name, value))
                owner._buffers[name] = value.data
    try:
        yield
    finally:
        for owner, name, value in swapped:
            owner._buffers[name] = value


def _specialised(module, example_inputs, dynamic_shapes, error, failure, refused, user_files):
    """The draft export of ``module`` where torch.export ``refused`` it on data-dependent
    guards (see :mod:`planner.tvm.sources.specialise`), and the assumptions it makes; the
    original failure, with why the draft cannot stand, where it cannot."""
    import torch

    from planner.tvm.sources.experts import ExpertsError, fixed_shape_experts
    from planner.tvm.sources.export_failure import quiet_draft, summarise
    from planner.tvm.sources.specialise import SpecialiseError, draft_exported

    try:
        with (
            torch.no_grad(), quiet_draft(), plain_buffers(module),
            fixed_shape_experts(module, example_inputs) as assumed,
        ):
            exported, guards = draft_exported(module, example_inputs, dynamic_shapes)
    except (SpecialiseError, ExpertsError) as exc:
        raise error(
            f"export failed: {failure}: {summarise(refused, user_files)}\n"
            f"specialising the branch as the example takes it does not hold: {exc}"
        ) from exc
    except Exception as exc:  # the draft fails as export did, or another way
        raise error(f"export failed: {failure}: {summarise(refused, user_files)}") from exc
    return exported, [*assumed, *(guard.assumption() for guard in guards)]


def network_from_torch(
    name: str,
    module: Any,
    example_inputs: Any,
    user_files: tuple[Path, ...] = (),
    *,
    dynamic_shapes: Any = None,
    axis: ShapeAxis | None = None,
    where: str = "",
) -> Network:
    """Export ``module`` with ``torch.export`` and import it; its weights become fixed inputs.

    ``dynamic_shapes`` (as torch.export takes it) or the ``dims`` of ``axis`` make input
    dimensions symbolic, each named after its ``torch.export.Dim`` (see the module
    docstring); they must be the axis's symbols, within the range torch.export kept. Without
    an axis, each is bounded by its size in the example. ``where`` names the factory in
    errors (default ``name``)."""
    where = where or name
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
    example_inputs = tuple(example_inputs)
    declared = dynamic_shapes is not None
    if axis is not None and axis.dims:
        if declared:
            raise PythonSourceError(
                f"{where} returns dynamic_shapes and the shape axis gives dims: declare each "
                "symbol once, in the factory's torch.export.Dim or in dims"
            )
        dynamic_shapes, places = _dims_as_dynamic_shapes(module, example_inputs, axis, where)
    else:
        places = _declared_places(module, dynamic_shapes)
    assumptions: list[str] = []
    mod = export_to_relax(
        module, example_inputs, PythonSourceError, f"cannot export {name} with torch.export",
        dynamic_shapes=dynamic_shapes, user_files=user_files, assumptions=assumptions,
    )
    try:
        if places or declared:
            network = _named_symbols(name, mod, places, example_inputs, axis, where, declared)
        else:
            network = from_imported(name, mod, entry="main")
    except ValueError as exc:
        raise PythonSourceError(f"{name}: {exc}") from exc
    limits = dict(network.shape_limits)
    for symbol, (rows, why) in _position_limits(module, places, example_inputs).items():
        if symbol not in limits or rows < limits[symbol][0]:
            limits[symbol] = (rows, why)
    return replace(
        network, framework=torch_framework(module.eval()), shape_limits=limits,
        assumptions=tuple(assumptions),
    )


#: Where a configuration says how many positions its table has (decoders' token ids).
POSITION_KEYS = ("n_positions", "max_position_embeddings", "max_target_positions")


def _position_limits(module, places: dict, example_inputs) -> dict[str, tuple[int, str]]:
    """The longest sequence of token ids the model has positions for, on each symbol that
    is the sequence axis (dimension 1) of an integer input: past it, TVM's build reads past
    the table (NaN, or another row's values) where PyTorch raises. Read from the model's
    configuration (a transformers model's ``config``), else from an embedding named for
    positions."""
    import torch

    symbols = {
        symbol for (position, dim), symbol in places.items()
        if dim == 1 and position < len(example_inputs)
        and isinstance(example_inputs[position], torch.Tensor)
        and not example_inputs[position].is_floating_point()
    }
    table = _position_table(module) if symbols else None
    return {symbol: table for symbol in symbols} if table else {}


def config_positions(config) -> tuple[int, str] | None:
    """The rows of the position table a (transformers) ``config`` declares, and the key
    that says so (``"GPT2Config.n_positions"``); None where it declares none."""
    for key in POSITION_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"{type(config).__name__}.{key}"
    return None


def _position_table(module) -> tuple[int, str] | None:
    import torch

    for owner in (module, *module.modules()):
        found = config_positions(getattr(owner, "config", None))
        if found:
            return found[0], f"{found[1]}, the model's position table"
    for name, sub in module.named_modules():
        leaf = name.rsplit(".", 1)[-1].lower()
        if isinstance(sub, torch.nn.Embedding) and ("pos" in leaf or "wpe" == leaf):
            rows = sub.num_embeddings
            return rows, f"{name}, a position embedding of {rows} rows"
    return None


def _forward_names(module) -> list[str]:
    """The names of ``module.forward``'s positional parameters, in order."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):  # a builtin forward says nothing of its parameters
        return []
    return [
        p.name for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _describe_inputs(names: list[str], count: int) -> str:
    return ", ".join(
        f"{names[i]} ({i})" if i < len(names) else str(i) for i in range(count)
    ) or "none"


def _dims_as_dynamic_shapes(
    module, example_inputs: tuple, axis: ShapeAxis, where: str
) -> tuple[tuple, dict[tuple[int, int], str]]:
    """The ``dynamic_shapes`` torch.export takes for the axis's ``dims``: one
    ``torch.export.Dim(symbol, min=1, max=bound)`` per symbol, at each place it names; and
    the symbol at each (example input, dimension)."""
    import torch

    names = _forward_names(module)
    count = len(example_inputs)
    spec: list[dict | None] = [None] * count
    places: dict[tuple[int, int], str] = {}
    for symbol, texts in axis.dims.items():
        bound = axis.bounds[symbol]
        dim = torch.export.Dim(symbol, min=min(SMALLEST, bound), max=bound)
        for text in texts:
            try:
                ref, index = parse_place(text, f"dims.{symbol}")
            except ShapeError as exc:
                raise PythonSourceError(str(exc)) from None
            what = f"dims.{symbol} = {text!r}"
            if isinstance(ref, int):
                position = ref
            elif ref in names:
                position = names.index(ref)
            else:
                raise PythonSourceError(
                    f"{what}: {where}'s module has no input named {ref!r}; its inputs "
                    f"(name and position): {_describe_inputs(names, count)}"
                )
            if position >= count:
                raise PythonSourceError(
                    f"{what}: {where} gives {count} example input(s), so no input "
                    f"{position}; its inputs (name and position): {_describe_inputs(names, count)}"
                )
            tensor = example_inputs[position]
            label = f"input {names[position]!r}" if position < len(names) else f"input {position}"
            if not isinstance(tensor, torch.Tensor):
                raise PythonSourceError(
                    f"{what}: {label} is a {type(tensor).__name__}, not a tensor"
                )
            if index >= tensor.dim():
                raise PythonSourceError(
                    f"{what}: {label} has {tensor.dim()} dimension(s) (example shape "
                    f"{tuple(tensor.shape)}), so no dimension {index}; they count from 0"
                )
            size = int(tensor.shape[index])
            if not 2 <= size <= bound:
                raise PythonSourceError(
                    f"{what}: the example {label} is {size} long on dimension {index}; "
                    f"torch.export needs an example from 2 to the axis's bound {bound} there "
                    f"(a factory parameter named {symbol} is given the bound)"
                )
            spec[position] = {**(spec[position] or {}), index: dim}
            places[(position, index)] = symbol
    return tuple(spec), places


def _declared_places(module, dynamic_shapes: Any) -> dict[tuple[int, int], str]:
    """The name of each ``torch.export.Dim`` in a factory's ``dynamic_shapes``, by (example
    input, dimension). What is not a named Dim (None, ``Dim.AUTO``) names nothing; a
    structure torch.export does not take is left for torch.export to refuse."""
    if dynamic_shapes is None:
        return {}
    import torch

    names = _forward_names(module)
    if isinstance(dynamic_shapes, Mapping):
        by_position = {
            names.index(k): v
            for k, v in dynamic_shapes.items()
            if isinstance(k, str) and k in names
        }
    elif isinstance(dynamic_shapes, list | tuple):
        by_position = dict(enumerate(dynamic_shapes))
    else:
        return {}
    places: dict[tuple[int, int], str] = {}
    for position, spec in by_position.items():
        if isinstance(spec, Mapping):
            dims = spec.items()
        elif isinstance(spec, list | tuple):
            dims = enumerate(spec)
        else:
            continue
        for index, dim in dims:
            name = getattr(dim, "__name__", "")
            # A derived dimension (2 * seq) is named by its expression, not a symbol.
            if isinstance(dim, torch.export.Dim) and name.isidentifier():
                places[(position, int(index))] = name
    return places


def _named_symbols(
    name: str, mod, places: dict[tuple[int, int], str], example_inputs: tuple,
    axis: ShapeAxis | None, where: str, declared: bool,
) -> Network:
    """The exported ``mod`` with its symbols named as ``places`` say (ValueError where torch
    kept a declared dimension static or made one symbolic that nothing names), checked
    against ``axis`` and bounded by it (else by the example's sizes)."""
    import torch
    import tvm

    from planner.tvm.network import rename_symbols, symbolic_network

    params = mod["main"].params
    tensors = [i for i, value in enumerate(example_inputs) if isinstance(value, torch.Tensor)]
    # The importer's data parameters are the example's tensors, in order.
    param_of = {position: params[k] for k, position in enumerate(tensors) if k < len(params)}
    renamed: dict = {}
    sizes: dict[str, int] = {}
    for (position, index), symbol in places.items():
        param = param_of.get(position)
        if param is None:
            continue
        dim = param.ty.shape.values[index]
        if isinstance(dim, tvm.tirx.IntImm):
            raise ValueError(
                f"torch.export kept dimension {index} of input {param.name} static "
                f"({int(dim)}) although {symbol} is declared there: the model fixes that size"
            )
        if not isinstance(dim, tvm.tirx.Var):
            continue  # an expression of a symbol declared elsewhere
        if renamed.get(dim, symbol) != symbol:
            raise ValueError(
                f"torch.export made {renamed[dim]} and {symbol} one symbol (the model needs "
                f"them equal): declare one torch.export.Dim for both places"
            )
        renamed[dim] = symbol
        sizes.setdefault(symbol, int(example_inputs[position].shape[index]))
    for param in params[: len(tensors)]:
        for index, dim in enumerate(param.ty.shape.values):
            if isinstance(dim, tvm.tirx.Var) and dim not in renamed:
                raise ValueError(
                    f"dimension {index} of input {param.name} is symbolic ({dim.name}, "
                    "torch.export's name) but no torch.export.Dim names it: declare it as "
                    'torch.export.Dim("NAME", min=..., max=...) with NAME a symbol of the '
                    "shape axis"
                )
    mod, ranges = rename_symbols(mod, "main", renamed)
    symbols = list(dict.fromkeys(renamed.values()))
    if not symbols:
        raise ValueError(
            f"{where} declares dynamic_shapes, but torch.export left every input dimension "
            'static: name a dimension with torch.export.Dim("NAME", min=..., max=...)'
        )
    if axis is None:
        bounds = {s: sizes[s] for s in symbols}
    else:
        _check_axis(axis, symbols, ranges, where, declared)
        bounds = {s: axis.bounds[s] for s in symbols}
    network = symbolic_network(name, mod, "main", bounds)
    network.shape_limits = {
        s: (upper, f"the range torch.export kept for {s} in {where}")
        for s, (_, upper) in ranges.items() if upper is not None
    }
    return network


def _check_axis(
    axis: ShapeAxis, symbols: list[str], ranges: dict, where: str, declared: bool
) -> None:
    """ValueError, saying what to write, unless the model's symbols are the axis's and
    every point lies in the range torch.export kept for each."""
    unknown = [s for s in symbols if s not in axis.bounds]
    missing = [s for s in axis.symbols if s not in symbols]
    if unknown or missing:
        if not declared:  # dims name every symbol of the axis, and only those
            raise ValueError(
                f"torch.export made {', '.join(symbols)} symbolic for an axis of "
                f"{', '.join(axis.symbols)}"
            )
        ours = ", ".join(f'torch.export.Dim("{s}")' for s in symbols)
        raise ValueError(
            f"{where} declares {ours} but the shape axis names {', '.join(axis.symbols)}: "
            "their names must agree; name the Dim after the axis "
            f'(torch.export.Dim("{(missing or axis.symbols)[0]}", ...)) or the axis after '
            f"the Dim (shapes = {{ {(unknown or symbols)[0]} = [...] }})"
        )
    for symbol in symbols:
        lower, upper = ranges.get(symbol, (None, None))
        values = sorted({p[symbol] for p in axis.points} | {axis.bounds[symbol]})
        outside = [
            v for v in values
            if (lower is not None and v < lower) or (upper is not None and v > upper)
        ]
        if outside:
            kept = f"{lower if lower is not None else 0}..{upper if upper is not None else 'inf'}"
            raise ValueError(
                f"the shape axis has {symbol}={outside[0]}, outside the range torch.export "
                f"kept for {symbol} ({kept}) in {where}: widen the torch.export.Dim's min and "
                "max, or drop the point"
            )
