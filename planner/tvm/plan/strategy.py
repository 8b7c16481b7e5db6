"""One strategy's plan of one function: the order it keeps, the arena it solves (TVM's own
planner, a library strategy, the rewrites, a repository's planner) and the module with the
plan written in."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import tvm

from planner import strategies as library
from planner.plan import validate_plan
from planner.problem import Problem, lower_bound
from planner.report import StrategyReport
from planner.tvm import repo_code
from planner.tvm.plan import lowering
from planner.tvm.plan.apply import apply_plan
from planner.tvm.plan.extract import Extraction, align
from planner.tvm.plan.noalias import unalias_overlapping_calls
from planner.tvm.plan.rewrites import find_rewrites, rewrite_kernels
from planner.tvm.plan.stock import stock_arena, stock_offsets
from planner.tvm.plan.variants import PlanVariant
from planner.tvm.strategies import CompileStrategy, Variant

log = logging.getLogger(__name__)


@dataclass
class PlannedStrategy:
    """One strategy's plan of one function, written into its module: what the build stage
    builds (:class:`planner.tvm.build.planned.Build`) and the plan files describe."""

    report: StrategyReport
    module: tvm.IRModule
    offsets: dict[str, int]
    extraction: Extraction
    #: The problem a +rewrites plan really solved: each merged group one buffer.
    merged: Problem | None = None
    #: The arena's bytes, aligned.
    arena: int = 0


def plan_strategy(
    variant: PlanVariant,
    strategy: CompileStrategy,
    report: StrategyReport,
    target: tvm.target.Target,
    seed: int,
    *,
    base_dir: Path | None = None,
    planner_time_limit: float = repo_code.PLANNER_TIME_LIMIT,
    repo_plans: dict[str, dict] | None = None,
) -> PlannedStrategy:
    """Plan ``variant`` (in the order :func:`choose_order` kept) with ``strategy`` and write
    the plan into its module."""
    lowered, extraction = variant.module, variant.planned
    problem = extraction.problem()
    drop: set = set()
    merged = None
    if strategy.variant is Variant.STOCK:
        planned = lowering.plan_with_stock_planner(lowered, target)
        arena = stock_arena(planned, extraction)
        report.proven_optimal = False
        try:
            offsets, arena = stock_offsets(planned, extraction)
            validate_plan(problem, offsets)
        except ValueError as exc:  # InvalidPlan included
            # TVM runs its own plan correctly: a plan we cannot read is our problem, and
            # the build still stands as the reference every other strategy is checked on.
            log.warning("cannot read TVM's plan of %s: %s", report.model, exc)
            report.warnings.append(f"TVM's plan could not be read as offsets: {exc}")
            offsets = {}
    else:
        if strategy.variant is Variant.REWRITES:
            offsets, height, seconds, drop, lowered, merged = plan_with_rewrites(
                variant, strategy.base, report, seed
            )
            report.proven_optimal = False
        elif strategy.variant is Variant.REPO and repo_plans is not None:
            plan = repo_plans.get(strategy.name) or {"error": "its planner returned no plan"}
            if "error" in plan:
                raise repo_code.RepoCodeError(plan["error"])
            offsets, seconds = plan["offsets"], plan["seconds"]
            # Timed by the repository's own process: the one figure it reports itself.
            report.reported_by_repository = ["plan_seconds"]
            validate_plan(problem, offsets)
            height = max((offsets[b.id] + b.size for b in problem.buffers), default=0)
            report.proven_optimal = False
        elif strategy.variant is Variant.REPO:
            started = time.perf_counter()
            offsets = repo_code.run_planner(
                strategy, problem, base_dir, time_limit=planner_time_limit
            )
            seconds = time.perf_counter() - started
            # Checked before anything is built from it: a missing or overlapping buffer
            # is the planner's fault and must read as such.
            validate_plan(problem, offsets)
            height = max((offsets[b.id] + b.size for b in problem.buffers), default=0)
            report.proven_optimal = False
        else:
            solution = library.solve(problem, strategy.base, seed=seed)
            offsets, height, seconds = solution.offsets, solution.height, solution.seconds
            report.proven_optimal = solution.proven_optimal
        arena = align(height)
        report.plan_seconds = round(seconds, 4)
        planned = apply_plan(lowered, extraction, offsets, arena, drop=drop)
        if strategy.variant is Variant.REWRITES and report.rewrites:
            # apply_plan took the promise away; the Result says from which kernels.
            report.rewrites["noalias_dropped"] = unalias_overlapping_calls(
                lowered, extraction, offsets, drop=drop
            )[1]
    if strategy.variant is Variant.PLAIN:
        # The plan we report must be the plan we built: check it like any other.
        validate_plan(problem, offsets)
    return PlannedStrategy(report, planned, offsets, extraction, merged, arena)


def plan_without_rewrites(
    variant: PlanVariant, strategy: CompileStrategy, report: StrategyReport, seed: int,
    exc: Exception,
) -> PlannedStrategy:
    """``strategy``'s base plan of ``variant`` with none of the rewrites, where the
    rewritten module did not build: a rewrite must never cost a build, and the report says
    why it has none."""
    extraction = variant.planned
    problem = extraction.problem()
    solution = library.solve(problem, strategy.base, seed=seed)
    offsets, arena = solution.offsets, align(solution.height)
    report.rewritten_lower_bound_bytes = bound_of(extraction)
    report.rewrites = {
        **_no_rewrites(),
        "skipped": [
            {
                "rewrite": "all",
                "reason": (f"the rewritten module did not build: {type(exc).__name__}: {exc}")[
                    :500
                ],
            }
        ],
    }
    planned = apply_plan(variant.module, extraction, offsets, arena)
    return PlannedStrategy(report, planned, offsets, extraction, None, arena)


def choose_order(
    variant: PlanVariant, strategy: CompileStrategy, report: StrategyReport, seed: int
) -> PlanVariant:
    """The reordered ``variant`` if its plan is smaller than program order's, else program's.

    The search minimises live bytes, which bounds every plan from below; the plan a base
    strategy makes can still come out larger, so both orders are planned and compared.
    """
    program, choice = variant.program, variant.order
    report.program_order_lower_bound_bytes = bound_of(program.planned)
    report.chosen_order_lower_bound_bytes = bound_of(variant.planned)
    if choice is None:
        report.order = {"kept": "program order", "reason": variant.order_note}
        return program
    report.order = {
        "method": choice.method,
        "exact": choice.exact,
        "states": choice.states,
        "program_peak_bytes": choice.program_peak,
        "chosen_peak_bytes": choice.peak,
    }
    if choice.kept_program_order:
        report.order.update(kept="program order", reason=choice.note)
        return program
    arenas = {}
    for which, candidate in (("program", program), ("chosen", variant)):
        if strategy.variant is Variant.REWRITES:
            scratch = StrategyReport(model=report.model, strategy=report.strategy)
            height = plan_with_rewrites(candidate, strategy.base, scratch, seed)[1]
        else:
            height = library.solve(candidate.planned.problem(), strategy.base, seed=seed).height
        arenas[which] = align(height)
    report.order.update(
        program_order_arena_bytes=arenas["program"], chosen_order_arena_bytes=arenas["chosen"]
    )
    if arenas["chosen"] < arenas["program"]:
        report.order["kept"] = "chosen order"
        return variant
    report.order.update(
        kept="program order",
        reason=f"the {strategy.base} plan in the chosen order was not smaller "
        f"({arenas['chosen']:,} B against {arenas['program']:,} B)",
    )
    return program


def bound_of(extraction: Extraction) -> int:
    problem = extraction.problem()
    return align(lower_bound(problem)) if problem.buffers else 0


def plan_with_rewrites(variant: PlanVariant, base: str, report: StrategyReport, seed: int):
    """Offsets, height, seconds, dropped calls and module of ``base`` after the rewrites,
    and the merged problem (None where the rewrites were rejected).

    The report always says what became of the rewrites: those made, and each one found
    but not made with the reason (``skipped``), or why there was none to make."""
    extraction = variant.planned
    problem = extraction.problem()
    if variant.rewrites is None:
        variant.rewrites = find_rewrites(
            variant.module, variant.by_binding or extraction, planned=extraction
        )
    rewrites = variant.rewrites
    merged = rewrites.problem(extraction)
    report.rewritten_lower_bound_bytes = align(lower_bound(merged)) if merged.buffers else 0
    solution = library.solve(merged, base, seed=seed)
    plain = library.solve(problem, base, seed=seed)
    made = bool(rewrites.inplace or rewrites.concats or rewrites.dropped)
    skipped = list(rewrites.skipped)
    if not made and not skipped:
        skipped.append({"rewrite": "in-place and concat elision", "reason": _NONE_FOUND})
    # Merging lengthens lifetimes; where that costs more than it saves, keep the plain
    # plan (same base strategy) rather than report a rewrite that made things worse.
    if solution.height <= plain.height:
        validate_plan(merged, solution.offsets)
        report.rewrites = {
            "inplace": [list(r) for r in rewrites.inplace],
            "concat": [[k, out, ins] for k, out, ins in rewrites.concats],
            "dropped_calls": len(rewrites.dropped),
            "concat_copies_removed": rewrites.concat_copies_removed,
            "concat_bytes_saved": rewrites.concat_bytes_saved,
            "concat_copies_left": rewrites.concat_copies_left,
            "skipped": skipped,
        }
        module = rewrite_kernels(variant.module, extraction.function, rewrites)
        return (
            rewrites.expand(extraction, solution.offsets),
            solution.height,
            solution.seconds,
            rewrites.dropped,
            module,
            merged,
        )
    rejected = (
        f"the {base} plan with them was not smaller "
        f"({align(solution.height):,} B against {align(plain.height):,} B)"
    )
    report.rewrites = {
        **_no_rewrites(),
        "rejected": "merged plan was not smaller",
        "skipped": [
            *skipped,
            {
                "rewrite": f"{len(rewrites.inplace)} in-place writes and "
                f"{len(rewrites.concats)} concatenations",
                "reason": rejected,
            },
        ],
    }
    report.rewritten_lower_bound_bytes = bound_of(extraction)
    return plain.offsets, plain.height, plain.seconds, set(), variant.module, None


#: Why a +rewrites report lists nothing made and nothing skipped.
_NONE_FOUND = (
    "none applies: no kernel call makes a tensor over an input that dies at that call and "
    "is at least as large, and no concatenation's output is a planned intermediate"
)


def _no_rewrites() -> dict:
    return {
        "inplace": [],
        "concat": [],
        "dropped_calls": 0,
        "concat_copies_removed": 0,
        "concat_bytes_saved": 0,
        "skipped": [],
    }


def rewrites_applied(report: StrategyReport) -> bool:
    rewrites = report.rewrites
    return bool(rewrites.get("inplace") or rewrites.get("concat") or rewrites.get("dropped_calls"))
