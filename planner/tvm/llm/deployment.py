"""Plan, build, check and measure an LLM deployment: every function under every strategy.

A deployment (:class:`planner.tvm.llm.decoders.LLMDeployment`) is one module of several entry
functions sharing a KV cache. Relax plans each function's memory apart
(``StaticPlanBlockMemory`` works function by function), and so does Peakwatch: each model
function is lowered with its own bounds (``seq_len`` up to the prefill chunk, ``batch_size``
up to the sequences the cache takes), planned under each strategy and built with the cache's
creation beside it, so that one build's kernels never change under another function's
plan (``+rewrites`` lifts and rewrites kernels).

What a deployment holds at its worst is the parameters, the KV cache and the temporary
memory of the function that needs most (:class:`LLMReport`): the three figures MLC-LLM's
out-of-memory reports are about. The cache is measured through the shim as it really
allocates and set beside the formula of its pages; each function is measured at its bounds
in a child of its own; every strategy's build runs a prefill and decode steps, and batched
steps, against the framework's own model with its own cache, step by step.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from planner.report import ATOL, RTOL, StrategyReport
from planner.tvm.build import execute
from planner.tvm.build.check import REFERENCE_ATOL, REFERENCE_RTOL
from planner.tvm.build.kernels import KernelLibraries, library_of, save_executable
from planner.tvm.build.target import make_target
from planner.tvm.compile import plan_and_build
from planner.tvm.host import environment
from planner.tvm.llm.decoders import (
    MODEL_FUNCTIONS,
    DecoderConfig,
    LLMDeployment,
)
from planner.tvm.llm.runtime import Session, Step, at_bound, batch_prefill_step
from planner.tvm.measure import memory
from planner.tvm.plan import lowering
from planner.tvm.plan.variants import FunctionPlanning
from planner.tvm.steps import step
from planner.tvm.strategies import STOCK, UnknownCompileStrategy, Variant, check_names

log = logging.getLogger(__name__)

#: Decode steps checked after the prefill, against the framework's own cache.
DECODE_STEPS = 3


def kv_cache_pages(config: DecoderConfig) -> dict:
    """The KV cache's pages as TVM's paged cache sizes them: ``ceil(context / page) + 1``
    pages per layer (the ``+ 1`` is TVM's own, ``paged_kv_cache.cc``), each holding keys and
    values of ``page_size`` tokens for every KV head."""
    pages = -(-config.context_window // config.page_size) + 1
    itemsize = np.dtype(config.dtype).itemsize
    per_layer = pages * 2 * config.kv_heads * config.page_size * config.head_dim * itemsize
    return {
        "pages": pages,
        "per_layer_bytes": per_layer,
        "bytes": per_layer * config.layers,
        "formula": (
            f"{config.layers} layers x {pages} pages x 2 (K, V) x {config.kv_heads} KV heads x "
            f"{config.page_size} tokens x {config.head_dim} head size x {itemsize} B"
        ),
    }


@dataclass
class LLMReport:
    """An LLM deployment under each strategy: figures per function, the worst function's
    temporary memory, the parameters and the KV cache."""

    model: str
    config: dict
    target: str
    tvm_version: str
    params_bytes: int
    #: The formula's pages beside what the cache allocated (measured, where measured):
    #: ``pages_bytes`` (its allocations of one layer's page tensor size), ``working_bytes``
    #: (its other buffers: attention scratch for a prefill chunk, page tables).
    kv_cache: dict
    #: By strategy, by function: each function's report (planned bytes, lower bound,
    #: measured peak, latency, the check).
    functions: dict[str, dict[str, StrategyReport]] = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    compile_seconds: float = 0.0

    def worst_function(self, strategy: str, figure: str = "planned_bytes") -> tuple[str, int]:
        """The function whose ``figure`` is largest under ``strategy``, and that figure."""
        reports = self.functions.get(strategy, {})
        known = {f: getattr(r, figure) for f, r in reports.items() if getattr(r, figure)}
        if not known:
            return "", 0
        worst = max(known, key=lambda f: known[f])
        return worst, int(known[worst])

    def temporary_bytes(self, strategy: str) -> int:
        return self.worst_function(strategy)[1]

    def total_bytes(self, strategy: str) -> int:
        """Parameters, KV cache (as allocated where measured, else its pages) and the worst
        function's planned temporary memory."""
        cache = self.kv_cache.get("allocated_bytes") or self.kv_cache["formula_bytes"]
        return self.params_bytes + cache + self.temporary_bytes(strategy)

    @property
    def tvm_estimate_bytes(self) -> int:
        """What TVM's own planner reserves for the worst function of the symbolic build at
        its upper bounds (``StaticPlanBlockMemory`` with ``tir_var_upper_bound``), the figure
        MLC-LLM's compile-time estimate prints as temporary buffer."""
        return self.worst_function(STOCK, "intermediate_bytes")[1]

    @property
    def ok(self) -> bool:
        return all(r.ok for reports in self.functions.values() for r in reports.values())

    def to_json(self) -> dict:
        data = asdict(self)
        data["functions"] = {
            s: {f: r.to_json() for f, r in reports.items()} for s, reports in self.functions.items()
        }
        data["worst_function"] = {s: self.worst_function(s)[0] for s in self.functions}
        data["temporary_bytes"] = {s: self.temporary_bytes(s) for s in self.functions}
        data["total_bytes"] = {s: self.total_bytes(s) for s in self.functions}
        data["tvm_estimate_bytes"] = self.tvm_estimate_bytes
        return data


def compile_deployment(
    deployment: LLMDeployment,
    strategies: Sequence[str],
    *,
    target: str = "llvm",
    repeat: int = 5,
    seed: int = 0,
    measure: bool = True,
    libraries: KernelLibraries | None = None,
    measurer: memory.MeasuringProcess | None = None,
) -> LLMReport:
    """Plan every model function of ``deployment`` under each of ``strategies`` (and
    TVM's stock planner, the reference), build, check against the framework, time the
    prefill and one decode step, and measure memory (``measure``)."""
    try:
        chosen = check_names(strategies)
    except UnknownCompileStrategy as exc:
        raise ValueError(str(exc)) from None
    started = time.perf_counter()
    tgt = make_target(target)
    config = deployment.config
    libraries = libraries if libraries is not None else KernelLibraries()
    order = list({s.name: s for s in (*check_names([STOCK]), *chosen)}.values())
    env = environment()
    pages = kv_cache_pages(config)
    runs_here = tgt.kind.name in ("llvm", "c")
    with tempfile.TemporaryDirectory(prefix="peakwatch-llm-") as scratch:
        # Each kernel library is written out and loaded as it is built: the checks' VMs
        # and the measuring process load it, and nothing compiles it a second time.
        libraries.emit_to, libraries.load_kernels = (Path(scratch), True) if runs_here else (
            None, False
        )
        try:
            builds = _plan_and_build_all(deployment, lowering_of(deployment, tgt), order, tgt,
                                         seed, env, libraries)
        finally:
            libraries.emit_to, libraries.load_kernels = None, False
        report = LLMReport(
            model=deployment.name,
            config=asdict(config),
            target=str(tgt),
            tvm_version=tvm.__version__,
            params_bytes=deployment.params_bytes,
            kv_cache={
                "formula_bytes": pages["bytes"],
                "formula": pages["formula"],
                "pages": pages["pages"],
            },
            functions={
                s.name: {f: b.report for f, b in builds[s.name].items()}
                for s in order if s in chosen or s.name == STOCK
            },
            environment=env,
            assumptions=list(deployment.assumptions),
        )
        if runs_here:
            _check_and_time(deployment, builds, repeat, seed)
            if measure:
                _measure(deployment, builds, libraries, report, measurer, Path(scratch))
    report.compile_seconds = round(time.perf_counter() - started, 3)
    return report


def lowering_of(deployment: LLMDeployment, tgt) -> tvm.IRModule:
    """The deployment's module lowered to explicit allocations, each function at its bounds."""
    with step("lower"):
        return lowering.lower_to_allocations(_with_bounds(deployment.mod, deployment.config), tgt)


def _plan_and_build_all(deployment, lowered, order, tgt, seed, env, libraries) -> dict:
    """By strategy, by function: each model function planned and built with the cache's
    creation beside it."""
    functions = [f for f in MODEL_FUNCTIONS if _has(deployment.mod, f)]
    builds: dict[str, dict[str, object]] = {s.name: {} for s in order}
    for function in functions:
        module = _only(lowered, function)
        bounds = _bounds_of(module[function], deployment.config)
        planning = FunctionPlanning(module, function, bounds, order, tgt)
        problem = planning.variants[Variant.PLAIN].planned.problem(
            name=f"{deployment.name}:{function}"
        )
        for strategy in order:
            report = planning.report(
                strategy, problem, model=deployment.name, environment=env,
                model_source=f"llm:{deployment.name}", assumptions=list(deployment.assumptions),
            )
            t0 = time.perf_counter()
            builds[strategy.name][function] = plan_and_build(
                planning, strategy, report, seed, libraries=libraries
            )
            report.compile_seconds = round(time.perf_counter() - t0, 4)
    return builds


def _has(mod: tvm.IRModule, name: str) -> bool:
    return any(gv.name_hint == name for gv in mod.functions)


def _with_bounds(mod: tvm.IRModule, config: DecoderConfig) -> tvm.IRModule:
    """Each function with the upper bounds of the symbols it uses, where TVM's planner
    reads them."""
    module = tvm.IRModule(mod.functions, attrs=mod.attrs)
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            bounds = _bounds_of(func, config)
            if bounds:
                module[gv] = func.with_attr("tir_var_upper_bound", bounds)
    return module


def _bounds_of(func: relax.Function, config: DecoderConfig) -> dict[str, int]:
    names = {v.name for v in relax.analysis.defined_symbolic_vars(func)}
    return {k: v for k, v in config.shape_bounds.items() if k in names}


def _only(lowered: tvm.IRModule, function: str) -> tvm.IRModule:
    """``function`` and the cache's creation, with only the kernels they call."""
    keep = [function, "create_paged_kv_cache"]
    return relax.transform.DeadCodeElimination(keep)(lowered)


def scenario_tokens(config: DecoderConfig, seed: int) -> dict:
    """The token ids every build is checked on: a whole prefill chunk and decode steps, then
    two sequences of different lengths together, where the cache takes two."""
    rng = np.random.default_rng(seed)
    prompt = rng.integers(0, config.vocab, config.prefill_chunk).tolist()
    steps = rng.integers(0, config.vocab, DECODE_STEPS).tolist()
    split = max(1, config.prefill_chunk // 3)
    prompts = [prompt[:split], prompt[split:]] if config.max_batch >= 2 else [prompt]
    prompts = [p for p in prompts if p]
    return {"prompt": prompt, "steps": steps, "prompts": prompts,
            "nexts": steps[: len(prompts)]}


def reference_runs(tokens: dict) -> list[tuple[list[int], list[int]]]:
    """The framework runs (prompt, decode tokens) whose logits check ``tokens``' steps."""
    return [(tokens["prompt"], tokens["steps"]), *(
        (p, [t]) for p, t in zip(tokens["prompts"], tokens["nexts"], strict=True)
    )]


def _reference_steps(deployment: LLMDeployment, seed: int) -> dict:
    """The token ids every build is checked on, and the framework's logits for them
    (``expected``; None with the reason in ``missing`` where there are none)."""
    inputs = {**scenario_tokens(deployment.config, seed), "expected": None, "missing": ""}
    reference = deployment.reference
    if reference is None:
        inputs["missing"] = "no reference: the deployment has no framework model"
        return inputs
    try:
        single, *batch = [reference.run(p, s) for p, s in reference_runs(inputs)]
    except Exception as exc:  # the framework failing is no verdict on TVM's build
        inputs["missing"] = f"no reference: {reference.name} failed: {type(exc).__name__}: {exc}"
        return inputs
    inputs["expected"] = {"single": single, "batch": batch}
    return inputs


def _scenario(session: Session, inputs: dict, dev) -> list[tuple[str, np.ndarray]]:
    """Every model function run on the checked inputs: a prefill, decode steps, then a
    batched prefill of two sequences and a batched decode step, each step named."""
    outputs = []
    machines = session.machines
    if "prefill" in machines:
        prompt = inputs["prompt"]
        first = Step("prefill", (0,), (len(prompt),), (np.array([prompt], dtype="int32"),))
        outputs.append(("prefill", _logits(session.run(first, session.upload(first, dev)))))
        if "decode" in machines:
            for index, token in enumerate(inputs["steps"]):
                one = Step("decode", (0,), (1,), (np.array([[token]], dtype="int32"),))
                logits = session.run(one, session.upload(one, dev))
                outputs.append((f"decode step {index + 1}", _logits(logits)))
    session.clear()
    sequences = list(range(1, len(inputs["prompts"]) + 1))
    if "batch_prefill" in machines:
        batch = batch_prefill_step(sequences, inputs["prompts"])
        logits = _logits(session.run(batch, session.upload(batch, dev)))
        for index, row in enumerate(logits.reshape(len(sequences), -1)):
            outputs.append((f"batch_prefill sequence {index + 1}", row))
        if "batch_decode" in machines:
            ids = np.array([[t] for t in inputs["nexts"]], dtype="int32")
            one = Step("batch_decode", tuple(sequences), (1,) * len(sequences), (ids,))
            logits = _logits(session.run(one, session.upload(one, dev)))
            for index, row in enumerate(logits.reshape(len(sequences), -1)):
                outputs.append((f"batch_decode sequence {index + 1}", row))
    session.clear()
    return outputs


def _expected(inputs: dict) -> list[np.ndarray] | None:
    expected = inputs["expected"]
    if expected is None:
        return None
    flat = list(expected["single"])
    flat += [run[0] for run in expected["batch"]]
    flat += [run[1] for run in expected["batch"]]
    return flat


def _logits(value) -> np.ndarray:
    return value.numpy().reshape(-1)


def _check_and_time(deployment: LLMDeployment, builds: dict, repeat: int, seed: int) -> None:
    """Each strategy's builds run the checked steps; the stock build's logits are checked
    against the framework's, every other build's against the stock build's, and the first
    step that differs is named."""
    dev = tvm.cpu()
    inputs = _reference_steps(deployment, seed)
    params = [tvm.runtime.tensor(p, dev) for p in deployment.params]
    reference_outputs = None
    sessions: dict[str, Session] = {}
    for strategy, by_function in builds.items():
        reports = [b.report for b in by_function.values()]
        if not all(b.report.ok and b.executable is not None for b in by_function.values()):
            continue
        machines = {f: execute.load(b.executable, dev) for f, b in by_function.items()}
        session = Session(machines, params, deployment.config.cache_arguments())
        try:
            outputs = _scenario(session, inputs, dev)
        except Exception as exc:  # a build that fails to run is that strategy's failure
            for report in reports:
                report.error = f"run: {type(exc).__name__}: {exc}"[:2000]
            continue
        names = [name for name, _ in outputs]
        got = [value for _, value in outputs]
        if strategy == STOCK:
            reference_outputs = got
            expected = _expected(inputs)
            verdict, worst = _judge(names, _aligned(expected, names), got,
                                    REFERENCE_RTOL, REFERENCE_ATOL)
            for report in reports:
                if expected is None:
                    report.reference_check = inputs["missing"][:2000]
                    continue
                report.reference_check = verdict or (
                    f"matches {deployment.reference.name} at every step ({len(names)} steps)"
                )
                report.reference_max_abs_diff = worst
                if verdict:
                    report.error = (
                        f"TVM's build differs from {deployment.reference.name}: {verdict}"
                    )
        if reference_outputs is None:
            # Unchecked is not matching: the Result must not read as a plan that was.
            for report in reports:
                report.error = "not checked: TVM's stock build, every build's reference, failed"
            continue
        verdict, worst = _judge(names, reference_outputs, got, RTOL, ATOL)
        for report in reports:
            report.outputs_match = not verdict
            report.max_abs_diff = worst
            if verdict and strategy != STOCK:
                report.error = f"outputs differ from tvm-stock: {verdict}"
        sessions[strategy] = session
    _time(sessions, builds, deployment.config, repeat, dev)


def _aligned(expected, names):
    return expected[: len(names)] if expected is not None else None


def _judge(names, expected, got, rtol, atol) -> tuple[str, float | None]:
    """The first step whose logits differ ("" where none does), and the largest difference."""
    if expected is None:
        return "", None
    worst = 0.0
    first = ""
    for name, want, have in zip(names, expected, got, strict=True):
        match, diff = execute.compare_outputs([want], [have], rtol=rtol, atol=atol)
        worst = max(worst, diff)
        if not match and not first:
            first = f"{name} differs by {execute.describe_diff(diff)}"
    return first, worst


def _time(sessions: dict[str, Session], builds: dict, config: DecoderConfig, repeat: int,
          dev) -> None:
    """Each function's latency at its bounds (a whole prefill chunk, one decode step per
    sequence) under every strategy that ran, the strategies timed in turn, sample after
    sample, so that a slow phase of a shared host falls on all of them alike (as
    :func:`planner.tvm.build.execute.interleaved_latency` times single-function builds). Each run
    starts from the same empty cache: the sequences are removed after it."""
    functions = {f for by_function in builds.values() for f in by_function}
    for function in [f for f in MODEL_FUNCTIONS if f in functions]:
        one = at_bound(function, config.prefill_chunk, config.max_batch, config.vocab)
        timed = {s: (session, session.upload(one, dev)) for s, session in sessions.items()
                 if function in session.machines}
        samples: dict[str, list[float]] = {s: [] for s in timed}
        for index in range(max(repeat, 1) + 1):
            for strategy, (session, arrays) in timed.items():
                t0 = time.perf_counter()
                session.run(one, arrays)
                elapsed = (time.perf_counter() - t0) * 1e3
                session.clear()
                if index:  # the first run of each pays for first-touch page faults
                    samples[strategy].append(elapsed)
        for strategy, values in samples.items():
            builds[strategy][function].report.latency_ms = {
                "median": float(np.median(values)),
                "p90": float(np.percentile(values, 90)),
                "samples": values,
            }


def _measure(deployment: LLMDeployment, builds: dict, libraries: KernelLibraries,
             report: LLMReport, measurer, folder: Path) -> None:
    """Each function of each strategy at its bounds, in the measuring process, a child per
    function and allocator; the KV cache's allocations read from the first."""
    config = deployment.config
    own = measurer is None
    measurer = measurer or memory.MeasuringProcess()
    pages = kv_cache_pages(config)
    try:
        params = folder / "params.npz"
        np.savez(params, *deployment.params)
        llm = {
            "cache_arguments": list(config.cache_arguments()),
            "bounds": {"prefill_chunk": config.prefill_chunk,
                       "max_batch": config.max_batch, "vocab": config.vocab},
        }
        for strategy, by_function in builds.items():
            for function, build in by_function.items():
                if not build.report.ok or build.executable is None:
                    continue
                path = folder / f"{strategy}-{function}.vm".replace("+", "_")
                library = library_of(build.executable)
                kernels = libraries.files(library, folder) if library else None
                save_executable(build.executable, path)
                for config_name in memory.MEMORY_CONFIGS:
                    try:
                        figures = measurer.measure(
                            path, params, kernels=kernels, entry=function,
                            memory_cfg=config_name, llm=llm,
                        )
                    except memory.MeasurementError as exc:
                        figures = {"error": str(exc)}
                    build.report.measured[config_name] = figures
                pooled = build.report.measured.get("pooled", {})
                if "inference_peak_bytes" in pooled:
                    build.report.measured_peak_bytes = pooled["inference_peak_bytes"]
                _read_cache(report, build.report.measured.get("naive", {}), pages)
    finally:
        if own:
            measurer.close()


def _read_cache(report: LLMReport, figures: dict, pages: dict) -> None:
    """The cache's measured bytes, its page tensors told apart by size; the same in every
    child, or said otherwise."""
    if "kv_cache_bytes" not in figures:
        return
    per_layer = pages["per_layer_bytes"]
    allocations = {int(size): int(count) for size, count in figures["kv_cache_allocations"]}
    measured = {
        "allocated_bytes": figures["kv_cache_bytes"],
        "pages_bytes": per_layer * allocations.get(per_layer, 0),
        "page_tensors": allocations.get(per_layer, 0),
        "working_bytes": figures["kv_cache_bytes"] - per_layer * allocations.get(per_layer, 0),
        "allocations": figures["kv_cache_allocations"],
    }
    cache = report.kv_cache
    if "allocated_bytes" in cache and cache["allocated_bytes"] != measured["allocated_bytes"]:
        cache.setdefault("warnings", []).append(
            f"the cache allocated {measured['allocated_bytes']:,} B in one build and "
            f"{cache['allocated_bytes']:,} B in another"
        )
        return
    cache.update(measured)


def summary(report: LLMReport) -> str:
    """The memory report as text: parameters, the KV cache (its pages' formula beside what
    it allocated), TVM's estimate, and per strategy each function's planned and measured
    temporary memory, the worst and the deployment's total."""
    cache = report.kv_cache
    kind = tvm.target.Target(report.target).kind.name if report.target else "?"
    lines = [f"{report.model} on {kind}: parameters {report.params_bytes:,} B"]
    pages = f"{cache['formula_bytes']:,} B of pages ({cache['formula']})"
    if "allocated_bytes" in cache:
        same = "the same" if cache["pages_bytes"] == cache["formula_bytes"] else (
            f"NOT the same: {cache['pages_bytes']:,} B")
        lines.append(
            f"KV cache: {cache['allocated_bytes']:,} B allocated = {pages}, measured {same}, "
            f"+ {cache['working_bytes']:,} B of the cache's own working buffers"
        )
    else:
        lines.append(f"KV cache: {pages} (not measured)")
    worst, _ = report.worst_function(STOCK)
    measured = report.functions.get(STOCK, {}).get(worst)
    peak = measured.measured.get("naive", {}).get("inference_peak_bytes") if measured else None
    lines.append(
        f"TVM's estimate of temporary memory (its planner at the bounds, {worst or '-'}): "
        f"{report.tvm_estimate_bytes:,} B"
        + (f"; that function's measured peak {peak:,} B" if peak else "")
    )
    for strategy, reports in report.functions.items():
        worst, temporary = report.worst_function(strategy)
        parts = []
        for function, r in reports.items():
            held = f" (measured {r.measured_peak_bytes:,})" if r.measured_peak_bytes else ""
            parts.append(f"{function} {r.planned_bytes or 0:,}{held}")
        lines.append(
            f"  {strategy}: {'; '.join(parts)}; worst {worst} {temporary:,} B; "
            f"total {report.total_bytes(strategy):,} B"
        )
    checks = {r.reference_check for r in report.functions.get(STOCK, {}).values()}
    lines.extend(f"check: {text}" for text in sorted(checks) if text)
    return "\n".join(lines)


def dumps(report: LLMReport) -> str:
    return json.dumps(report.to_json(), indent=2, default=str)


def strategy_reports(report: LLMReport, strategies: Sequence[str], *, model: str,
                     point: dict[str, int]) -> list[StrategyReport]:
    """One report per strategy for a tracked run: its figures are the worst function's (the
    deployment's temporary memory), ``llm`` holds every function's, the parameters, the
    cache and the total; a function that failed fails the whole report, by name."""
    import copy

    results = []
    for strategy in strategies:
        by_function = report.functions.get(strategy, {})
        worst, temporary = report.worst_function(strategy)
        failures = [f"{f}: {r.error}" for f, r in by_function.items() if r.error]
        if not by_function or not worst:
            results.append(StrategyReport.failed(
                model, strategy, failures[0] if failures else "no function planned",
                shape_point=dict(point), model_source=f"llm:{report.model}",
            ))
            continue
        result = copy.deepcopy(by_function[worst])
        result.model, result.strategy, result.shape_point = model, strategy, dict(point)
        result.entry = worst
        result.weights_bytes = report.params_bytes
        result.error = "; ".join(failures)[:20_000] or None
        matches = [r.outputs_match for r in by_function.values()]
        result.outputs_match = None if None in matches else all(matches)
        diffs = [r.max_abs_diff for r in by_function.values() if r.max_abs_diff is not None]
        result.max_abs_diff = max(diffs) if diffs else None
        cache = {k: v for k, v in report.kv_cache.items() if k in (
            "formula_bytes", "formula", "pages", "allocated_bytes", "pages_bytes",
            "working_bytes", "warnings",
        )}
        result.llm = {
            "params_bytes": report.params_bytes,
            "kv_cache": cache,
            "worst_function": worst,
            "temporary_bytes": temporary,
            "total_bytes": report.total_bytes(strategy),
            "tvm_estimate_bytes": report.tvm_estimate_bytes,
            "functions": {
                f: {
                    "planned_bytes": r.planned_bytes,
                    "lower_bound_bytes": r.lower_bound_bytes,
                    "measured_peak_bytes": r.measured_peak_bytes,
                    "latency_ms": (r.latency_ms or {}).get("median"),
                }
                for f, r in by_function.items()
            },
        }
        results.append(result)
    return results
