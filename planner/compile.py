"""Compile one model under several planning strategies, check and measure each build.

This is the one entry point that the command line (``python -m planner compile``) and the
Celery workers share. It returns plain data, so callers decide where results go.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tvm

from planner import strategies as strategy_registry
from planner.plan import validate_plan
from planner.problem import lower_bound, write_csv
from planner.relax import execute, lowering, memory
from planner.relax.apply import apply_plan
from planner.relax.extract import ARENA_ALIGNMENT, Extraction, bindings_of, extract
from planner.relax.kernel_temps import (
    KernelTemporaries,
    lift_kernel_temporaries,
    refine_lifetimes,
)
from planner.relax.rewrites import find_rewrites, inline_pool_padding
from planner.timeline import render_svg
from planner.zoo import ModelSource, build_network

log = logging.getLogger(__name__)

#: TVM's own planner, built exactly the way ``relax.build`` builds by default.
STOCK = "tvm-stock"

# Same kernels on the same inputs must agree to float rounding; a wrong offset shows up
# as differences of the size of the activations, far above these.
RTOL = 1e-5
ATOL = 1e-6


#: Suffix of strategies that first apply the in-place and concat-elision rewrites.
REWRITES = "+rewrites"
REWRITE_BASES = ("best-fit", "optimal")


def strategy_names() -> list[str]:
    return [
        STOCK,
        *strategy_registry.strategy_names(),
        *(base + REWRITES for base in REWRITE_BASES),
    ]


@dataclass
class StrategyReport:
    model: str
    strategy: str
    planned_bytes: int | None = None
    intermediate_bytes: int | None = None
    output_bytes: int | None = None
    lower_bound_bytes: int | None = None
    kernel_workspace_bytes: int = 0
    kernel_workspace_source: str = "estimate"
    kernel_stack_bytes: int = 0
    measured_peak_bytes: int | None = None
    measured: dict = field(default_factory=dict)
    peak: dict = field(default_factory=dict)
    rewrites: dict = field(default_factory=dict)
    shape_bounds: dict = field(default_factory=dict)
    latency_ms: dict | None = None
    outputs_match: bool | None = None
    max_abs_diff: float | None = None
    tolerance: dict = field(default_factory=lambda: {"rtol": RTOL, "atol": ATOL})
    compile_seconds: float | None = None
    plan_seconds: float | None = None
    proven_optimal: bool | None = None
    tvm_version: str = tvm.__version__
    target: str = ""
    environment: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        return asdict(self)


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "numpy": np.__version__,
        "tvm": tvm.__version__,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


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
) -> list[StrategyReport]:
    """Plan, build, check and time ``source`` under each of ``strategies``.

    Every planned build is run on the same inputs as TVM's stock build and compared; a build
    whose outputs differ is reported with ``outputs_match=False`` and an error, never as a
    plain number. One failing strategy does not stop the others.

    ``+rewrites`` strategies also plan the kernels' own temporaries (see
    :mod:`planner.relax.kernel_temps`), fold elementwise chains in place and inline pooling
    padding; the others plan what TVM's planner plans and leave kernel temporaries to
    TVM's workspace pool, whose size ``kernel_workspace_bytes`` gives (measured when
    measured). ``lift_temporaries`` forces lifting on (True) or off (False) for all of our
    strategies. Lifting alone, without in-place chains, holds more than TVM's pool, which
    reuses buffers inside each kernel: measured +7.7% on ResNet-18 at 224x224.

    For targets this host cannot run (a cross-compiled remote board), ``check_locally=False``
    skips running, checking and timing here; the board does that. ``export_compiler`` is
    passed to ``export_library`` as ``fcompile`` (a cross compiler).
    """
    unknown = [s for s in strategies if s not in strategy_names()]
    if unknown:
        raise ValueError(
            f"unknown strategy {', '.join(unknown)}; known: {', '.join(strategy_names())}"
        )
    network = build_network(source, base_dir=Path(base_dir) if base_dir else None)
    name = model_name or network.name
    tgt = lowering.make_target(target)
    env = environment()
    started = time.perf_counter()
    bounds = dict(network.shape_bounds)
    module = network.mod
    if bounds:
        # TVM's own planner reads the bounds from this attribute; ours from ``bounds``.
        module = tvm.IRModule(module.functions, attrs=module.attrs)
        entry = next(gv for gv in module.functions if gv.name_hint == network.entry)
        module[entry] = module[entry].with_attr("tir_var_upper_bound", bounds)
    lowered = lowering.lower_to_allocations(module, tgt)
    plain = extract(lowered, network.entry, bounds)
    # What TVM's workspace pool will hold for the stock build; GPU kernels are scheduled
    # differently and are not looked into.
    temporaries = KernelTemporaries([], [])
    if tgt.kind.name in ("llvm", "c"):
        temporaries = lift_kernel_temporaries(lowered, network.entry)[1]
    can_lift = tgt.kind.name in ("llvm", "c")
    variants = {"plain": _prepare(lowered, network.entry, bounds, bool(lift_temporaries))}
    if any(s.endswith(REWRITES) for s in strategies):
        inlined, _ = inline_pool_padding(lowered) if can_lift else (lowered, [])
        lift = can_lift if lift_temporaries is None else lift_temporaries
        variants["rewrites"] = _prepare(inlined, network.entry, bounds, lift)
    problem = variants["plain"].planned.problem(name=name)
    bound = _align(lower_bound(problem)) if problem.buffers else 0
    output_bytes = sum(t.size for t in plain.escaping)
    lowering_seconds = time.perf_counter() - started

    builds: dict[str, _Build] = {}
    for strategy in dict.fromkeys([STOCK, *strategies]):
        stock = strategy == STOCK
        if stock:
            variant = _Variant(lowered, plain, plain)
        else:
            variant = variants["rewrites" if strategy.endswith(REWRITES) else "plain"]
        report = StrategyReport(
            model=name,
            strategy=strategy,
            lower_bound_bytes=bound,
            output_bytes=output_bytes,
            kernel_workspace_bytes=0 if variant.lifted else temporaries.lifted_bytes,
            kernel_stack_bytes=temporaries.stack_bytes,
            shape_bounds=bounds,
            target=str(tgt),
            environment=env,
        )
        t0 = time.perf_counter()
        try:
            builds[strategy] = _plan_and_build(
                variant.module, variant.planned, strategy, report, tgt, seed,
                by_binding=variant.by_binding,
            )
        except Exception as exc:  # one broken strategy must not hide the others
            log.exception("strategy %s failed on %s", strategy, name)
            report.error = f"{type(exc).__name__}: {exc}"
            builds[strategy] = _Build(report, lowered, {}, variant.planned)
        report.compile_seconds = round(lowering_seconds + time.perf_counter() - t0, 4)

    if check_locally:
        _check_and_time(network, builds, tgt, repeat, seed)
    with tempfile.TemporaryDirectory(prefix="peakwatch-build-") as scratch:
        root = Path(artifacts_dir) if artifacts_dir is not None else Path(scratch)
        for build in builds.values():
            _write_artifacts(
                root, build, keep=artifacts_dir is not None, export=bool(memory_configs),
                fcompile=export_compiler,
            )
        if memory_configs and check_locally:
            _measure_memory(builds, network, memory_configs)
    return [builds[s].report for s in strategies]


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


def _prepare(lowered: tvm.IRModule, entry: str, bounds: dict, lift: bool) -> _Variant:
    if not lift:
        extraction = extract(lowered, entry, bounds)
        return _Variant(lowered, extraction, extraction)
    module, temporaries = lift_kernel_temporaries(lowered, entry)
    by_binding = extract(module, entry, bounds)
    return _Variant(module, refine_lifetimes(by_binding, temporaries), by_binding, lifted=True)


def _plan_and_build(
    lowered: tvm.IRModule,
    extraction: Extraction,
    strategy: str,
    report: StrategyReport,
    target: tvm.target.Target,
    seed: int,
    by_binding: Extraction | None = None,
) -> _Build:
    """``extraction`` times tensors for planning; ``by_binding`` (same tensors) counts time
    in whole bindings, which is what the rewrites reason about."""
    problem = extraction.problem()
    if strategy == STOCK:
        planned = lowering.plan_with_stock_planner(lowered, target)
        offsets, arena = stock_offsets(planned, extraction)
        final = lowering.finish_lowering(planned, target, stock_planner=False)
        report.proven_optimal = False
    elif strategy.endswith(REWRITES):
        base = strategy.removesuffix(REWRITES)
        rewrites = find_rewrites(lowered, by_binding or extraction)
        merged = rewrites.problem(extraction)
        solution = strategy_registry.solve(merged, base, seed=seed)
        plain = strategy_registry.solve(problem, base, seed=seed)
        # Merging lengthens lifetimes; where that costs more than it saves, keep the plain
        # plan (same base strategy) rather than report a rewrite that made things worse.
        if solution.height <= plain.height:
            validate_plan(merged, solution.offsets)
            offsets = rewrites.expand(extraction, solution.offsets)
            drop = rewrites.dropped
            report.rewrites = {
                "inplace": [list(r) for r in rewrites.inplace],
                "concat": [[k, out, ins] for k, out, ins in rewrites.concats],
                "dropped_calls": len(drop),
            }
        else:
            solution, offsets, drop = plain, plain.offsets, set()
            report.rewrites = {"inplace": [], "concat": [], "dropped_calls": 0,
                               "rejected": "merged plan was not smaller"}
        arena = _align(solution.height)
        report.plan_seconds = round(solution.seconds, 4)
        report.proven_optimal = False
        planned = apply_plan(lowered, extraction, offsets, arena, drop=drop)
        final = lowering.finish_lowering(planned, target, stock_planner=False)
    else:
        solution = strategy_registry.solve(problem, strategy, seed=seed)
        offsets = solution.offsets
        arena = _align(solution.height)
        report.plan_seconds = round(solution.seconds, 4)
        report.proven_optimal = solution.proven_optimal
        planned = apply_plan(lowered, extraction, offsets, arena)
        final = lowering.finish_lowering(planned, target, stock_planner=False)
    if not strategy.endswith(REWRITES):
        # The plan we report must be the plan we built: check it like any other.
        validate_plan(problem, offsets)
    report.intermediate_bytes = arena
    # Intermediates, kernel workspace and outputs, so that builds that leave kernel
    # temporaries to TVM's pool compare with builds that plan them. Until measured, the
    # pool's size is a static estimate (see _measure_memory).
    report.planned_bytes = arena + report.kernel_workspace_bytes + (report.output_bytes or 0)
    report.peak = peak_breakdown(extraction, offsets)
    build = _Build(report, planned, offsets, extraction)
    build.executable = execute.build(final, target)
    return build


def peak_breakdown(extraction: Extraction, offsets: dict[str, int], top: int = 20) -> dict:
    """The instant where the most tensor bytes are live, and who holds them.

    That instant is where no plan can do better than the sum shown, so these tensors (and
    the operators producing them) are what a user has to change to need less memory.
    """
    events = sorted(
        [(t.lower, 1, t) for t in extraction.tensors]
        + [(t.upper, 0, t) for t in extraction.tensors],
        key=lambda e: (e[0], e[1]),
    )
    live, best, best_time = 0, -1, None
    for when, starting, tensor in events:
        live += tensor.size if starting else -tensor.size
        if starting and live > best:
            best, best_time = live, when
    if best_time is None:
        return {"time": None, "bytes": 0, "tensors": []}
    at_peak = sorted(
        (t for t in extraction.tensors if t.lower <= best_time < t.upper),
        key=lambda t: -t.size,
    )
    return {
        "time": best_time,
        "bytes": best,
        "tensors": [
            {"id": t.name, "size": t.size, "producer": t.producer, "offset": offsets.get(t.name)}
            for t in at_peak[:top]
        ],
        "more": max(0, len(at_peak) - top),
    }


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


def _check_and_time(network, builds: dict[str, _Build], target, repeat: int, seed: int) -> None:
    dev = execute.device_for(target)
    loaders = {
        strategy: (lambda b=build: execute.load(b.executable, dev))
        for strategy, build in builds.items()
        if build.report.ok
    }
    checks = execute.check_and_time(
        loaders, dev, network.random_inputs(seed), reference=STOCK, entry=network.entry,
        repeat=repeat, rtol=RTOL, atol=ATOL,
    )
    for strategy, check in checks.items():
        for key, value in check.report_fields().items():
            setattr(builds[strategy].report, key, value)


def _measure_memory(builds: dict[str, _Build], network, configs: Sequence[str]) -> None:
    """Measure every runnable build under every allocator, each in its own process.

    One process per measurement, because TVM's workspace pool outlives a module: a second
    model measured in the same process would find its kernel workspace already held.
    """
    inputs = network.random_inputs()
    jobs = [
        (build, config)
        for build in builds.values()
        if build.report.ok and build.library is not None
        for config in configs
    ]

    def run(job):
        build, config = job
        try:
            return memory.measure(build.library, inputs, entry=network.entry, memory_cfg=config)
        except (memory.MeasurementError, OSError, subprocess.TimeoutExpired) as exc:
            return {"error": str(exc)}

    with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        for (build, config), figures in zip(jobs, pool.map(run, jobs), strict=True):
            build.report.measured[config] = figures
    for build in builds.values():
        measured = build.report.measured
        pooled, naive = measured.get("pooled", {}), measured.get("naive", {})
        if "inference_peak_bytes" in pooled:
            build.report.measured_peak_bytes = pooled["inference_peak_bytes"]
        if "retained_bytes" in naive:
            # The naive allocator returns every storage; what it still holds after the
            # call is the outputs plus the kernel workspace pool, which is never returned.
            workspace = max(0, naive["retained_bytes"] - (build.report.output_bytes or 0))
            measured["workspace_bytes"] = workspace
            measured["weights_bytes"] = naive.get("weights_bytes")
            report = build.report
            if report.kernel_workspace_bytes and report.intermediate_bytes is not None:
                # TVM compacts and scopes kernel buffers when it lowers them, so the pool
                # really holds less than the declared temporaries: count what it holds.
                report.kernel_workspace_bytes = workspace
                report.kernel_workspace_source = "measured"
                report.planned_bytes = (
                    report.intermediate_bytes + workspace + (report.output_bytes or 0)
                )


def _write_artifacts(
    root: Path, build: _Build, *, keep: bool, export: bool, fcompile=None
) -> None:
    report = build.report
    extraction = build.extraction
    folder = root / slug(report.model) / slug(report.strategy)
    folder.mkdir(parents=True, exist_ok=True)
    if build.executable is not None and (keep or export):
        library = folder / "model.so"
        try:
            if fcompile is None:
                build.executable.export_library(str(library))
            else:
                build.executable.export_library(str(library), fcompile=fcompile)
            build.library = library
            if keep:
                report.artifacts["model.so"] = str(library)
        except Exception as exc:  # a missing C compiler must not lose the other figures
            log.warning("export_library failed for %s: %s", report.strategy, exc)
    if not keep:
        return
    plan = {
        "model": report.model,
        "strategy": report.strategy,
        "function": extraction.function,
        "arena_bytes": report.intermediate_bytes,
        "lower_bound_bytes": report.lower_bound_bytes,
        "kernel_workspace_bytes": report.kernel_workspace_bytes,
        "peak": report.peak,
        "tensors": [
            {
                "id": t.name,
                "shape": list(t.shape),
                "dtype": t.dtype,
                "size": t.size,
                "lower": t.lower,
                "upper": t.upper,
                "offset": build.offsets.get(t.name),
                "producer": t.producer,
            }
            for t in extraction.tensors
        ],
        "outputs": [
            {"id": t.name, "shape": list(t.shape), "dtype": t.dtype, "size": t.size}
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
    problem_path = folder / "problem.csv"
    write_csv(problem_path, extraction.problem(), build.offsets or None)
    report.artifacts["problem.csv"] = str(problem_path)


def slug(text: str) -> str:
    """``text`` as a file name: strategy names such as ``best-fit+rewrites`` included."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
