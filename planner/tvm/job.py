"""The child side of a sandboxed compile: ``python -m planner.tvm.job JOB.json OUT.json``.

A worker's compile runs this module twice, each time in a sandbox of its own, and trusts
only the second (the README's "Trust boundary"). JOB.json is a
:class:`planner.job_spec.JobSpec`, refused whole if any key is unknown or mistyped:

- ``phase = "import"`` runs the repository's code: it builds the model (a model file, an
  ONNX file, a zoo entry), runs the repository's pipeline and planners, and writes what it
  built into ``job.out`` (:func:`planner.tvm.sources.handover.save_imported`). OUT.json is an
  empty list, or one failed report per strategy saying why the model could not be built.
  What it looks at of the checkout is not its to say: the worker serves the checkout to it
  and records that itself (``workers/sandbox/view.py``), for the compile cache.
- ``phase = "compile"`` imports nothing of the repository. It reads that folder back
  (:func:`planner.tvm.sources.handover.load_imported`, every field checked) and plans, builds,
  checks and measures: every figure of a report comes from here. A micro job
  (``job.micro``) is also exported, built and run on the emulated board here
  (:mod:`planner.tvm.micro.report`); a CUDA job (``job.cuda``) builds for the architecture
  it names, first checks that CUDA initialises, and counts each build's device bytes here,
  beside the GPU (:mod:`planner.tvm.measure.cuda_memory`).

A job without a phase does both in one process (the command line's way, for code the user
runs on purpose). The interpreter that runs this module is the toolchain's
(:mod:`planner.tvm.toolchain`): its TVM is the one imported here, and each report names the
job's ``toolchain`` spec.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, replace
from pathlib import Path

from planner.job_spec import JobSpec
from planner.report import StrategyReport
from planner.shapes import ShapeAxis
from planner.tvm.steps import failure_text, step


def run(job: JobSpec) -> list[StrategyReport]:
    if job.phase == "import":
        return run_import(job)
    return run_compile(job)


def _failed(job: JobSpec, error: str) -> list[StrategyReport]:
    points = ShapeAxis.from_json(job.shapes).points if job.shapes else None
    return StrategyReport.failed_everywhere(
        job.model, job.strategies, error, points=points, source=job.source
    )


def run_import(job: JobSpec) -> list[StrategyReport]:
    """Build the model with the repository's code and hand it over (see the docstring)."""

    from planner.tvm import repo_code
    from planner.tvm.build.target import make_target
    from planner.tvm.compile import imported_network, planning_problem
    from planner.tvm.shape_axis import check_symbols, plan_key, specialise
    from planner.tvm.sources import ModelSource, build_network
    from planner.tvm.sources.handover import save_imported
    from planner.tvm.strategies import REPO_PREFIX, lookup

    source = ModelSource(job.source, job.params, moe=job.moe)
    root = Path(job.base_dir) if job.base_dir else None
    axis = ShapeAxis.from_json(job.shapes) if job.shapes is not None else None
    from planner.tvm.sources.python_file import DeploymentReturned

    try:
        target = make_target(job.target)
        try:
            bound = imported_network(
                source, target, base_dir=root, pipeline=job.pipeline, seed=job.seed, axis=axis,
            )
        except DeploymentReturned as returned:
            return _import_deployment(job, returned, root, target, axis)
        unbound = None
        if job.micro is not None:
            # A micro board keeps the weights apart from the model (in flash), so it gets
            # the network with its weights as inputs, through the same pipeline.
            unbound = build_network(source, base_dir=root, axis=axis)
            if job.pipeline:
                mod = repo_code.run_pipeline(unbound.mod, job.pipeline, root, target)
                unbound = replace(unbound, mod=mod)
        plans = {}
        repo = [s for s in job.strategies if s.startswith(REPO_PREFIX)]
        points: list[dict] = [{}] if repo else []
        if repo and axis is not None:
            check_symbols(bound, axis)
            points = list(axis.points)
        for point in points:
            problem = planning_problem(
                specialise(bound, point) if point else bound, target,
                lift_temporaries=job.lift_temporaries,
            )
            for name in repo:
                plans[plan_key(name, point)] = _repo_plan(
                    name, problem, root, job, lookup, repo_code
                )
        save_imported(
            bound, Path(job.out), unbound=unbound, plans=plans,
            reference=_reference(bound, job),
        )
    except Exception as exc:  # a model that does not build is a failed Result per strategy
        logging.getLogger(__name__).exception("model %s failed to build", job.model)
        return _failed(job, failure_text(exc, "source"))
    return []


