"""Plan a model for a bare-metal export: the planned Relax function and its kernels.

The planning is the one ``compile_model`` does (TVM's pipeline up to ``CallTIRRewrite``,
a strategy's offsets written back as one arena), stopped before TVM's VM lowering: the
export walks the planned function itself and calls the kernels from C, so what it needs is
the function with its arena offsets and the finished kernels, not a VM executable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tvm

from planner import strategies as library
from planner.plan import validate_plan
from planner.tvm.network import Network
from planner.tvm.plan import lowering
from planner.tvm.plan.apply import apply_plan
from planner.tvm.plan.extract import Extraction, align, extract
from planner.tvm.plan.kernel_temps import lift_kernel_temporaries, refine_lifetimes
from planner.tvm.plan.rewrites import find_rewrites, inline_pool_padding, rewrite_kernels
from planner.tvm.plan.stock import stock_offsets
from planner.tvm.strategies import STOCK, Variant, check_names


class MicroPlanError(ValueError):
    """The model or strategy cannot be planned for a bare-metal export."""


@dataclass
class PlannedModel:
    network: Network
    strategy: str
    #: The planned module before TVM's VM lowering: the entry function places every
    #: intermediate in an ``alloc_storage`` at an offset and calls kernels by ``GlobalVar``.
    module: tvm.IRModule
    #: The same module after TVM's finalisation: its PrimFuncs are the kernels to export.
    finished: tvm.IRModule
    offsets: dict[str, int]
    arena_bytes: int
    extraction: Extraction
    #: Whether kernel temporaries were lifted into the arena (then few stay in a workspace).
    lifted: bool


def example_inputs(network: Network, seed: int = 0) -> list[np.ndarray]:
    """The network's inputs for a check run (integers spread over their range)."""
    return network.random_inputs(seed)


def plan_models(
    network: Network, strategies: Sequence[str], target: tvm.target.Target, *, seed: int = 0
) -> dict[str, PlannedModel | MicroPlanError]:
    """Each strategy's planned model, or the reason it cannot be exported."""
    if network.shape_bounds:
        raise MicroPlanError(
            f"{network.name} has symbolic dimensions ({', '.join(network.shape_bounds)}); a "
            "bare-metal export needs static shapes"
        )
    chosen = check_names(list(strategies))
    entry = network.entry
    lowered = lowering.lower_to_allocations(network.mod, target)
    results: dict[str, PlannedModel | MicroPlanError] = {}
    rewritten = None
    for strategy in chosen:
        try:
            if strategy.reorder:
                # Not silently planned in program order under a name that says otherwise.
                raise MicroPlanError(f"{strategy.name}: reordered plans are not exported yet")
            if strategy.variant is Variant.STOCK:
                extraction = extract(lowered, entry, {})
                planned = lowering.plan_with_stock_planner(lowered, target)
                offsets, arena = stock_offsets(planned, extraction)
                lifted = False
            elif strategy.variant is Variant.PLAIN:
                extraction = extract(lowered, entry, {})
                solution = library.solve(extraction.problem(), strategy.base, seed=seed)
                validate_plan(extraction.problem(), solution.offsets)
                offsets, arena = solution.offsets, align(solution.height)
                planned = apply_plan(lowered, extraction, offsets, arena)
                lifted = False
            elif strategy.variant is Variant.REWRITES:
                if rewritten is None:
                    rewritten = _lift(lowered, entry)
                module, extraction, by_binding = rewritten
                offsets, height, drop, module = _plan_with_rewrites(
                    module, extraction, by_binding, strategy.base, seed
                )
                arena = align(height)
                planned = apply_plan(module, extraction, offsets, arena, drop=drop)
                lifted = True
            else:
                raise MicroPlanError(f"{strategy.name}: repository planners are not exported")
            finished = lowering.finish_lowering(planned, target, stock_planner=False)
        except MicroPlanError as exc:
            results[strategy.name] = exc
            continue
        except Exception as exc:  # one strategy failing must not hide the others
            results[strategy.name] = MicroPlanError(f"{type(exc).__name__}: {exc}")
            continue
        results[strategy.name] = PlannedModel(
            network, strategy.name, planned, finished, offsets, arena, extraction, lifted
        )
    return results


def _lift(lowered: tvm.IRModule, entry: str):
    inlined, _ = inline_pool_padding(lowered)
    module, temporaries = lift_kernel_temporaries(inlined, entry)
    by_binding = extract(module, entry, {})
    return module, refine_lifetimes(by_binding, temporaries), by_binding


def _plan_with_rewrites(module, extraction, by_binding, base: str, seed: int):
    """The rewrites' merged plan where it is smaller than the plain one, as compile does."""
    problem = extraction.problem()
    rewrites = find_rewrites(module, by_binding, planned=extraction)
    merged = rewrites.problem(extraction)
    solution = library.solve(merged, base, seed=seed)
    plain = library.solve(problem, base, seed=seed)
    if solution.height <= plain.height:
        validate_plan(merged, solution.offsets)
        # The kernels the rewrites change (a fused concatenation's copy, noalias where
        # aliased buffers interleave) must change with them.
        module = rewrite_kernels(module, extraction.function, rewrites)
        return (rewrites.expand(extraction, solution.offsets), solution.height,
                rewrites.dropped, module)
    validate_plan(problem, plain.offsets)
    return plain.offsets, plain.height, set(), module


__all__ = ["STOCK", "MicroPlanError", "PlannedModel", "example_inputs", "plan_models"]
