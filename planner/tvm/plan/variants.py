"""The modules a function's strategies plan: with or without kernel temporaries lifted into
the plan, in program order or in the order of least live memory."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import tvm

from planner.order import OrderResult
from planner.problem import Problem, lower_bound
from planner.report import StrategyReport
from planner.tvm.plan.extract import Extraction, align, extract
from planner.tvm.plan.kernel_temps import (
    KernelTemporaries,
    lift_kernel_temporaries,
    refine_lifetimes,
)
from planner.tvm.plan.reorder import ReorderError, choose_binding_order
from planner.tvm.plan.rewrites import inline_copy_blocks, inline_pool_padding
from planner.tvm.strategies import CompileStrategy, Variant

log = logging.getLogger(__name__)


@dataclass
class PlanVariant:
    """A lowered module as our strategies plan it: with or without lifted temporaries."""

    module: tvm.IRModule
    #: Tensors timed for planning (blocks inside kernels counted when lifted).
    planned: Extraction
    #: The same tensors timed by whole bindings, which is what the rewrites reason about.
    by_binding: Extraction
    #: Whether kernel temporaries were lifted into the plan (then TVM's pool holds none).
    lifted: bool = False
    #: The lifted temporaries, to time them again after the bindings move.
    temporaries: KernelTemporaries | None = None
    #: For ``+reorder``: the same module in program order, to fall back on, and the search
    #: that chose this order (None where none ran; ``order_note`` says why).
    program: PlanVariant | None = None
    order: OrderResult | None = None
    order_note: str = ""
    #: What :func:`find_rewrites` found in this module: the same for every base strategy.
    rewrites: object = None


class FunctionPlanning:
    """One function of a lowered module as the chosen strategies plan it: the variants they
    plan (with or without lifted kernel temporaries, in program or chosen order), and each
    strategy's plan (:func:`planner.tvm.plan.strategy.plan_strategy`), which the compile
    builds (:func:`planner.tvm.compile.plan_and_build`).

    :func:`planner.tvm.compile.compile_model` plans its network's one entry function with it;
    an LLM deployment plans each of its functions (:mod:`planner.tvm.llm.deployment`).
    """

    def __init__(
        self, lowered: tvm.IRModule, entry: str, bounds: dict[str, int], chosen, target, *,
        lift_temporaries: bool | None = None,
    ):
        self.lowered, self.entry, self.bounds, self.target = lowered, entry, bounds, target
        self.plain = extract(lowered, entry, bounds)
        # What TVM's workspace pool will hold for the stock build; GPU kernels are scheduled
        # differently and are not looked into.
        self.temporaries = KernelTemporaries([], [])
        can_lift = target.kind.name in ("llvm", "c")
        gpu = "gpu" in target.keys
        if can_lift:
            self.temporaries = lift_kernel_temporaries(lowered, entry, bounds=bounds)[1]
        variants = {
            Variant.STOCK: PlanVariant(lowered, self.plain, self.plain),
            Variant.PLAIN: prepare_variant(lowered, entry, bounds, bool(lift_temporaries)),
        }
        variants[Variant.REPO] = variants[Variant.PLAIN]
        if any(s.variant is Variant.REWRITES for s in chosen):
            # A GPU schedule computes pooling padding inline and keeps kernel temporaries in
            # shared and local memory; one it leaves in global memory is not lifted, since
            # the kernel's blocks run concurrently, not one after another as lifting times
            # them (find_rewrites lists such kernels on the report).
            inlined = lowered
            if can_lift:
                inlined = inline_copy_blocks(inline_pool_padding(lowered)[0])[0]
            lift = can_lift if lift_temporaries is None else lift_temporaries and not gpu
            variants[Variant.REWRITES] = prepare_variant(inlined, entry, bounds, lift)
        self.variants = variants
        self.reordered = {
            kind: in_chosen_order(variants[kind], entry, bounds)
            for kind in {s.variant for s in chosen if s.reorder}
        }

    def variant(self, strategy: CompileStrategy) -> PlanVariant:
        return (self.reordered if strategy.reorder else self.variants)[strategy.variant]

    def report(self, strategy: CompileStrategy, problem: Problem, **fields) -> StrategyReport:
        """A report of ``strategy`` on this function with what planning alone knows."""
        return StrategyReport(
            strategy=strategy.name,
            lower_bound_bytes=align(lower_bound(problem)) if problem.buffers else 0,
            output_bytes=sum(t.size for t in self.plain.escaping),
            kernel_workspace_bytes=(
                0 if self.variant(strategy).lifted else self.temporaries.lifted_bytes
            ),
            kernel_stack_bytes=self.temporaries.stack_bytes,
            shape_bounds=self.bounds,
            tvm_version=tvm.__version__,
            target=str(self.target),
            entry=self.entry,
            **fields,
        )


def prepare_variant(lowered: tvm.IRModule, entry: str, bounds: dict, lift: bool) -> PlanVariant:
    if not lift:
        extraction = extract(lowered, entry, bounds)
        return PlanVariant(lowered, extraction, extraction)
    module, temporaries = lift_kernel_temporaries(lowered, entry, bounds=bounds)
    by_binding = extract(module, entry, bounds)
    return PlanVariant(
        module,
        refine_lifetimes(by_binding, temporaries),
        by_binding,
        lifted=True,
        temporaries=temporaries,
    )


def in_chosen_order(variant: PlanVariant, entry: str, bounds: dict) -> PlanVariant:
    """``variant`` with its operators in the order of least live memory, if one is better."""
    try:
        module, choice = choose_binding_order(variant.module, entry, bounds)
    except Exception as exc:  # a failed search leaves program order, and the build, standing
        if not isinstance(exc, ReorderError):
            log.exception("operator order search failed")
        return replace(
            variant, program=variant, order_note=f"not reordered: {type(exc).__name__}: {exc}"
        )
    if choice.kept_program_order:
        return replace(variant, program=variant, order=choice)
    by_binding = extract(module, entry, bounds)
    planned = by_binding
    if variant.lifted:
        planned = refine_lifetimes(by_binding, variant.temporaries)
    return PlanVariant(
        module,
        planned,
        by_binding,
        variant.lifted,
        variant.temporaries,
        program=variant,
        order=choice,
    )
