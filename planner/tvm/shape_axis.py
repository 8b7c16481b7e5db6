"""Compile a model with symbolic dimensions at every point of a shape axis.

For each point of a :class:`~planner.shapes.ShapeAxis` the module is specialised (every
symbol bound to its value, so kernels and plans are those of a static model of that shape)
and compiled by :func:`planner.tvm.compile.compile_model` under every strategy: planned,
built, checked against tvm-stock at that shape and measured, as a static model is. Beside
the points, the symbolic module itself is planned once by TVM's own planner at the axis's
bounds, which is what a deployment that builds once for the whole range holds.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import tvm
from tvm import relax

from planner import strategies as library
from planner.peak_formula import Aligned, FormulaError, SymbolicBuffer, fit, symbolic_plan
from planner.plan import validate_plan
from planner.problem import lower_bound
from planner.report import StrategyReport, point_folder
from planner.shapes import ShapeAxis, ShapeError, label
from planner.tvm.build.target import make_target
from planner.tvm.compile import compile_model, imported_network, with_bounds
from planner.tvm.measure import memory
from planner.tvm.network import Network
from planner.tvm.plan import lowering
from planner.tvm.plan.extract import ARENA_ALIGNMENT, align, bindings_of, extract
from planner.tvm.plan.stock import stock_arena
from planner.tvm.sources import ModelSource
from planner.tvm.steps import failure_text, step
from planner.tvm.strategies import STOCK, Variant, check_names

log = logging.getLogger(__name__)

_ALLOC = tvm.ir.Op.get("relax.builtin.alloc_tensor")


def compile_shapes(
    source: ModelSource,
    strategies: Sequence[str],
    shapes: ShapeAxis,
    *,
    model_name: str | None = None,
    target: str = "llvm",
    artifacts_dir: str | Path | None = None,
    seed: int = 0,
    base_dir: str | Path | None = None,
    pipeline: str = "",
    network: Network | None = None,
    **options,
) -> list[StrategyReport]:
    """One report per (strategy, point) of ``shapes``, in point order.

    ``shapes`` must name exactly the network's symbolic dimensions (ShapeError, a ValueError,
    says which is missing or unknown). Each point is compiled by :func:`compile_model`
    (``options`` are its keyword arguments), its artifacts under
    ``point_folder(artifacts_dir, point)``; a point that fails gives failed reports and the
    others go on.

    ``reserved_at_bound_bytes``, the same on every report: the bytes of the storages TVM's
    ``StaticPlanBlockMemory`` allocates for the *symbolic* module, whose sizes it takes at
    ``tir_var_upper_bound`` = the axis's bounds. That build allocates them whatever shape
    it is called with, so it is the intermediate memory a build-once deployment holds at
    every point; compare it with a point's ``intermediate_bytes`` (kernel workspace and
    outputs, which ``planned_bytes`` adds, follow the call's own shape in both builds).

    ``peak_formula`` of each plain library strategy (no rewrites, no reordering, no lifted
    temporaries): its intermediate arena as a formula of the symbols (see
    :mod:`planner.peak_formula`), from its own plan at the bounds, with where it was checked
    against that strategy's planned arena and lower bound at each point. Where there is
    none, ``{"missing": why}``.
    """
    if options.get("measurer") is None:
        # One measuring process for every point, as for a worker's job.
        with memory.MeasuringProcess() as measurer:
            return compile_shapes(
                source, strategies, shapes, model_name=model_name, target=target,
                artifacts_dir=artifacts_dir, seed=seed, base_dir=base_dir, pipeline=pipeline,
                network=network, **{**options, "measurer": measurer},
            )
    root = Path(base_dir) if base_dir else None
    tgt = make_target(target)
    if network is None:
        network = imported_network(
            source, tgt, base_dir=root, pipeline=pipeline, seed=seed, axis=shapes,
        )
    check_symbols(network, shapes)
    check_limits(network, shapes)
    name = model_name or network.name
    symbolic = replace(network, shape_bounds=dict(shapes.bounds))
    with step("lower"):
        reserved, lowered = reserved_at_bound(symbolic, tgt)
    reports: list[StrategyReport] = []
    handed = options.pop("repo_plans", None)
    for point in shapes.points:
        folder = point_folder(Path(artifacts_dir), point) if artifacts_dir is not None else None
        if handed is not None:
            # The repository's planners planned each point in the import (planner.tvm.job).
            options["repo_plans"] = {
                s: handed[plan_key(s, point)] for s in strategies if plan_key(s, point) in handed
            }
        try:
            found = compile_model(
                source,
                strategies,
                model_name=name,
                target=target,
                artifacts_dir=folder,
                seed=seed,
                network=specialise(network, point),
                **options,
            )
        except Exception as exc:  # one shape that does not build must not hide the others
            log.exception("%s failed at %s", name, label(point))
            found = [
                StrategyReport.failed(
                    name, s, f"at {label(point)}: {failure_text(exc, 'build')}",
                    model_source=source.source,
                )
                for s in strategies
            ]
        for report in found:
            report.shape_point = dict(point)
            report.reserved_at_bound_bytes = reserved
        reports += found
    if options.get("lift_temporaries"):
        for report in reports:
            report.peak_formula = {"missing": LIFTED}
    else:
        _attach_formulas(reports, lowered, symbolic.entry, shapes, seed)
    return reports


#: Why a strategy's report has no peak formula, where no formula is tried: ``peak_formula``
#: is then ``{"missing": reason}``, so that every page can say why.
LIFTED = (
    "kernel temporaries are lifted into the plan, and their sizes are read off the kernels "
    "at each point, not off the symbolic module"
)
NOT_ONE_PLAN = {
    "stock": "TVM's planner plans the symbolic build once, at the bound: "
    "reserved_at_bound_bytes is what it holds at every point",
    "rewrites": "rewrites merge tensors by what the kernels at each point allow, so no one "
    "plan is kept over the range",
    "reorder": "the operator order is chosen at each point, so no one plan is kept over the "
    "range",
    "repo": "the repository's planner plans each point itself",
}


def symbols_of(network: Network) -> set[str]:
    """The names of the symbolic dimensions of ``network``'s entry function."""
    func = network.mod[network.entry]
    found = [*relax.analysis.defined_symbolic_vars(func), *relax.analysis.free_symbolic_vars(func)]
    return {v.name for v in found}