def _import_deployment(job: JobSpec, returned, root, target, axis) -> list[StrategyReport]:
    """An LLM deployment (the model file returned one): built at each point of its axis,
    the context window and the prefill chunk, and handed over with the framework's logits
    (:mod:`planner.tvm.llm.handover`). The factory is called again for a point only where it
    takes the point's sizes; the cache's sizes are the point's either way."""
    from dataclasses import replace as replaced

    from planner.tvm import repo_code
    from planner.tvm.llm import handover as llm_imported
    from planner.tvm.llm.decoders import call_factory
    from planner.tvm.sources.python_file import accepted_parameters

    points = list(axis.points) if axis is not None else [{}]
    unknown = sorted({s for p in points for s in p} - set(llm_imported.AXIS_SYMBOLS))
    if unknown:
        return _failed(job, (
            f"an LLM deployment's shape axis is its {' and '.join(llm_imported.AXIS_SYMBOLS)}, "
            f"not {', '.join(unknown)}"
        ))
    accepted = accepted_parameters(returned.function)
    where = f"{returned.path.name}:{returned.factory}"
    deployments, errors = [], {}
    for index, point in enumerate(points):
        # A point the deployment cannot take (a prefill chunk larger than the context in a
        # grid of both) fails alone, as any other model's point would.
        try:
            deployment = returned.deployment
            if set(point) & accepted and point != (axis.bounds if axis else {}):
                deployment = call_factory(returned.function, where, job.params, point)
            # The cache's sizes are the point's, whether or not the factory took them.
            deployment = replaced(deployment, config=replaced(deployment.config, **point))
            if job.pipeline:
                with step("pipeline"):
                    module = repo_code.run_pipeline(deployment.mod, job.pipeline, root, target)
                deployment = replaced(deployment, mod=module)
        except Exception as exc:
            logging.getLogger(__name__).exception("model %s failed at %s", job.model, point)
            errors[index], deployment = failure_text(exc, "source"), None
        deployments.append(deployment)
    if len(errors) == len(points):
        return _failed(job, errors[0])
    llm_imported.save(deployments, points, Path(job.out), seed=job.seed, errors=errors)
    # A repository planner's strategy fails in the compile phase, which says why.
    return []


def _reference(bound, job: JobSpec):
    """The framework's outputs on every draw the compile phase checks TVM's stock build on
    (``check_draws`` with the job's seed, at each point of a shape axis), for it to compare
    with: it imports neither the framework nor the model. None where the model comes from
    no framework or is not checked here."""
    from planner.tvm.compile import check_draws
    from planner.tvm.shape_axis import specialise
    from planner.tvm.sources.handover import Reference, run_reference

    framework = bound.framework
    if framework is None or not job.check_locally:
        return None
    try:
        points = ShapeAxis.from_json(job.shapes).points if job.shapes is not None else [{}]
        draws = [
            draw
            for point in points
            for draw in check_draws(specialise(bound, point) if point else bound, job.seed)
        ]
    except Exception as exc:  # a point that does not specialise fails in the compile phase
        return Reference(framework.name, missing=f"no draws to run: {type(exc).__name__}: {exc}")
    return run_reference(framework, draws)


def _repo_plan(name, problem, root, job: JobSpec, lookup, repo_code) -> dict:
    import time

    started = time.perf_counter()
    limit = job.planner_time_limit
    try:
        offsets = repo_code.run_planner(
            lookup(name), problem, root,
            time_limit=repo_code.PLANNER_TIME_LIMIT if limit is None else float(limit),
        )
    except repo_code.RepoCodeError as exc:
        return {"error": str(exc)}
    return {"offsets": offsets, "seconds": time.perf_counter() - started}


