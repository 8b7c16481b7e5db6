"""What every model source builds: a Relax module plus the inputs to run it with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn


@dataclass(frozen=True)
class Framework:
    """The framework a network was exported from, to run the same data inputs through.

    ``run`` takes the data inputs (the weights are the module's own, the values bound into
    the network) and returns the outputs flattened as the network returns them; None where
    the framework is missing here, ``missing`` saying why. ``after_pipeline``: the network
    went through a repository's pipeline after its export, which may change its numbers on
    purpose (float16, approximations), so a difference from the framework is recorded, not
    refused; a value that is not finite still is.
    """

    name: str
    run: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None
    missing: str = ""
    after_pipeline: bool = False


def torch_framework(module) -> Framework:
    """PyTorch eager on ``module``, called with the data inputs as positional tensors."""

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch
        from torch.utils._pytree import tree_leaves

        with torch.no_grad():
            out = module(*(torch.from_numpy(np.ascontiguousarray(x)) for x in inputs))
        return [_numpy(leaf) for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor)]

    return Framework("PyTorch", run)


def _numpy(tensor) -> np.ndarray:
    """``tensor`` as numpy holds it. numpy has no bfloat16 or float8 types, so torch
    refuses those; they go through float32 (which holds each of their values exactly) into
    ml_dtypes' type of the same name, the type TVM's build returns them in, so the check
    compares the values rather than not at all."""
    import torch

    tensor = tensor.detach()
    if not tensor.is_floating_point() or tensor.dtype in (
        torch.float16, torch.float32, torch.float64
    ):
        return tensor.numpy()
    values = tensor.float().numpy()
    import ml_dtypes  # TVM's own requirement

    name = str(tensor.dtype).removeprefix("torch.")
    return values.astype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else values


@dataclass
class Network:
    """A Relax module plus the inputs to run it with (the first input is the data).

    ``fixed_inputs`` holds the values of inputs that must not be random, such as the trained
    weights of an imported ONNX file: a random variance under a batch norm would turn the
    outputs into NaN, and NaN compares equal to nothing useful.
    """

    name: str
    mod: tvm.IRModule
    input_names: list[str]
    input_shapes: list[tuple[int, ...]]
    input_dtypes: list[str]
    entry: str = "forward"
    fixed_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    #: Upper bounds of symbolic dimensions (by name): memory is planned for these, and the
    #: check and timing runs use inputs of exactly this size.
    shape_bounds: dict[str, int] = field(default_factory=dict)
    #: How many leading inputs are data; the rest are weights.
    data_inputs: int = 1
    #: Integer inputs' ranges ``[low, high)`` by name, where the dtype's range is wrong (an
    #: index into a table); found in the module for indices that feed ``take``.
    input_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Bytes of the weights bound into the module as constants (see :meth:`bind_weights`).
    bound_weights_bytes: int = 0
    #: What the model was exported from, to check TVM's own build against; None for a
    #: model written for TVM (the zoo's Relax networks) or handed over by another process.
    framework: Framework | None = None
    #: The largest value of a symbolic dimension the model itself allows, by name, where it
    #: declares one, with what declares it (``{"seq": (128, "n_positions")}``): past it the
    #: model reads beyond a table it was built with, and stock and plan read the same
    #: garbage, so a shape axis may not go there.
    shape_limits: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: What the plan assumes of the model beyond its export (how a mixture of experts
    #: routes), said in every Result.
    assumptions: tuple[str, ...] = ()

    def concrete_shape(self, shape: tuple[int | str, ...]) -> tuple[int, ...]:
        try:
            return tuple(d if isinstance(d, int) else self.shape_bounds[d] for d in shape)
        except KeyError as exc:
            raise ValueError(f"{self.name}: no upper bound for dimension {exc}") from None

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        inputs = []
        for name, symbolic, dtype in zip(
            self.input_names, self.input_shapes, self.input_dtypes, strict=True
        ):
            shape = self.concrete_shape(symbolic)
            # Draw for every input, fixed or not, so one input's values never depend on
            # whether another one is fixed.
            drawn = _draw(rng, shape, dtype, self.input_ranges.get(name))
            inputs.append(self.fixed_inputs.get(name, drawn))
        return inputs

    def bind_weights(self, seed: int = 0) -> Network:
        """This network as a deployment compiles it: weights bound as constants, and the
        work that depends on weights alone (a transposed classifier weight) folded away.

        Weights are drawn as :meth:`random_inputs` draws them for ``seed``; the network
        returned takes the data inputs only.
        """
        count = self.data_inputs
        if count >= len(self.input_names):
            return self
        values = self.random_inputs(seed)
        weights = {
            name: tvm.runtime.tensor(value)
            for name, value in zip(self.input_names[count:], values[count:], strict=True)
        }
        mod = relax.transform.BindParams(self.entry, weights)(self.mod)
        mod = relax.transform.FoldConstant()(mod)
        data = set(self.input_names[:count])
        return replace(
            self,
            mod=mod,
            input_names=self.input_names[:count],
            input_shapes=self.input_shapes[:count],
            input_dtypes=self.input_dtypes[:count],
            fixed_inputs={k: v for k, v in self.fixed_inputs.items() if k in data},
            bound_weights_bytes=sum(int(v.nbytes) for v in values[count:]),
        )


def _draw(rng: np.random.Generator, shape, dtype: str, bounds) -> np.ndarray:
    """Random values of ``dtype``: integers over their useful range, not rounded normals.

    Normal draws scaled by 0.1 keep activations finite through deep float stacks, but cast
    to an integer type they are all zeros, and a check on zeros passes for almost any plan.
    """
    kind = np.dtype(dtype)
    if not np.issubdtype(kind, np.integer) and kind != np.bool_:
        return (rng.standard_normal(shape) * 0.1).astype(dtype)
    if kind == np.bool_:
        return rng.integers(0, 2, size=shape).astype(dtype)
    if bounds is None:
        info = np.iinfo(kind)
        # Wide integers are counts and indices far more often than values to do arithmetic
        # on at full range; a small non-negative range keeps them meaningful.
        bounds = (int(info.min), int(info.max) + 1) if info.bits <= 16 else (0, 256)
    return rng.integers(bounds[0], bounds[1], size=shape).astype(dtype)


def index_ranges(mod: tvm.IRModule, entry: str) -> dict[str, tuple[int, int]]:
    """Integer parameters of ``entry`` used to index a table (``take``), with its range.

    Importers cast and reshape indices before the ``take``; those keep the values, so an
    index is followed back through them to the parameter it came from.
    """
    func = mod[entry]
    origin: dict[relax.Var, str] = {p: p.name for p in func.params}
    keeps_values = {
        tvm.ir.Op.get(f"relax.{name}")
        for name in ("astype", "reshape", "permute_dims", "expand_dims", "squeeze", "flatten")
    }
    take = tvm.ir.Op.get("relax.take")
    found: dict[str, tuple[int, int]] = {}
    body = func.body
    bindings = (
        [b for block in body.blocks for b in block.bindings]
        if isinstance(body, relax.SeqExpr)
        else []
    )
    for binding in bindings:
        value = binding.value
        if not isinstance(value, relax.Call) or not value.args:
            continue
        if value.op in keeps_values and value.args[0] in origin:
            origin[binding.var] = origin[value.args[0]]
        elif value.op == take and len(value.args) > 1 and value.args[1] in origin:
            table = value.args[0].ty
            axis = int(value.attrs.axis) if value.attrs.axis is not None else 0
            if isinstance(table, relax.TensorType) and table.shape is not None:
                extent = table.shape.values[axis]
                if isinstance(extent, tvm.tirx.IntImm):
                    name = origin[value.args[1]]
                    high = min(found.get(name, (0, int(extent)))[1], int(extent))
                    found[name] = (0, high)
    return found


def export_nn(
    name: str,
    module: nn.Module,
    input_shape: tuple[int | str, ...],
    dtype: str = "float32",
    shape_bounds: dict[str, int] | None = None,
) -> Network:
    """Export a ``relax.frontend.nn`` module whose ``forward`` takes one tensor ``x``.

    Dimensions given as names are symbolic; ``shape_bounds`` gives each its upper bound.
    """
    mod, params = module.export_tvm(spec={"forward": {"x": nn.spec.Tensor(input_shape, dtype)}})
    names = ["x"] + [p_name for p_name, _ in params]
    shapes = [tuple(input_shape)] + [tuple(int(d) for d in p.shape) for _, p in params]
    dtypes = [dtype] + [p.dtype for _, p in params]
    return Network(name, mod, names, shapes, dtypes, shape_bounds=dict(shape_bounds or {}))


def from_imported(name: str, mod: tvm.IRModule, entry: str = "main") -> Network:
    """A :class:`Network` for a module that a frontend importer produced.

    Importers attach the weights they kept as function parameters to the function as a
    ``params`` attribute; those become :attr:`Network.fixed_inputs`, in parameter order after
    the data inputs.
    """
    mod, weights = relax.frontend.detach_params(mod)
    func = mod[entry]
    names, shapes, dtypes = [], [], []
    for param in func.params:
        shape, dtype = static_tensor_type(param, f"input {param.name} of {name}")
        names.append(param.name)
        shapes.append(shape)
        dtypes.append(dtype)
    values = [w.numpy() for w in weights.get(entry, [])]
    fixed = dict(zip(names[len(names) - len(values) :], values, strict=True)) if values else {}
    return Network(
        name,
        mod,
        names,
        shapes,
        dtypes,
        entry=entry,
        fixed_inputs=fixed,
        data_inputs=len(names) - len(values),
        input_ranges=index_ranges(mod, entry),
    )


def rename_symbols(
    mod: tvm.IRModule, entry: str, names: dict[tvm.tirx.Var, str]
) -> tuple[tvm.IRModule, dict[str, tuple[int | None, int | None]]]:
    """``mod`` with the symbolic dimensions of ``names`` renamed (torch.export calls them
    ``s0``, ``s53``; a shape axis calls them ``seq``), and the range of each as the
    importer put it in ``tir_var_lower_bound`` and ``tir_var_upper_bound`` (None where it
    gave none), by its new name. Those attributes are renamed too."""
    func = mod[entry]
    attrs = func.attrs or {}
    ranges: dict[str, tuple[int | None, int | None]] = {}
    limits: dict[str, dict[str, int]] = {"tir_var_lower_bound": {}, "tir_var_upper_bound": {}}
    for old, new in names.items():
        found = []
        for key, renamed in limits.items():
            values = attrs[key] if key in attrs else {}
            value = int(values[old.name]) if old.name in values else None
            if value is not None:
                renamed[new] = value
            found.append(value)
        ranges[new] = (found[0], found[1])
    func = func.bind_symbolic_vars(
        {old: tvm.tirx.Var(new, "int64") for old, new in names.items()}
    )
    for key, renamed in limits.items():
        func = func.without_attr(key)
        if renamed:
            func = func.with_attr(key, renamed)
    mod = tvm.IRModule(mod.functions, attrs=mod.attrs)
    mod.update_func(mod.get_global_var(entry), func)
    return mod, ranges


def symbolic_network(
    name: str, mod: tvm.IRModule, entry: str, bounds: dict[str, int]
) -> Network:
    """A :class:`Network` for an imported module whose inputs have named symbolic
    dimensions: described as :func:`from_imported` describes it bound at ``bounds`` (names,
    dtypes, weights, index ranges), then given the symbolic module back, with each symbolic
    input dimension as its symbol's name in ``input_shapes``. ValueError for an input
    dimension that is an expression of symbols (``2*seq``): inputs are drawn by name."""
    fixed = relax.transform.BindSymbolicVars(dict(bounds), entry)(mod)
    network = from_imported(name, fixed, entry)
    symbolic, _ = relax.frontend.detach_params(mod)
    shapes: list[tuple] = []
    for param, static in zip(symbolic[entry].params, network.input_shapes, strict=True):
        dims = []
        for dim, size in zip(param.ty.shape.values, static, strict=True):
            if isinstance(dim, tvm.tirx.Var):
                dims.append(dim.name)
            elif isinstance(dim, tvm.tirx.IntImm):
                dims.append(size)
            else:
                raise ValueError(
                    f"input {param.name} of {name} has a dimension {dim}: give each symbolic "
                    "input dimension a symbol of its own"
                )
        shapes.append(tuple(dims))
    return replace(network, mod=symbolic, input_shapes=shapes, shape_bounds=dict(bounds))


def static_tensor_type(var: relax.Var, what: str) -> tuple[tuple[int, ...], str]:
    """``var``'s static shape and dtype; ValueError naming ``what`` when it has none."""
    ty = var.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise ValueError(f"{what} is not a tensor of known shape")
    dims = []
    for dim in ty.shape.values:
        if not isinstance(dim, tvm.tirx.IntImm):
            raise ValueError(f"{what} has a symbolic dimension {dim}")
        dims.append(int(dim))
    return tuple(dims), str(ty.dtype)
