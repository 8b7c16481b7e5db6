"""What every model source builds: a Relax module plus the inputs to run it with."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn


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
            # Small weights keep activations finite through deep stacks.
            drawn = (rng.standard_normal(shape) * 0.1).astype(dtype)
            inputs.append(self.fixed_inputs.get(name, drawn))
        return inputs


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
    return Network(name, mod, names, shapes, dtypes, entry=entry, fixed_inputs=fixed)


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