def check_symbols(network: Network, shapes: ShapeAxis) -> None:
    """ShapeError unless ``shapes`` gives a value to every symbol of ``network`` and to
    nothing else."""
    own = symbols_of(network)
    if not own:
        first = shapes.symbols[0] if shapes.symbols else "seq"
        raise ShapeError(
            f"{network.name} has no symbolic dimensions to take a shape axis: say where "
            f'{first} is, with dims = {{ {first} = "INPUT:DIM" }} in the manifest (--dim '
            f"{first}=INPUT:DIM on the command line), or have a model file return (module, "
            f'example inputs, dynamic_shapes) with torch.export.Dim("{first}", ...), or name '
            f"an ONNX input's dim_param {first}"
        )
    missing, unknown = own - set(shapes.symbols), set(shapes.symbols) - own
    problems = []
    if unknown:
        problems.append(f"{', '.join(sorted(unknown))} is no symbol of {network.name}")
    if missing:
        problems.append(f"no points for {', '.join(sorted(missing))} of {network.name}")
    if problems:
        whence = [_read_from_values(network, symbol) for symbol in sorted(missing)]
        raise ShapeError(
            f"{'; '.join(problems)} (its symbols: {', '.join(sorted(own))})"
            + "".join(f"; {why}" for why in whence if why)
        )


def _read_from_values(network: Network, symbol: str) -> str | None:
    """Where ``symbol`` comes from when no input's shape holds it: the binding that casts
    a tensor's values to a size (``R.tensor_to_shape``, what ``.item()`` becomes), named,
    with what a user can do; None where an input holds it."""
    func = network.mod[network.entry]
    if any(symbol in str(param.ty) for param in func.params):
        return None
    bindings = list(bindings_of(func))
    values = {b.var: b.value for b in bindings}
    for binding in bindings:
        if not isinstance(binding, relax.MatchCast) or symbol not in str(binding.ty):
            continue
        source = values.get(binding.value)
        op = getattr(getattr(source, "op", None), "name", "")
        read = "a tensor's values (an .item(), a count or a maximum in the model's code)" \
            if op == "relax.tensor_to_shape" else f"the result of {op or 'an operation'}"
        return (
            f"{symbol} is no dimension of an input: the model reads it from {read}, "
            f"{binding.var.name} in the imported function, so no shape axis can give "
            "it points; size it from the input's shape instead (x.shape[...]), or, where "
            "the values decide it, compute at the largest size it may take with a mask"
        )
    return f"{symbol} is no dimension of an input and no size cast from the model's values"