def run_compile(job: JobSpec) -> list[StrategyReport]:
    """Plan, build, check and measure; with ``imported``, from the import phase's folder."""
    from planner.tvm.measure import memory

    # One warm measuring process for the whole job (every strategy at every point), and for
    # no other job; started first thing, forked from this process as it imports TVM where
    # main() preloaded the shim, so that it is ready when the first build is.
    with memory.MeasuringProcess() as measurer:
        if _measures_host_memory(job):
            measurer.start()
        return _run_compile(job, measurer)


def _measures_host_memory(job: JobSpec) -> bool:
    return job.check_locally and (job.memory_configs is None or bool(job.memory_configs))


def _run_compile(job: JobSpec, measurer) -> list[StrategyReport]:
    from planner.tvm.compile import compile_model
    from planner.tvm.sources import ModelSource

    if job.cuda is not None:
        from planner.tvm.build import cuda

        # Before any figure: a child that cannot reach the GPU says why, in the driver's
        # words and with the limits it ran under, instead of TVM's guess at a cause.
        failure = cuda.initialisation_failure() if job.check_locally else ""
        if failure:
            return _failed(job, failure)
    source = ModelSource(job.source, job.params, moe=job.moe)
    imported = None
    if job.imported:
        from planner.tvm.llm import handover as llm_imported

        if llm_imported.is_deployment(Path(job.imported)):
            try:
                return _compile_deployments(job, measurer)
            finally:
                measurer.close()
    if job.imported:
        from planner.tvm.sources.handover import ImportedError, load_imported

        try:
            imported = load_imported(Path(job.imported), name=job.model)
        except ImportedError as exc:
            return _failed(job, f"the repository's process handed over {exc}")
    options: dict = {
        "target": _target_of(job),
        "repeat": job.repeat,
        "lift_temporaries": job.lift_temporaries,
        "check_locally": job.check_locally,
        "artifacts_dir": job.artifacts_dir,
        # The draws the import phase ran the framework on (see _reference).
        "seed": job.seed,
    }
    if job.memory_configs is not None:
        options["memory_configs"] = tuple(job.memory_configs)
    if job.planner_time_limit is not None:
        options["planner_time_limit"] = job.planner_time_limit
    if imported is not None:
        network = imported.network
        if job.pipeline:
            from planner.tvm.compile import after_pipeline

            # Known from the job, not from the folder: the import ran the pipeline.
            network = replace(network, framework=after_pipeline(network.framework))
        options.update(network=network, repo_plans=imported.plans)
    else:
        options.update(pipeline=job.pipeline, base_dir=job.base_dir)
    micro = asdict(job.micro) if job.micro is not None else None
    if micro is not None:
        from planner.tvm.micro import report as micro_report

        options.update(micro_report.compile_options(options))
    options["measurer"] = measurer
    try:
        if job.shapes is not None:
            reports = _compile_shapes(source, job, options)
        else:
            reports = compile_model(source, job.strategies, model_name=job.model, **options)
    except Exception as exc:  # a model that does not build is a failed Result per strategy
        logging.getLogger(__name__).exception("model %s failed to build", job.model)
        return _failed(job, failure_text(exc, "build"))
    finally:
        measurer.close()
    if micro is not None:
        unbound = None
        if imported is not None:
            from planner.tvm.sources.handover import ImportedError, load_imported

            try:
                unbound = load_imported(
                    Path(job.imported), name=job.model, unbound=True
                ).network
            except ImportedError as exc:
                for report in reports:
                    report.error = report.error or f"micro board: {exc}"
                return reports
        if job.shapes is None:
            micro_report.run_on_board(
                reports,
                source,
                micro,
                model_name=job.model,
                artifacts_dir=job.artifacts_dir,
                base_dir=None if imported is not None else job.base_dir,
                pipeline="" if imported is not None else job.pipeline,
                network=unbound,
            )
        else:
            _micro_points(reports, source, micro, job, unbound)
    if job.cuda is not None and job.cuda.measure_memory and job.check_locally:
        _measure_cuda_memory(reports, job.cuda.arch)
    return reports


