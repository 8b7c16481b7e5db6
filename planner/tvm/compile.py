"""Compile one model under several planning strategies, check and measure each build.

This is the one entry point that the command line (``python -m planner compile``) and the
Celery workers share. It returns plain data, so callers decide where results go. It calls the
stages in order: the model comes in (:mod:`planner.tvm.sources`), is lowered and planned
under each strategy (:mod:`planner.tvm.plan`), each plan is built and checked
(:mod:`planner.tvm.build`), and measured (:mod:`planner.tvm.measure`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import tvm

from planner.problem import Problem
from planner.report import ATOL, RTOL, StrategyReport, slug
from planner.shapes import ShapeAxis
from planner.tvm import repo_code
from planner.tvm.build.check import check_and_time_builds
from planner.tvm.build.export import export_model_library
from planner.tvm.build.kernels import KernelLibraries
from planner.tvm.build.planned import Build, build_planned
from planner.tvm.build.target import make_target
from planner.tvm.host import environment
from planner.tvm.measure import memory
from planner.tvm.measure.builds import BuildMeasurements
from planner.tvm.network import Network
from planner.tvm.plan import lowering
from planner.tvm.plan.files import write_plan_files
from planner.tvm.plan.strategy import (
    choose_order,
    plan_strategy,
    plan_without_rewrites,
    rewrites_applied,
)
from planner.tvm.plan.variants import FunctionPlanning, PlanVariant, prepare_variant
from planner.tvm.sources import ModelSource, build_network
from planner.tvm.steps import failure_text, step
from planner.tvm.strategies import (
    STOCK,
    CompileStrategy,
    UnknownCompileStrategy,
    Variant,
    check_names,
    strategy_names,
)

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
    :mod:`planner.tvm.plan.kernel_temps`), fold elementwise chains in place and inline pooling
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
    repository's process built (weights bound, pipeline run; :mod:`planner.tvm.sources.handover`)
    and ``repo_plans`` what its planners returned, by strategy, which are checked like any
    plan before anything is built from them.
    """
    try:
        chosen = check_names(strategies)
    except UnknownCompileStrategy as exc:
        raise ValueError(str(exc)) from None
    root = Path(base_dir) if base_dir else None
    tgt = make_target(target)
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
        lowered = lowering.lower_to_allocations(with_bounds(network), tgt)
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
    builds: dict[str, Build] = {}
    stock = check_names([STOCK])[0]
    # A kept model.so is a Result's artifact: none for the reference build where tvm-stock
    # is not one of the strategies asked for.
    wanted = {s.name for s in chosen}
    with tempfile.TemporaryDirectory(prefix="peakwatch-build-") as scratch:
        measurements = None
        if measurer is not None:
            measurements = BuildMeasurements(
                measurer, libraries, Path(scratch), inputs, network.entry, memory_configs,
                artifacts=Path(artifacts_dir) if artifacts_dir is not None else None,
                fcompile=export_compiler,
            )

        def plan_and_build_one(strategy) -> None:
            report = planning.report(
                strategy, problem, model=name, environment=env, model_source=source.source,
                assumptions=list(network.assumptions),
            )
            t0 = time.perf_counter()
            build = plan_and_build(
                planning, strategy, report, seed, base_dir=root,
                planner_time_limit=planner_time_limit, repo_plans=repo_plans,
                libraries=libraries,
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
            rewritten = beside.submit(lambda: [plan_and_build_one(s) for s in apart])
            for strategy in here:
                plan_and_build_one(strategy)

            def built_beside() -> dict[str, Build]:
                rewritten.result()
                return {s.name: builds[s.name] for s in apart}

            if check_locally:
                # The builds made here are checked while the rewritten ones still build.
                check_and_time_builds(
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
                        export_model_library(
                            out, build, copies, fcompile=export_compiler,
                            libraries=libraries, scratch=Path(scratch),
                        )
            # After measuring, so that the plan file carries the measured kernel workspace.
            for build in builds.values():
                write_plan_files(out, build)
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
    ``axis``: see :func:`~planner.tvm.sources.build_network`. StepFailed names the step that
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


def with_bounds(network: Network) -> tvm.IRModule:
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
    tgt = make_target(target) if isinstance(target, str) else target
    bounds = dict(network.shape_bounds)
    lowered = lowering.lower_to_allocations(with_bounds(network), tgt)
    return prepare_variant(lowered, network.entry, bounds, bool(lift_temporaries)).planned.problem()


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
        # The first input is the data (see planner.tvm.network.Network); the rest are
        # weights, which a deployment keeps in flash or uploads once.
        report.input_bytes = sum(sizes[: network.data_inputs])
        report.weights_bytes = network.bound_weights_bytes + sum(sizes[network.data_inputs :])


def plan_and_build(
    planning: FunctionPlanning, strategy: CompileStrategy, report: StrategyReport, seed: int,
    **options,
) -> Build:
    """``strategy``'s plan of ``planning``'s function written into the module and built; a
    strategy that fails has its error on ``report`` and no executable, so that it hides no
    other. :func:`compile_model` builds its network's entry function with it; an LLM
    deployment each of its functions (:mod:`planner.tvm.llm.deployment`)."""
    variant = planning.variant(strategy)
    try:
        return _plan_and_build(variant, strategy, report, planning.target, seed, **options)
    except Exception as exc:
        log.exception("strategy %s failed on %s", strategy.name, report.model)
        report.error = failure_text(exc, "build")
        return Build(report, planning.lowered, {}, variant.planned)


def _plan_and_build(
    variant: PlanVariant,
    strategy: CompileStrategy,
    report: StrategyReport,
    target: tvm.target.Target,
    seed: int,
    *,
    libraries: KernelLibraries | None = None,
    **options,
) -> Build:
    """Plan ``variant`` with ``strategy``, write the plan into the module and build it."""
    if variant.program is not None:
        variant = choose_order(variant, strategy, report, seed)
    planned = plan_strategy(variant, strategy, report, target, seed, **options)
    try:
        return build_planned(planned, target, libraries)
    except Exception as exc:
        if strategy.variant is not Variant.REWRITES or not rewrites_applied(report):
            raise
        # A rewrite must never cost a build: plan and build again without any of them,
        # and say why on the report.
        log.warning("rewritten %s did not build, building without rewrites: %s", report.model, exc)
        planned = plan_without_rewrites(variant, strategy, report, seed, exc)
        return build_planned(planned, target, libraries)