def check_limits(network: Network, shapes: ShapeAxis) -> None:
    """ShapeError naming the point and the bound where ``shapes`` goes past a bound the model
    declares (:attr:`Network.shape_limits`): its bound as well, since TVM's build-once
    figure is planned there."""
    for symbol, (limit, declared_by) in network.shape_limits.items():
        past = [p for p in shapes.points if p.get(symbol, 0) > limit]
        where = f"{symbol} <= {limit}, which {network.name} declares ({declared_by})"
        if past:
            raise ShapeError(
                f"point {label(past[0])} is past the bound {where}: the model was not built "
                f"for it; build it for {symbol}={past[0][symbol]} or drop the point"
            )
        if shapes.bounds.get(symbol, 0) > limit:
            raise ShapeError(
                f"the axis's bound {symbol}={shapes.bounds[symbol]} is past the bound {where}"
            )


def plan_key(strategy: str, point: dict[str, int]) -> str:
    """Where the import hands over a repository planner's plan at ``point``."""
    return f"{strategy}@{label(point)}" if point else strategy


def specialise(network: Network, point: dict[str, int]) -> Network:
    """``network`` with every symbol bound to its value at ``point``: a static network whose
    inputs are drawn at that shape."""
    mod = relax.transform.BindSymbolicVars(dict(point), network.entry)(network.mod)
    shapes = [
        tuple(point[d] if isinstance(d, str) else d for d in shape)
        for shape in network.input_shapes
    ]
    return replace(network, mod=mod, input_shapes=shapes, shape_bounds={})


def reserved_at_bound(network: Network, target) -> tuple[int, tvm.IRModule]:
    """The bytes TVM's planner allocates for the symbolic ``network`` at its shape bounds
    (see :func:`compile_shapes`), and the lowered symbolic module it planned."""
    lowered = lowering.lower_to_allocations(with_bounds(network), target)
    planned = lowering.plan_with_stock_planner(lowered, target)
    extraction = extract(lowered, network.entry, dict(network.shape_bounds))
    intermediates = {t.name for t in extraction.tensors}
    unplanned = [
        b.var.name
        for b in bindings_of(planned[network.entry])
        if isinstance(b.value, relax.Call) and b.value.op == _ALLOC and b.var.name in intermediates
    ]
    if unplanned:
        # Allocated at run time in the call's own shape, so not reserved: the figure
        # would understate what TVM holds if this ever happens.
        log.warning("TVM's planner left %s of %s unplanned", ", ".join(unplanned), network.name)
    return stock_arena(planned, extraction), lowered


def _attach_formulas(
    reports: list[StrategyReport], lowered, entry: str, shapes: ShapeAxis, seed: int
) -> None:
    by_strategy: dict[str, list[StrategyReport]] = {}
    for report in reports:
        by_strategy.setdefault(report.strategy, []).append(report)
    chosen = {s.name: s for s in check_names(list(by_strategy))}
    for name, own in by_strategy.items():
        strategy = chosen[name]
        reason = None
        if strategy.name == STOCK:
            reason = NOT_ONE_PLAN["stock"]
        elif strategy.variant is Variant.REWRITES:
            reason = NOT_ONE_PLAN["rewrites"]
        elif strategy.reorder:
            reason = NOT_ONE_PLAN["reorder"]
        elif strategy.variant is not Variant.PLAIN:
            reason = NOT_ONE_PLAN["repo"]
        formula = {"missing": reason}
        if reason is None:
            try:
                formula = peak_formula(lowered, entry, shapes, strategy.base, own, seed)
            except (FormulaError, ValueError) as exc:
                formula = {"missing": str(exc)}
        for report in own:
            report.peak_formula = formula


def _free_symbols(shapes: ShapeAxis) -> dict[str, list[str]]:
    """Symbols that take their own values, each with the symbols that follow it (equal at
    every point and at the bound): the formula is written in the first of each group."""
    groups: dict[str, list[str]] = {}
    for symbol in shapes.symbols:
        leader = next(
            (
                g
                for g in groups
                if shapes.bounds[g] == shapes.bounds[symbol]
                and all(p[g] == p[symbol] for p in shapes.points)
            ),
            None,
        )
        if leader is None:
            groups[symbol] = [symbol]
        else:
            groups[leader].append(symbol)
    return groups


def _occurrences(expr, names: set[str]) -> int:
    """How many times ``names`` appear in a shape expression: a bound on its degree in them."""
    if isinstance(expr, tvm.tirx.Var):
        return int(expr.name in names)
    return sum(
        _occurrences(getattr(expr, part), names)
        for part in ("a", "b", "value")
        if hasattr(expr, part) and not isinstance(expr, tvm.tirx.IntImm)
    )