def _compile_deployments(job: JobSpec, measurer) -> list[StrategyReport]:
    """An LLM deployment the import handed over, at each point: every function planned,
    built, checked and measured under each strategy
    (:func:`planner.tvm.llm.deployment.compile_deployment`), a report per strategy and point."""
    from planner.tvm.build.kernels import KernelLibraries
    from planner.tvm.llm import deployment as llm
    from planner.tvm.llm import handover as llm_imported
    from planner.tvm.sources.handover import ImportedError
    from planner.tvm.strategies import REPO_PREFIX

    folder = Path(job.imported)
    expected = list(ShapeAxis.from_json(job.shapes).points) if job.shapes else [{}]
    try:
        points, unbuilt = llm_imported.index(folder)
    except ImportedError as exc:
        return _failed(job, f"the repository's process handed over {exc}")
    if points != expected:
        return _failed(job, "the repository's process handed over other points than the job's")
    if job.micro is not None or job.cuda is not None or not job.check_locally:
        # Only the CPU runs, checks and measures a deployment in the compiling process
        # here; its CUDA build (compile_deployment with a cuda target) is not measured yet.
        return _failed(job, "LLM deployments are tracked on the cpu board only, so far")
    planned = [s for s in job.strategies if not s.startswith(REPO_PREFIX)]
    libraries = KernelLibraries()  # the cache's kernels, built once for every point
    reports = []
    # What TVM's planner reserves when the deployment is built once for the largest prefill
    # chunk (its bound, as MLC-LLM compiles it), whatever the chunk then run: the
    # over-allocation of upper-bound planning at each smaller point.
    reserved = None
    largest = max((p for i, p in enumerate(points) if i not in unbuilt), key=_chunk_then_context)
    for index, point in enumerate(points):
        by_strategy: dict[str, StrategyReport] = {}
        error = unbuilt.get(index, "")
        if not error:
            try:
                deployment = llm_imported.load(folder, index, point, name=job.model)
                report = llm.compile_deployment(
                    deployment, planned, target=_target_of(job), repeat=job.repeat,
                    seed=job.seed, measure=job.memory_configs is None or bool(job.memory_configs),
                    libraries=libraries, measurer=measurer,
                )
            except ImportedError as exc:
                error = f"the repository's process handed over {exc}"
            except Exception as exc:  # a deployment that does not build fails its point
                logging.getLogger(__name__).exception("model %s failed to build", job.model)
                error = failure_text(exc, "build")
            else:
                for result in llm.strategy_reports(report, planned, model=job.model,
                                                   point=point):
                    result.model_source = job.source
                    by_strategy[result.strategy] = result
                if point == largest:
                    reserved = report.tvm_estimate_bytes or None
                error = ("a repository planner plans one function's problem; an LLM "
                         "deployment's functions are planned by Peakwatch's strategies only")
        reports.extend(
            by_strategy.get(name) or StrategyReport.failed(
                job.model, name, error, model_source=job.source, shape_point=dict(point)
            )
            for name in job.strategies
        )
    if reserved is not None and len(points) > 1:
        for report in reports:
            if report.ok:
                report.reserved_at_bound_bytes = reserved
    return reports


def _chunk_then_context(point: dict[str, int]) -> tuple[int, int]:
    return point.get("prefill_chunk", 0), point.get("context_window", 0)


def _target_of(job: JobSpec) -> str:
    """The job's target, with a CUDA job's architecture in it: the board names it, and
    nothing falls back to asking whatever GPU this host has."""
    if job.cuda is None:
        return job.target
    from planner.tvm.build import cuda

    return cuda.target_json(job.target, job.cuda.arch)


def _micro_points(reports, source, micro: dict, job: JobSpec, unbound) -> None:
    """Firmware per shape point: a board runs one static shape, so each point's builds are
    exported, built and run with the network specialised to it."""
    from planner.report import point_folder
    from planner.shapes import label
    from planner.tvm.micro import report as micro_report
    from planner.tvm.shape_axis import specialise
    from planner.tvm.sources import build_network

    root = Path(job.base_dir) if job.base_dir else None
    if unbound is None:
        unbound = build_network(source, base_dir=root, axis=ShapeAxis.from_json(job.shapes))
    by_point: dict[str, list] = {}
    for report in reports:
        by_point.setdefault(label(report.shape_point), []).append(report)
    for group in by_point.values():
        point = group[0].shape_point
        artifacts = job.artifacts_dir
        micro_report.run_on_board(
            group,
            source,
            micro,
            model_name=job.model,
            artifacts_dir=point_folder(Path(artifacts), point) if artifacts else None,
            base_dir=None if job.imported else root,
            pipeline="" if job.imported else job.pipeline,
            network=specialise(unbound, point),
        )


