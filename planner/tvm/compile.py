"""Compile one model under several planning strategies, check and measure each build.

This is the one entry point that the command line (``python -m planner compile``) and the
Celery workers share. It returns plain data, so callers decide where results go.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import tvm

from planner import strategies as library
from planner.order import OrderResult
from planner.plan import validate_plan
from planner.problem import Problem, lower_bound, write_csv
from planner.report import ATOL, RTOL, StrategyReport, slug
from planner.shapes import ShapeAxis
from planner.timeline import render_svg
from planner.tvm import execute, lowering, memory, repo_code, workspace
from planner.tvm.apply import apply_plan
from planner.tvm.extract import (
    ARENA_ALIGNMENT,
    Extraction,
    bindings_of,
    extract,
    temporary_kernel,
)
from planner.tvm.host import environment
from planner.tvm.kernel_temps import (
    KernelTemporaries,
    lift_kernel_temporaries,
    refine_lifetimes,
    symbol_bounds,
)
from planner.tvm.kernels import (
    KernelLibraries,
    library_of,
    load_executable,
    save_executable,
)
from planner.tvm.noalias import unalias_overlapping_calls
from planner.tvm.reorder import ReorderError, choose_binding_order
from planner.tvm.rewrites import (
    find_rewrites,
    inline_copy_blocks,
    inline_pool_padding,
    rewrite_kernels,
)
from planner.tvm.steps import failure_text, step
from planner.tvm.strategies import (
    STOCK,
    CompileStrategy,
    UnknownCompileStrategy,
    Variant,
    check_names,
    strategy_names,
)
from planner.tvm.zoo import ModelSource, build_network
from planner.tvm.zoo.network import Network

log = logging.getLogger(__name__)

__all__ = [
    "ATOL",
    "RTOL",
    "STOCK",
    "StrategyReport",
    "compile_model",
    "slug",
    "strategy_names",
]


#: TVM's kernels and PyTorch's differ in float rounding (reduction order, fused
#: multiply-adds), unlike two TVM builds of the same kernels; a wrong build is off by the
#: size of the activations.
REFERENCE_RTOL = 1e-3
REFERENCE_ATOL = 1e-4


def _align(value: int, alignment: int = ARENA_ALIGNMENT) -> int:
    return -(-value // alignment) * alignment


@dataclass
class _Build:
    report: StrategyReport
    module: tvm.IRModule
    offsets: dict[str, int]
    extraction: Extraction
    executable: object = None
    library: Path | None = None
    #: The problem a +rewrites plan really solved: each merged group one buffer.
    merged: Problem | None = None


def compile_model(
    source: ModelSource,
    strategies: Sequence[str],
    *,
    model_name: str | None = None,
    target: str = "llvm",
    repeat: int = 5,
    artifacts_dir: str | Path | None = None,
    seed: int = 0,
    memory_configs: Sequence[str] = memory.MEMORY_CONFIGS,
    lift_temporaries: bool | None = None,
    base_dir: str | Path | None = None,
    check_locally: bool = True,
    export_compiler=None,
    pipeline: str = "",
    planner_time_limit: float = repo_code.PLANNER_TIME_LIMIT,
    network: Network | None = None,
    repo_plans: dict[str, dict] | None = None,
    libraries: KernelLibraries | None = None,
    measurer: memory.MeasuringProcess | None = None,
) -> list[StrategyReport]:
    """Plan, build, check and time ``source`` under each of ``strategies``.

    Every planned build is run on the same inputs as TVM's stock build and compared; a build
    whose outputs differ is reported with ``outputs_match=False`` and an error, never as a
    plain number. One failing strategy does not stop the others.

    ``+rewrites`` strategies also plan the kernels' own temporaries (see
    :mod:`planner.tvm.kernel_temps`), fold elementwise chains in place and inline pooling
    padding; the others plan what TVM's planner plans and leave kernel temporaries to
    TVM's workspace pool, whose size ``kernel_workspace_bytes`` gives (measured when
    measured). ``lift_temporaries`` forces lifting on (True) or off (False) for all of our
    strategies. Lifting alone, without in-place chains, holds more than TVM's pool, which
    reuses buffers inside each kernel: measured +7.7% on ResNet-18 at 224x224.

    ``base_dir`` is the tracked repository's checkout: model files, ``pipeline``
    (``path.py:function`` returning Relax passes run on the imported module before it is
    lowered, for every strategy) and ``repo:`` planners are found there and nowhere else
    (:mod:`planner.tvm.repo_code`).

    For targets this host cannot run (a cross-compiled remote board), ``check_locally=False``
    skips running, checking and timing here; the board does that. ``export_compiler`` is
    passed to ``export_library`` as ``fcompile`` (a cross compiler).

    A worker's compile imports nothing of the repository: ``network`` is what the
    repository's process built (weights bound, pipeline run; :mod:`planner.tvm.imported`)
    and ``repo_plans`` what its planners returned, by strategy, which are checked like any
    plan before anything is built from them.
    """
    try:
        chosen = check_names(strategies)
    except UnknownCompileStrategy as exc:
        raise ValueError(str(exc)) from None
    root = Path(base_dir) if base_dir else None
    tgt = lowering.make_target(target)
    measuring = bool(memory_configs) and check_locally
    with contextlib.ExitStack() as stack:
        if measuring and measurer is None:
            measurer = stack.enter_context(memory.MeasuringProcess())
        if measuring:
            # Started now: forked from this process while it runs one thread, where the
            # shim is preloaded idle (memory.preload_idle_shim), else a fresh process whose
            # import of TVM overlaps the builds.
            measurer.start()
        return _compile(
            source, chosen, model_name=model_name, tgt=tgt, repeat=repeat,
            artifacts_dir=artifacts_dir, seed=seed, memory_configs=memory_configs,
            lift_temporaries=lift_temporaries, root=root, check_locally=check_locally,
            export_compiler=export_compiler, pipeline=pipeline,
            planner_time_limit=planner_time_limit, network=network, repo_plans=repo_plans,
            libraries=libraries if libraries is not None else KernelLibraries(),
            measurer=measurer if measuring else None,
        )


def _compile(
    source, chosen, *, model_name, tgt, repeat, artifacts_dir, seed, memory_configs,
    lift_temporaries, root, check_locally, export_compiler, pipeline, planner_time_limit,
    network, repo_plans, libraries, measurer,
) -> list[StrategyReport]:
    if network is None:
        network = imported_network(source, tgt, base_dir=root, pipeline=pipeline, seed=seed)
    started = time.perf_counter()
    name = model_name or network.name
    env = environment()
    bounds = dict(network.shape_bounds)
    with step("lower"):
        lowered = lowering.lower_to_allocations(_with_bounds(network), tgt)
    planning = FunctionPlanning(
        lowered, network.entry, bounds, chosen, tgt, lift_temporaries=lift_temporaries
    )
    problem = planning.variants[Variant.PLAIN].planned.problem(name=name)
    lowering_seconds = time.perf_counter() - started

    # One draw serves the check, the memory measurement and the boards that run it again; a
    # second draw is checked too, since one input can hide a plan that overwrites live data
    # (an all-zero region reads the same whoever wrote it).
    draws = check_draws(network, seed)
    inputs = draws[0]
    builds: dict[str, _Build] = {}
    stock = check_names([STOCK])[0]
    # A kept model.so is a Result's artifact: none for the reference build where tvm-stock
    # is not one of the strategies asked for.
    wanted = {s.name for s in chosen}
    with tempfile.TemporaryDirectory(prefix="peakwatch-build-") as scratch:
        measurements = None
        if measurer is not None:
            measurements = _Measurements(
                measurer, libraries, Path(scratch), inputs, network.entry, memory_configs,
                artifacts=Path(artifacts_dir) if artifacts_dir is not None else None,
                fcompile=export_compiler,
            )

        def plan_and_build(strategy) -> None:
            report = planning.report(
                strategy, problem, model=name, environment=env, model_source=source.source,
                assumptions=list(network.assumptions),
            )
            t0 = time.perf_counter()
            build = planning.build(
                strategy, report, seed, base_dir=root, planner_time_limit=planner_time_limit,
                repo_plans=repo_plans, libraries=libraries,
            )
            builds[strategy.name] = build
            report.compile_seconds = round(lowering_seconds + time.perf_counter() - t0, 4)
            if measurements is not None:
                # Measured while the next strategies build, in the measuring process.
                measurements.start(build, keep=strategy.name in wanted)

        order = list({s.name: s for s in (stock, *chosen)}.values())
        # The rewritten kernels are a second kernel library: planned and built in a thread
        # beside the others (TVM's builds release the GIL), so that a compile that asks for
        # both pays for the longer of the two, not their sum, where a second core is free.
        apart = [s for s in order if s.variant is Variant.REWRITES]
        here = [s for s in order if s.variant is not Variant.REWRITES]
        if not here:
            here, apart = apart, []
        exported = (measurements is not None or artifacts_dir is not None) and (
            export_compiler is None
        )
        libraries.emit_to = Path(scratch) if exported else None
        libraries.load_kernels = exported and measurements is not None and artifacts_dir is None
        beside = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rewrites")
        try:
            rewritten = beside.submit(lambda: [plan_and_build(s) for s in apart])
            for strategy in here:
                plan_and_build(strategy)

            def built_beside() -> dict[str, _Build]:
                rewritten.result()
                return {s.name: builds[s.name] for s in apart}

            if check_locally:
                # The builds made here are checked while the rewritten ones still build.
                _check_and_time(
                    network, {s.name: builds[s.name] for s in here}, tgt, repeat, *draws,
                    loader=measurements.loader if measurements is not None else None,
                    settle=measurements.wait if measurements is not None else None,
                    later=built_beside if apart else None,
                )
            rewritten.result()
        finally:
            beside.shutdown(wait=True)
            libraries.emit_to, libraries.load_kernels = None, False
            # Whatever happened, nothing may still read the scratch folder once it goes.
            builds = {s.name: builds[s.name] for s in order if s.name in builds}
            if measurements is not None:
                measurements.record(builds)
        if artifacts_dir is not None:
            out = Path(artifacts_dir)
            if measurements is None:
                copies: dict[int, Path] = {}
                for strategy_name, build in builds.items():
                    if strategy_name in wanted:
                        _export_library(
                            out, build, copies, fcompile=export_compiler,
                            libraries=libraries, scratch=Path(scratch),
                        )
            # After measuring, so that the plan file carries the measured kernel workspace.
            for build in builds.values():
                _write_plan_files(out, build)
    _describe_inputs(network, builds.values(), artifacts_dir, name, inputs)
    return [builds[s.name].report for s in chosen]


def check_draws(network: Network, seed: int) -> list[list[np.ndarray]]:
    """The inputs every build of ``network`` is checked on, the first also measured and
    timed. The import phase of a worker's compile runs the framework on exactly these
    (:mod:`planner.tvm.job`), so they are made here and nowhere else."""
    return [network.random_inputs(seed), network.random_inputs(seed + 1)]


def imported_network(
    source: ModelSource,
    target,
    *,
    base_dir: Path | None,
    pipeline: str = "",
    seed: int = 0,
    axis: ShapeAxis | None = None,
) -> Network:
    """``source`` as every strategy compiles it: weights bound and folded, so that work on
    weights alone is not planned as an activation, then the repository's ``pipeline``.
    ``axis``: see :func:`~planner.tvm.zoo.build_network`. StepFailed names the step that
    failed after the source built (a source's own failure is ModelSourceError)."""
    network = build_network(source, base_dir=base_dir, axis=axis)
    with step("fold"):
        network = network.bind_weights(seed)
    if pipeline:
        with step("pipeline"):
            module = repo_code.run_pipeline(network.mod, pipeline, base_dir, target)
        network = replace(network, mod=module, framework=after_pipeline(network.framework))
    return network


def after_pipeline(framework):
    """``framework`` as the reference of a network a repository's pipeline transformed."""
    return replace(framework, after_pipeline=True) if framework is not None else None


def _with_bounds(network: Network) -> tvm.IRModule:
    """The network's module with its shape bounds where TVM's own planner reads them."""
    module, bounds = network.mod, dict(network.shape_bounds)
    if bounds:
        module = tvm.IRModule(module.functions, attrs=module.attrs)
        entry = next(gv for gv in module.functions if gv.name_hint == network.entry)
        module[entry] = module[entry].with_attr("tir_var_upper_bound", bounds)
    return module


def planning_problem(
    network: Network, target, *, lift_temporaries: bool | None = None
) -> Problem:
    """The problem a repository's planner is given for ``network``: the same one
    :func:`compile_model` checks its offsets against."""
    tgt = lowering.make_target(target) if isinstance(target, str) else target
    bounds = dict(network.shape_bounds)
    lowered = lowering.lower_to_allocations(_with_bounds(network), tgt)
    return _prepare(lowered, network.entry, bounds, bool(lift_temporaries)).planned.problem()


def _describe_inputs(network, builds, artifacts_dir, name: str, inputs) -> None:
    sizes = [int(value.nbytes) for value in inputs]
    path = ""
    if artifacts_dir is not None:
        folder = Path(artifacts_dir) / slug(name)
        folder.mkdir(parents=True, exist_ok=True)
        path = str(folder / "inputs.npz")
        np.savez(path, *inputs)
    for build in builds:
        report = build.report
        report.entry = network.entry
        report.inputs_file = path
        # The first input is the data (see planner.tvm.zoo.network.Network); the rest are
        # weights, which a deployment keeps in flash or uploads once.
        report.input_bytes = sum(sizes[: network.data_inputs])
        report.weights_bytes = network.bound_weights_bytes + sum(sizes[network.data_inputs :])


@dataclass
class _Variant:
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
    program: _Variant | None = None
    order: OrderResult | None = None
    order_note: str = ""
    #: What :func:`find_rewrites` found in this module: the same for every base strategy.
    rewrites: object = None


class FunctionPlanning:
    """One function of a lowered module as the chosen strategies plan it: the variants they
    plan (with or without lifted kernel temporaries, in program or chosen order), and each
    strategy's plan written back and built (:meth:`build`).

    :func:`compile_model` plans its network's one entry function with it; an LLM deployment
    plans each of its functions (:mod:`planner.tvm.llm`).
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
            Variant.STOCK: _Variant(lowered, self.plain, self.plain),
            Variant.PLAIN: _prepare(lowered, entry, bounds, bool(lift_temporaries)),
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
            variants[Variant.REWRITES] = _prepare(inlined, entry, bounds, lift)
        self.variants = variants
        self.reordered = {
            kind: _in_chosen_order(variants[kind], entry, bounds)
            for kind in {s.variant for s in chosen if s.reorder}
        }

    def variant(self, strategy: CompileStrategy) -> _Variant:
        return (self.reordered if strategy.reorder else self.variants)[strategy.variant]

    def report(self, strategy: CompileStrategy, problem: Problem, **fields) -> StrategyReport:
        """A report of ``strategy`` on this function with what planning alone knows."""
        return StrategyReport(
            strategy=strategy.name,
            lower_bound_bytes=_align(lower_bound(problem)) if problem.buffers else 0,
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

    def build(self, strategy: CompileStrategy, report: StrategyReport, seed: int,
              **options) -> _Build:
        """``strategy``'s plan written into the module and built; a strategy that fails
        has its error on ``report`` and no executable, so that it hides no other."""
        variant = self.variant(strategy)
        try:
            return _plan_and_build(variant, strategy, report, self.target, seed, **options)
        except Exception as exc:
            log.exception("strategy %s failed on %s", strategy.name, report.model)
            report.error = failure_text(exc, "build")
            return _Build(report, self.lowered, {}, variant.planned)


def _prepare(lowered: tvm.IRModule, entry: str, bounds: dict, lift: bool) -> _Variant:
    if not lift:
        extraction = extract(lowered, entry, bounds)
        return _Variant(lowered, extraction, extraction)
    module, temporaries = lift_kernel_temporaries(lowered, entry, bounds=bounds)
    by_binding = extract(module, entry, bounds)
    return _Variant(
        module,
        refine_lifetimes(by_binding, temporaries),
        by_binding,
        lifted=True,
        temporaries=temporaries,
    )


def _in_chosen_order(variant: _Variant, entry: str, bounds: dict) -> _Variant:
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
    return _Variant(
        module,
        planned,
        by_binding,
        variant.lifted,
        variant.temporaries,
        program=variant,
        order=choice,
    )


def _choose_order(
    variant: _Variant, strategy: CompileStrategy, report: StrategyReport, seed: int
) -> _Variant:
    """The reordered ``variant`` if its plan is smaller than program order's, else program's.

    The search minimises live bytes, which bounds every plan from below; the plan a base
    strategy makes can still come out larger, so both orders are planned and compared.
    """
    program, choice = variant.program, variant.order
    report.program_order_lower_bound_bytes = _bound_of(program.planned)
    report.chosen_order_lower_bound_bytes = _bound_of(variant.planned)
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
            height = _plan_with_rewrites(candidate, strategy.base, scratch, seed)[1]
        else:
            height = library.solve(candidate.planned.problem(), strategy.base, seed=seed).height
        arenas[which] = _align(height)
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


def _bound_of(extraction: Extraction) -> int:
    problem = extraction.problem()
    return _align(lower_bound(problem)) if problem.buffers else 0


def _plan_and_build(
    variant: _Variant,
    strategy: CompileStrategy,
    report: StrategyReport,
    target: tvm.target.Target,
    seed: int,
    *,
    base_dir: Path | None = None,
    planner_time_limit: float = repo_code.PLANNER_TIME_LIMIT,
    repo_plans: dict[str, dict] | None = None,
    libraries: KernelLibraries | None = None,
) -> _Build:
    """Plan ``variant`` with ``strategy``, write the plan into the module and build it."""
    if variant.program is not None:
        variant = _choose_order(variant, strategy, report, seed)
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
            offsets, height, seconds, drop, lowered, merged = _plan_with_rewrites(
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
        arena = _align(height)
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
    try:
        final = lowering.finish_lowering(planned, target, stock_planner=False)
        executable = execute.build(final, target, libraries)
    except Exception as exc:
        if strategy.variant is not Variant.REWRITES or not _rewrites_applied(report):
            raise
        # A rewrite must never cost a build: plan and build again without any of them,
        # and say why on the report.
        log.warning("rewritten %s did not build, building without rewrites: %s", report.model, exc)
        solution = library.solve(problem, strategy.base, seed=seed)
        offsets, arena = solution.offsets, _align(solution.height)
        merged = None
        report.rewritten_lower_bound_bytes = _bound_of(extraction)
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
        final = lowering.finish_lowering(planned, target, stock_planner=False)
        executable = execute.build(final, target, libraries)
    report.intermediate_bytes = arena
    counted = _counted_workspace(planned, extraction.function, executable, report.shape_bounds)
    if counted is not None:
        report.kernel_workspace_bytes, report.kernel_workspace_source = counted, "counted"
    # Intermediates, kernel workspace and outputs, so that builds that leave kernel
    # temporaries to TVM's pool compare with builds that plan them. The pool's size is
    # counted from the built kernels, else the static estimate; measured or not, the same
    # (see _measure_memory).
    report.planned_bytes = arena + report.kernel_workspace_bytes + (report.output_bytes or 0)
    report.peak = peak_breakdown(extraction, offsets)
    build = _Build(report, planned, offsets, extraction, merged=merged)
    build.executable = executable
    return build


def _counted_workspace(
    planned: tvm.IRModule, entry: str, executable, bounds: dict[str, int]
) -> int | None:
    """What TVM's CPU workspace pool holds for ``executable``'s kernels, replayed in the
    order ``planned``'s ``entry`` calls them (:mod:`planner.tvm.workspace`), each call's
    symbolic sizes at the function's upper ``bounds`` (read before the VM's lowering, where
    the calls still carry their arguments' shapes); None where its kernels' requests were
    not read (another target, a kernel that cannot be counted)."""
    from planner.tvm.kernels import library_of

    library = library_of(executable)
    requests = getattr(library, "workspace", None)
    func = next((f for gv, f in planned.functions.items() if gv.name_hint == entry), None)
    if requests is None or not isinstance(func, tvm.relax.Function):
        return None
    calls = [
        (b.value.op.name_hint, symbol_bounds(planned[b.value.op], b.value.args, bounds))
        for b in bindings_of(func)
        if isinstance(b.value, tvm.relax.Call) and isinstance(b.value.op, tvm.relax.GlobalVar)
        and isinstance(planned[b.value.op], tvm.tirx.PrimFunc)
    ]
    return workspace.pool_bytes(requests, calls)


def _plan_with_rewrites(variant: _Variant, base: str, report: StrategyReport, seed: int):
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
    report.rewritten_lower_bound_bytes = _align(lower_bound(merged)) if merged.buffers else 0
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
        f"({_align(solution.height):,} B against {_align(plain.height):,} B)"
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
    report.rewritten_lower_bound_bytes = _bound_of(extraction)
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


def _rewrites_applied(report: StrategyReport) -> bool:
    rewrites = report.rewrites
    return bool(rewrites.get("inplace") or rewrites.get("concat") or rewrites.get("dropped_calls"))


def peak_breakdown(extraction: Extraction, offsets: dict[str, int], top: int = 20) -> dict:
    """The instant where the plan, as applied, holds the most bytes, and who holds them.

    Tensors a rewrite merged (an in-place chain, a concatenation's inputs in their slices)
    share their bytes: at an instant they count once, as the union of the address ranges
    of the live tensors, and are listed as one entry with every producer. Without offsets
    (a stock plan that could not be read) each tensor counts on its own. The tensors of that
    instant (and the operators producing them) are what a user has to change to need less.
    """
    placed = bool(offsets) and all(t.name in offsets for t in extraction.tensors)
    events = sorted(
        [(t.lower, 1, i) for i, t in enumerate(extraction.tensors)]
        + [(t.upper, 0, i) for i, t in enumerate(extraction.tensors)]
    )
    live: set[int] = set()
    best, best_time = -1, None
    for index, (when, starting, which) in enumerate(events):
        (live.add if starting else live.discard)(which)
        # Measured once every event of an instant is in: ends before starts at one time.
        if index + 1 < len(events) and events[index + 1][0] == when:
            continue
        held = sum(size for size, _ in _regions(extraction, live, offsets, placed))
        if live and held > best:
            best, best_time = held, when
    if best_time is None:
        return {"time": None, "bytes": 0, "tensors": []}
    at_peak = {i for i, t in enumerate(extraction.tensors) if t.lower <= best_time < t.upper}
    regions = sorted(
        _regions(extraction, at_peak, offsets, placed), key=lambda region: -region[0]
    )
    entries = []
    for size, members in regions[:top]:
        first = members[0]
        producers = list(dict.fromkeys(filter(None, map(_producer_of, members))))
        entry = {
            "id": first.name, "size": size, "producer": " → ".join(producers),
            "offset": offsets.get(first.name),
        }
        if len(members) > 1:
            entry["merged"] = [t.name for t in members]
        entries.append(entry)
    return {
        "time": best_time,
        "bytes": best,
        "tensors": entries,
        "more": max(0, len(regions) - top),
    }


def _producer_of(tensor) -> str:
    """The operator writing ``tensor``; a lifted kernel temporary (``kernel.buffer``) is
    written by its kernel."""
    if tensor.producer:
        return tensor.producer
    kernel, dot, _ = tensor.name.partition(".")
    return f"{kernel} (temporary)" if dot else ""


def _regions(extraction: Extraction, indices, offsets: dict[str, int], placed: bool):
    """(bytes, tensors) per stretch of the arena that the tensors ``indices`` occupy:
    tensors whose address ranges overlap share one stretch."""
    tensors = [extraction.tensors[i] for i in sorted(indices)]
    if not placed:
        return [(t.size, [t]) for t in tensors]
    regions: list[tuple[int, list]] = []
    end = -1
    for tensor in sorted(tensors, key=lambda t: (offsets[t.name], -t.size)):
        start = offsets[tensor.name]
        if regions and start < end:
            size, members = regions[-1]
            grown = max(end, start + tensor.size)
            regions[-1] = (size + grown - end, [*members, tensor])
            end = grown
        else:
            regions.append((tensor.size, [tensor]))
            end = start + tensor.size
    return regions


def stock_arena(planned: tvm.IRModule, extraction: Extraction) -> int:
    """The bytes of every storage TVM's planner allocates in the function, aligned."""
    alloc_storage = tvm.ir.Op.get("relax.memory.alloc_storage")
    return sum(
        _align(int(b.value.args[0].values[0]))
        for b in bindings_of(planned[extraction.function])
        if isinstance(b.value, tvm.relax.Call) and b.value.op == alloc_storage
    )


def stock_offsets(planned: tvm.IRModule, extraction: Extraction) -> tuple[dict[str, int], int]:
    """Express TVM's storage sharing as offsets: its storages laid end to end.

    TVM's planner hands every tensor a whole storage at offset 0; putting those storages
    one after another gives a plan in the same terms as ours, so the two can be drawn,
    diffed and validated alike.
    """
    alloc_storage = tvm.ir.Op.get("relax.memory.alloc_storage")
    alloc_tensor = tvm.ir.Op.get("relax.memory.alloc_tensor")
    bases: dict[object, int] = {}
    total = 0
    placed: dict[str, int] = {}
    for binding in bindings_of(planned[extraction.function]):
        value = binding.value
        if not isinstance(value, tvm.relax.Call):
            continue
        if value.op == alloc_storage:
            size = int(value.args[0].values[0])
            bases[binding.var] = total
            total += _align(size)
        elif value.op == alloc_tensor and value.args[0] in bases:
            offset = int(value.args[1].value)
            placed.setdefault(binding.var.name, bases[value.args[0]] + offset)
    offsets = {}
    for tensor in extraction.tensors:
        plain = tensor.name.split("@", 1)[0]
        if plain not in placed:
            raise ValueError(f"TVM's planner left {tensor.name} unplanned")
        offsets[tensor.name] = placed[plain]
    return offsets, total


def _judge_reference(network, builds: dict[str, _Build], draws):
    """What is wrong with TVM's stock build's outputs on ``draws`` (see
    :func:`execute.check_and_time`): a value that is not finite, or a difference from the
    framework the model was exported from beyond the tolerance. Every report records what
    the reference was checked against and by how much."""
    framework = network.framework

    def record(check: str, diff: float | None = None) -> None:
        for build in builds.values():
            build.report.reference_check = check
            build.report.reference_max_abs_diff = diff

    def judge(outputs) -> str:
        bad = next(filter(None, map(execute.non_finite, outputs)), "")
        if bad:
            record(f"refused: TVM's build returns {bad}")
            return f"TVM's build of this model returns {bad}"
        if framework is None:
            record("not checked: the model was not exported from a framework here")
            return ""
        if framework.run is None:
            record(f"not checked: {framework.missing}")
            return ""
        try:
            expected = [framework.run(list(draw)) for draw in draws]
        except Exception as exc:  # the framework failing is no verdict on TVM's build
            log.warning("%s did not run %s: %s", framework.name, network.name, exc)
            record(f"not checked: {framework.name} failed: {type(exc).__name__}: {exc}"[:500])
            return ""
        unlike = next(filter(None, map(_unlike, expected, outputs)), "")
        if unlike:
            # Outputs handed over by a sandboxed process are the likeliest source, but a
            # framework run here is refused alike: no difference says what to compare.
            record(f"refused: {framework.name} returns {unlike}")
            return (
                f"{framework.name}'s outputs are not shaped as TVM's build's: {unlike}, so "
                "there is nothing to check against"
            )
        bad = next(filter(None, map(execute.non_finite, expected)), "")
        if bad:
            record(f"refused: {framework.name} returns {bad}")
            return f"{framework.name}'s own outputs hold {bad}: there is nothing to check against"
        compared = [
            execute.compare_outputs(want, got, rtol=REFERENCE_RTOL, atol=REFERENCE_ATOL)
            for want, got in zip(expected, outputs, strict=True)
        ]
        worst = max(diff for _, diff in compared)
        if framework.after_pipeline and np.isfinite(worst):
            # The repository's pipeline may change the numbers on purpose: said, not refused.
            record(f"{framework.name}, after the repository's pipeline", worst)
            return ""
        record(framework.name, worst if np.isfinite(worst) else None)
        if all(match for match, _ in compared):
            return ""
        return (
            f"TVM's build of this model differs from {framework.name} by "
            f"{execute.describe_diff(worst)} (rtol {REFERENCE_RTOL}, atol {REFERENCE_ATOL})"
        )

    return judge


def _unlike(expected: list[np.ndarray], outputs: list[np.ndarray]) -> str:
    """How the framework's outputs of one draw differ in count, shape or dtype from TVM's
    build's ("" where they agree)."""
    if len(expected) != len(outputs):
        return f"{len(expected)} outputs where TVM's build returns {len(outputs)}"
    for index, (want, got) in enumerate(zip(expected, outputs, strict=True)):
        if want.shape != got.shape or want.dtype != got.dtype:
            return (
                f"output {index} as {want.dtype}{list(want.shape)} where TVM's build returns "
                f"{got.dtype}{list(got.shape)}"
            )
    return ""


def _check_and_time(
    network, builds: dict[str, _Build], target, repeat: int, inputs, *more_inputs,
    loader=None, settle=None, later=None,
) -> None:
    """Run, check and time each distinct build once: strategies whose plans came out the
    same share one executable (:class:`planner.tvm.kernels.KernelLibraries`), and so its
    check and its latency samples. ``loader(build, dev)`` makes a build's VM (default: from
    its executable, JIT-compiling its kernels once per library); ``settle()`` runs before
    the timing, which needs the machine to itself. ``later()`` gives the builds still being
    made: ``builds`` are checked meanwhile, those next, and all are timed together."""
    load = loader or (lambda build, dev: execute.load(build.executable, dev))
    dev = execute.device_for(target)
    first: dict[int, str] = {}
    every = dict(builds)

    def loaders(group: dict[str, _Build]) -> dict:
        every.update(group)
        made = {}
        runnable = {s: b for s, b in group.items() if b.report.ok}
        for strategy, build in sorted(runnable.items(), key=lambda item: item[0] != STOCK):
            if id(build.executable) not in first:
                first[id(build.executable)] = strategy
                made[strategy] = lambda b=build: load(b, dev)
        return made

    checks = execute.check_and_time(
        loaders(builds),
        dev,
        inputs,
        reference=STOCK,
        entry=network.entry,
        repeat=repeat,
        rtol=RTOL,
        atol=ATOL,
        more_inputs=more_inputs,
        judge_reference=_judge_reference(network, every, [inputs, *more_inputs]),
        before_timing=settle,
        later=(lambda: loaders(later())) if later is not None else None,
    )
    if later is not None:
        every.update(later())
    reference = every.get(STOCK)
    for build in every.values():
        if reference is not None:
            # Judged before the builds that came later were there.
            build.report.reference_check = reference.report.reference_check
            build.report.reference_max_abs_diff = reference.report.reference_max_abs_diff
        if build.report.ok:
            check = checks[first[id(build.executable)]]
            for key, value in check.report_fields().items():
                setattr(build.report, key, value)


class _Measurements:
    """The memory measurement of one compile's builds, in the job's measuring process.

    Each distinct build asked for is written out as soon as it is built, in a thread of its
    own, and handed to the measuring process, which measures it under every allocator: both
    go on while the next strategies build. Where artifacts are kept, what is written is the
    build's ``model.so`` (the artifact itself, exported once per distinct build); otherwise
    its executable alone, beside its kernel library exported once, whichever builds use it.
    The same files give the check its VMs, so the kernels are loaded, never JIT-compiled,
    in this process too (a JIT compile beside that thread's exports would use one LLVM
    module from two threads at once). The timing waits until all of it is done. The
    reference build of a compile that did not ask for tvm-stock is written out for the
    check alone, not kept or measured.
    """

    def __init__(self, measurer, libraries: KernelLibraries, folder: Path, inputs, entry,
                 configs: Sequence[str], *, artifacts: Path | None = None, fcompile=None):
        self.measurer, self.libraries, self.entry = measurer, libraries, entry
        #: Where each build's ``model.so`` goes (kept artifacts only), and the file of each
        #: executable exported so far, which strategies sharing it copy.
        self.artifacts, self.fcompile = artifacts, fcompile
        self.copies: dict[int, Path] = {}
        self.configs = tuple(configs)
        self.folder = folder / "measured"
        self.folder.mkdir(exist_ok=True)
        self.arrays = self.folder / "inputs.npz"
        np.savez(self.arrays, *inputs)
        # Saving and exporting write files and run the C compiler, both outside the GIL.
        self._saver = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="save")
        #: By executable: (file, kernel library or None) once written, None where writing
        #: failed, and the pending figures by allocator.
        self.saved: dict[int, Future] = {}
        self.pending: dict[int, dict[str, Future]] = {}
        self._starting = threading.Lock()

    def start(self, build: _Build, *, keep: bool = True) -> None:
        """Write ``build`` out and measure it; ``keep``: a strategy asked for (else the
        reference alone, written out for the check only, neither kept nor measured)."""
        same = id(build.executable)
        if not build.report.ok or build.executable is None:
            return
        with self._starting:  # strategies build in two threads (see _compile)
            if same in self.saved:
                if keep and self.artifacts is not None:
                    # The same build under another strategy: a copy of its model.so.
                    self._saver.submit(_export_library, self.artifacts, build, self.copies)
                return
            path = self.folder / f"executable-{len(self.saved)}.vm"
            self.saved[same] = self._saver.submit(self._save, build, path, same, keep)

    def _save(self, build: _Build, path: Path, same: int, keep: bool):
        library = None
        kernels = None
        if keep and self.artifacts is not None:
            _export_library(
                self.artifacts, build, self.copies, fcompile=self.fcompile,
                libraries=self.libraries, scratch=self.folder,
            )
            if build.library is None:
                return None
            path = build.library
        else:
            try:
                library = library_of(build.executable)
                kernels = self.libraries.files(library, self.folder) if library else None
                save_executable(build.executable, path)
            except Exception as exc:  # a missing C compiler must not lose the other figures
                log.warning("could not save %s for measuring: %s", build.report.strategy, exc)
                return None
        if keep:
            self.pending[same] = {
                config: self.measurer.submit(
                    path, self.arrays, kernels=kernels, entry=self.entry, memory_cfg=config
                )
                for config in self.configs
            }
        return path, library

    def loader(self, build: _Build, dev):
        if getattr(build.executable, "kernels_loaded", False):
            # Linked to its library's loaded shared object: nothing to wait for or load.
            return execute.load(build.executable, dev)
        saving = self.saved.get(id(build.executable))
        saved = saving.result() if saving is not None else None
        if saved is None:
            # JIT-compiling a kernel library while the saving thread exports it would
            # use one LLVM module from two threads: that thread finishes first.
            self._saver.shutdown(wait=True)
            return execute.load(build.executable, dev)
        path, library = saved
        if path.suffix == ".so":  # a whole model.so
            return execute.load(tvm.runtime.load_module(str(path)), dev)
        kernels = self.libraries.loaded(library) if library is not None else None
        return execute.load(load_executable(path, kernels), dev)

    def wait(self) -> None:
        self._saver.shutdown(wait=True)
        for futures in self.pending.values():
            concurrent.futures.wait(futures.values())

    def record(self, builds: dict[str, _Build]) -> None:
        """Each build's figures, where its check passed; the figures derived from them."""
        self.wait()
        for build in builds.values():
            futures = self.pending.get(id(build.executable))
            if not build.report.ok or futures is None:
                continue
            for config, future in futures.items():
                try:
                    figures = copy.deepcopy(future.result())
                except (memory.MeasurementError, OSError) as exc:
                    figures = {"error": str(exc)}
                build.report.measured[config] = figures
        for build in builds.values():
            measured = build.report.measured
            pooled, naive = measured.get("pooled", {}), measured.get("naive", {})
            if "inference_peak_bytes" in pooled:
                build.report.measured_peak_bytes = pooled["inference_peak_bytes"]
            if "retained_bytes" in naive:
                # The naive allocator returns every storage; what it still holds after the
                # call is the outputs plus the kernel workspace pool, which is never
                # returned.
                workspace = max(0, naive["retained_bytes"] - (build.report.output_bytes or 0))
                # Beside planned bytes, never in them: planned bytes are a figure of the
                # build, the same measured or not (--no-memory) and on any machine, which an
                # alert at a threshold of 0 needs. Counted from the built kernels it is the
                # same figure; an estimate differs both ways.
                measured["workspace_bytes"] = workspace
                measured["weights_bytes"] = naive.get("weights_bytes")
            _say_what_the_plan_missed(build.report)


def _say_what_the_plan_missed(report: StrategyReport) -> None:
    """A warning where the runtime held more than the plan accounts for (the naive
    allocator's peak, each allocation at its own size, above planned bytes), naming the part
    the plan did not see."""
    held = report.measured.get("naive", {}).get("inference_peak_bytes")
    if not isinstance(held, int) or report.planned_bytes is None or held <= report.planned_bytes:
        return
    pool = report.measured.get("workspace_bytes")
    if isinstance(pool, int) and pool > report.kernel_workspace_bytes:
        why = (
            f"TVM's workspace pool held {pool:,} B against {report.kernel_workspace_bytes:,} B "
            f"{'estimated' if report.kernel_workspace_source == 'estimate' else 'counted'}"
        )
        if report.kernel_workspace_source == "estimate":
            why += " (a kernel's requests could not be counted from the build)"
    else:
        why = "an allocation outside the plan and TVM's workspace pool"
    report.warnings.append(
        f"the runtime held {held:,} B (naive allocator), {held - report.planned_bytes:,} B "
        f"more than planned: {why}"
    )


def _folder(root: Path, report: StrategyReport) -> Path:
    folder = root / slug(report.model) / slug(report.strategy)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _export_library(
    root: Path, build: _Build, copies: dict[int, Path], *, fcompile=None,
    libraries: KernelLibraries | None = None, scratch: Path | None = None,
) -> None:
    """The build as one ``model.so``, a kept artifact that boards and users load whole;
    strategies that share a build share its file's content (``copies``, by executable).
    With ``libraries`` (and no cross compiler), builds that share kernels share their
    machine code, generated once into ``scratch``."""
    report = build.report
    if build.executable is None:
        return
    library = _folder(root, report) / "model.so"
    try:
        earlier = copies.get(id(build.executable))
        if earlier is not None:
            shutil.copyfile(earlier, library)
        else:
            if fcompile is None and libraries is not None and scratch is not None:
                libraries.export_model(build.executable, library, scratch)
            else:
                options = {} if fcompile is None else {"fcompile": fcompile}
                execute.export_library(build.executable, str(library), **options)
            copies[id(build.executable)] = library
        build.library = library
        report.artifacts["model.so"] = str(library)
    except Exception as exc:  # a missing C compiler must not lose the other figures
        log.warning("export_library failed for %s: %s", report.strategy, exc)


def _role_of(tensor) -> str:
    """``temporary`` for a kernel's temporary lifted into the plan (named ``kernel.buffer``),
    else ``intermediate``; outputs are listed apart."""
    return "temporary" if temporary_kernel(tensor.name) else "intermediate"


def _write_plan_files(root: Path, build: _Build) -> None:
    report = build.report
    extraction = build.extraction
    folder = _folder(root, report)
    plan = {
        "model": report.model,
        "strategy": report.strategy,
        "function": extraction.function,
        "arena_bytes": report.intermediate_bytes,
        "lower_bound_bytes": report.lower_bound_bytes,
        "kernel_workspace_bytes": report.kernel_workspace_bytes,
        "kernel_workspace_source": report.kernel_workspace_source,
        "measured_kernel_workspace_bytes": report.measured.get("workspace_bytes"),
        "peak": report.peak,
        # Names like alloc3 are renumbered whenever the graph changes: a plan diff pairs
        # tensors by role, producer and place in the graph instead (planner.plan_diff).
        "tensors": [
            {
                "id": t.name,
                "role": _role_of(t),
                "binding_index": t.binding_index,
                "shape": list(t.shape),
                "dtype": t.dtype,
                "size": t.size,
                "lower": t.lower,
                "upper": t.upper,
                "offset": build.offsets.get(t.name),
                "producer": t.producer or temporary_kernel(t.name),
            }
            for t in extraction.tensors
        ],
        "outputs": [
            {
                "id": t.name, "role": "output", "binding_index": t.binding_index,
                "shape": list(t.shape), "dtype": t.dtype, "size": t.size,
                "producer": t.producer,
            }
            for t in extraction.escaping
        ],
    }
    paths = {
        "plan.json": json.dumps(plan, indent=2),
        "module.py": build.module.script(),
    }
    if build.offsets:
        paths["timeline.svg"] = render_svg(
            extraction.problem(),
            build.offsets,
            title=f"{report.model} / {report.strategy}: {report.intermediate_bytes:,} B",
            peak_time=report.peak.get("time"),
            labels={t.name: t.producer for t in extraction.tensors},
        )
    for filename, text in paths.items():
        (folder / filename).write_text(text)
        report.artifacts[filename] = str(folder / filename)
    # The problem only: the offsets are plan.json's. Written here, they read back as fixed
    # offsets and every strategy `planner solve` tries keeps them and reaches this plan's
    # height; a +rewrites plan is not even a plan of this problem (merged tensors share
    # addresses while both live).
    problem_path = folder / "problem.csv"
    write_csv(problem_path, extraction.problem())
    report.artifacts["problem.csv"] = str(problem_path)
    if build.merged is not None:
        # The problem the strategy really solved: `planner solve` takes it to try other
        # strategies on it.
        merged_path = folder / "problem-merged.csv"
        write_csv(merged_path, build.merged)
        report.artifacts["problem-merged.csv"] = str(merged_path)