def peak_formula(
    lowered, entry: str, shapes: ShapeAxis, base: str, reports: list[StrategyReport], seed: int
) -> dict:
    """``base``'s plan of the symbolic ``lowered`` at the bounds, kept valid at every shape of
    the range, as a formula; checked at each point (a plan without overlaps there, its
    arena against ``reports``' planned one and the point's lower bound)."""
    groups = _free_symbols(shapes)
    free = list(groups)

    def full(values: dict[str, int]) -> dict[str, int]:
        return {s: values[leader] for leader, group in groups.items() for s in group}

    at_bound = extract(lowered, entry, dict(shapes.bounds))
    problem = at_bound.problem()
    if not problem.buffers:
        raise FormulaError("the model has no intermediates")
    solution = library.solve(problem, base, seed=seed)
    # Each symbol's samples are multiples of the step every point is a multiple of, so that
    # strided shapes divide evenly at the samples as they do at the points.
    steps = {
        s: math.gcd(shapes.bounds[s], *(p[s] for p in shapes.points)) for s in free
    }
    shapes_of = {
        b.var.name: b.var.ty.shape.values
        for b in bindings_of(lowered[entry])
        if isinstance(b.value, relax.Call) and b.value.op == _ALLOC
    }
    degrees_of = {
        t.name: [
            sum(_occurrences(d, set(groups[s])) for d in shapes_of[t.name]) for s in free
        ]
        for t in at_bound.tensors
    }
    most = max(max(d) for d in degrees_of.values())
    samples = [[steps[s] * k for k in range(1, most + 2)] for s in free]
    cache: dict[tuple, dict[str, int]] = {}

    def sizes(values: dict[str, int]) -> dict[str, int]:
        # Unrounded: the alignment is applied in the formula (Aligned), since rounded
        # sizes are no polynomial at small points.
        key = tuple(values[s] for s in free)
        if key not in cache:
            tensors = extract(lowered, entry, full(values)).tensors
            cache[key] = {t.name: t.size for t in tensors}
        return cache[key]

    checks = [dict(zip(free, (p[s] for s in free), strict=True)) for p in shapes.points]
    checks.append({s: shapes.bounds[s] for s in free})
    buffers = []
    for tensor in at_bound.tensors:
        size = fit(free, degrees_of[tensor.name], samples, lambda v, n=tensor.name: sizes(v)[n])
        for values in checks:
            if size(values) != sizes(values)[tensor.name]:
                raise FormulaError(
                    f"the size of {tensor.name} is no polynomial of degree "
                    f"{degrees_of[tensor.name]} at {label(full(values))}"
                )
        buffers.append(SymbolicBuffer(
            tensor.name, tensor.lower, tensor.upper,
            Aligned.of_size(size, ARENA_ALIGNMENT, steps),
        ))
    minimum = {s: min(p[s] for p in shapes.points) for s in free}
    bound = {s: shapes.bounds[s] for s in free}
    plan = symbolic_plan(buffers, solution.offsets, bound, minimum)
    own = {label(r.shape_point): r for r in reports if r.ok}
    checked = {}
    for values in checks[:-1]:
        point = full(values)
        extraction = extract(lowered, entry, point)
        point_problem = extraction.problem()
        offsets = plan.offsets_at(values)
        try:
            validate_plan(point_problem, offsets)
            valid = True
        except ValueError:
            valid = False
        value = plan.peak_at(values)
        report = own.get(label(point))
        mine = report.intermediate_bytes if report else None
        checked[label(point)] = {
            "formula": value,
            # The point's own compile failed: the formula says nothing of it.
            "point_failed": report is None,
            # The point's own compile: the module specialised to the point, whose problem
            # may differ from the symbolic module's at the same values (fused or folded
            # otherwise), so its bound is not the formula plan's bound.
            "planned": mine,
            "lower_bound": report.lower_bound_bytes if report else None,
            "formula_problem_lower_bound": align(lower_bound(point_problem)),
            "valid_plan": valid,
            "formula_at_least_planned": None if mine is None else value >= mine,
        }
    ties = {s: leader for leader, group in groups.items() for s in group[1:]}
    # Stated over the points whose own compile succeeded: a failed point is no evidence.
    held = [v for v in checks[:-1] if not checked[label(full(v))]["point_failed"]]
    left_out = [point for point, check in checked.items() if check["point_failed"]]
    if not held:
        raise FormulaError("no point of the axis compiled: the formula would rest on none")
    span = {s: [min(v[s] for v in held), max(v[s] for v in held)] for s in free}
    return {
        "of": "intermediate_bytes",
        "expression": plan.expression(),
        "terms": [t.text() for t in plan.peak],
        "symbols": free,
        "ties": ties,
        "strategy": base,
        "range": span,
        "left_out": left_out,
        # Sizes are fitted where each symbol is a multiple of its step, as every point is.
        "multiple_of": steps,
        "at_bound": plan.peak_at(bound),
        "checked": checked,
    }