def _compile_shapes(source, job: JobSpec, options: dict):
    """One report per (strategy, point) of the job's shape axis (``ShapeAxis.to_json()``)."""
    from planner.tvm.shape_axis import compile_shapes

    axis = ShapeAxis.from_json(job.shapes)
    return compile_shapes(source, job.strategies, axis, model_name=job.model, **options)


def _measure_cuda_memory(reports: list[StrategyReport], arch: str | None = None) -> None:
    """Device memory of each build, measured here: the worker never runs a model itself.

    Measured under TVM's naive allocator: each storage is one ``cudaMalloc`` of its bytes,
    so the measured peak compares with the planned bytes to the byte.
    """
    import copy
    import subprocess

    from planner import npz_files
    from planner.tvm.measure import cuda_memory

    # Strategies whose plans came out the same share one build, exported to identical
    # files (planner.tvm.compile): each distinct library is measured once.
    measured: dict[tuple, dict] = {}
    for report in reports:
        library = report.artifacts.get("model.so")
        if not report.ok or not library or not report.inputs_file:
            continue
        try:
            key = (_digest(Path(library)), report.inputs_file, report.entry)
        except OSError as exc:
            report.measured = {"cuda": {"error": str(exc)}}
            continue
        if key in measured:
            figures = copy.deepcopy(measured[key])
        else:
            try:
                inputs = npz_files.positional(npz_files.load_arrays(report.inputs_file))
            except npz_files.UnsafeArrays as exc:
                report.measured = {"cuda": {"error": str(exc)}}
                continue
            try:
                figures = cuda_memory.measure(
                    Path(library), inputs, entry=report.entry, memory_cfg="naive", arch=arch
                )
            except (cuda_memory.MeasurementError, OSError, subprocess.TimeoutExpired) as exc:
                report.measured = {"cuda": {"error": str(exc)}}
                continue
            measured[key] = copy.deepcopy(figures)
        report.measured = {"cuda": figures}
        if figures["untracked_allocations"]:
            # The counter's table overflowed: its live and peak bytes miss those allocations.
            report.warnings.append(
                f"CUDA device memory: {figures['untracked_allocations']} allocations went "
                "past the counter, so no measured peak is given"
            )
            continue
        report.measured_peak_bytes = figures["peak_bytes"]
        if report.intermediate_bytes is not None:
            # GPU kernels' global temporaries are not estimated before the build: what the
            # workspace pool took is counted, and is part of what the build needs.
            report.kernel_workspace_bytes = figures["workspace_bytes"]
            report.kernel_workspace_source = "measured"
            report.planned_bytes = (
                report.intermediate_bytes + figures["workspace_bytes"]
                + (report.output_bytes or 0)
            )


def _digest(path: Path) -> str:
    import hashlib

    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _checkout_on_path(root: str) -> None:
    """Make the checkout's own modules importable by its model files, first on the path as
    when its files run as scripts, but never in place of Peakwatch's packages: ``planner``
    is imported already (this module is in it), and the job needs no other."""
    sys.path[:] = [p for p in sys.path if p not in ("", ".", root)]
    sys.path.insert(0, root)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    job = JobSpec.from_json(json.loads(Path(argv[0]).read_text()))
    if job.phase == "compile" and _measures_host_memory(job):
        from planner.tvm.measure import memory

        # Before any thread starts: this process runs again with the memory shim preloaded,
        # idle, and its measuring process is forked from it after TVM is imported, rather
        # than started fresh to import TVM a second time.
        memory.preload_idle_shim()
    if job.phase == "import" and job.base_dir:
        _checkout_on_path(job.base_dir)
    reports = run(job)
    for report in reports:
        # Failed reports too: the worker records each under the toolchain it asked for.
        report.environment["toolchain"] = job.toolchain
    Path(argv[1]).write_text(json.dumps([r.to_json() for r in reports], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
