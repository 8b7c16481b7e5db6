"""The child side of a sandboxed compile: ``python -m planner.tvm.job JOB.json OUT.json``.

A worker's compile runs this module twice, each time in a sandbox of its own, and trusts
only the second (the README's "Trust boundary"):

- ``phase = "import"`` runs the repository's code: it builds the model (a model file, an
  ONNX file, a zoo entry), runs the repository's pipeline and planners, and writes what it
  built into ``job["out"]`` (:func:`planner.tvm.imported.save_imported`). OUT.json is an
  empty list, or one failed report per strategy saying why the model could not be built.
- ``phase = "compile"`` imports nothing of the repository. It reads that folder back
  (:func:`planner.tvm.imported.load_imported`, every field checked) and plans, builds,
  checks and measures: every figure of a report comes from here. A micro job (a ``micro``
  key: ``board`` and/or ``machine``, optional ``sram_bytes`` and ``flash_bytes``) is also
  exported, built and run on the emulated board here (:mod:`planner.tvm.micro.report`);
  ``cuda_memory`` measures a CUDA build's device memory here, beside the GPU.

A job without a phase does both in one process (the command line's way, for code the user
runs on purpose). The interpreter that runs this module is the toolchain's
(:mod:`planner.tvm.toolchain`): its TVM is the one imported here, and each report names the
job's ``toolchain`` spec.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from planner.report import StrategyReport


def run(job: dict) -> list[StrategyReport]:
    phase = job.get("phase", "")
    if phase == "import":
        return run_import(job)
    if phase not in ("", "compile"):
        raise ValueError(f"unknown phase {phase!r}")
    return run_compile(job)


def _failed(job: dict, error: str) -> list[StrategyReport]:
    return [
        StrategyReport.failed(job["model"], strategy, error, model_source=job["source"])
        for strategy in job["strategies"]
    ]


def run_import(job: dict) -> list[StrategyReport]:
    """Build the model with the repository's code and hand it over (see the docstring)."""
    from dataclasses import replace

    from planner.shapes import ShapeAxis
    from planner.tvm import lowering, repo_code
    from planner.tvm.compile import imported_network, planning_problem
    from planner.tvm.imported import save_imported
    from planner.tvm.shape_axis import check_symbols, plan_key, specialise
    from planner.tvm.strategies import REPO_PREFIX, lookup
    from planner.tvm.zoo import ModelSource, build_network

    source = ModelSource(job["source"], job.get("params") or {})
    root = Path(job["base_dir"]) if job.get("base_dir") else None
    pipeline = job.get("pipeline", "")
    seed = int(job.get("seed", 0))
    try:
        target = lowering.make_target(job.get("target", "llvm"))
        bound = imported_network(source, target, base_dir=root, pipeline=pipeline, seed=seed)
        unbound = None
        if job.get("micro") is not None:
            # A micro board keeps the weights apart from the model (in flash), so it gets
            # the network with its weights as inputs, through the same pipeline.
            unbound = build_network(source, base_dir=root)
            if pipeline:
                mod = repo_code.run_pipeline(unbound.mod, pipeline, root, target)
                unbound = replace(unbound, mod=mod)
        plans = {}
        repo = [s for s in job["strategies"] if s.startswith(REPO_PREFIX)]
        points: list[dict] = [{}] if repo else []
        if repo and job.get("shapes") is not None:
            axis = ShapeAxis.from_json(job["shapes"])
            check_symbols(bound, axis)
            points = list(axis.points)
        for point in points:
            problem = planning_problem(
                specialise(bound, point) if point else bound, target,
                lift_temporaries=job.get("lift_temporaries"),
            )
            for name in repo:
                plans[plan_key(name, point)] = _repo_plan(
                    name, problem, root, job, lookup, repo_code
                )
        save_imported(bound, Path(job["out"]), unbound=unbound, plans=plans)
    except Exception as exc:  # a model that does not build is a failed Result per strategy
        logging.getLogger(__name__).exception("model %s failed to build", job["model"])
        return _failed(job, f"{type(exc).__name__}: {exc}")
    return []


def _repo_plan(name, problem, root, job, lookup, repo_code) -> dict:
    import time

    started = time.perf_counter()
    try:
        offsets = repo_code.run_planner(
            lookup(name), problem, root,
            time_limit=float(job.get("planner_time_limit", repo_code.PLANNER_TIME_LIMIT)),
        )
    except repo_code.RepoCodeError as exc:
        return {"error": str(exc)}
    return {"offsets": offsets, "seconds": time.perf_counter() - started}


def run_compile(job: dict) -> list[StrategyReport]:
    """Plan, build, check and measure; with ``imported``, from the import phase's folder."""
    from planner.tvm.compile import compile_model
    from planner.tvm.zoo import ModelSource

    source = ModelSource(job["source"], job.get("params") or {})
    imported = None
    if job.get("imported"):
        from planner.tvm.imported import ImportedError, load_imported

        try:
            imported = load_imported(Path(job["imported"]), name=job["model"])
        except ImportedError as exc:
            return _failed(job, f"the repository's process handed over {exc}")
    options = {
        key: job[key]
        for key in (
            "target",
            "repeat",
            "lift_temporaries",
            "check_locally",
            "pipeline",
            "planner_time_limit",
            "artifacts_dir",
            "base_dir",
        )
        if key in job
    }
    if "memory_configs" in job:
        options["memory_configs"] = tuple(job["memory_configs"])
    micro = job.get("micro")
    if imported is not None:
        options.update(network=imported.network, repo_plans=imported.plans)
        for key in ("pipeline", "base_dir"):
            options.pop(key, None)
    if micro is not None:
        from planner.tvm.micro import report as micro_report

        options.update(micro_report.compile_options(options))
    try:
        if job.get("shapes") is not None:
            reports = _compile_shapes(source, job, options)
        else:
            reports = compile_model(source, job["strategies"], model_name=job["model"], **options)
    except Exception as exc:  # a model that does not build is a failed Result per strategy
        logging.getLogger(__name__).exception("model %s failed to build", job["model"])
        return _failed(job, f"{type(exc).__name__}: {exc}")
    if micro is not None:
        unbound = None
        if imported is not None:
            from planner.tvm.imported import ImportedError, load_imported

            try:
                unbound = load_imported(
                    Path(job["imported"]), name=job["model"], unbound=True
                ).network
            except ImportedError as exc:
                for report in reports:
                    report.error = report.error or f"micro board: {exc}"
                return reports
        if job.get("shapes") is None:
            micro_report.run_on_board(
                reports,
                source,
                micro,
                model_name=job["model"],
                artifacts_dir=job.get("artifacts_dir"),
                base_dir=None if imported is not None else job.get("base_dir"),
                pipeline="" if imported is not None else job.get("pipeline", ""),
                network=unbound,
            )
        else:
            _micro_points(reports, source, micro, job, unbound)
    if job.get("cuda_memory"):
        _measure_cuda_memory(reports)
    return reports


def _micro_points(reports, source, micro: dict, job: dict, unbound) -> None:
    """Firmware per shape point: a board runs one static shape, so each point's builds are
    exported, built and run with the network specialised to it."""
    from planner.report import point_folder
    from planner.shapes import label
    from planner.tvm.micro import report as micro_report
    from planner.tvm.shape_axis import specialise
    from planner.tvm.zoo import build_network

    root = Path(job["base_dir"]) if job.get("base_dir") else None
    if unbound is None:
        unbound = build_network(source, base_dir=root)
    by_point: dict[str, list] = {}
    for report in reports:
        by_point.setdefault(label(report.shape_point), []).append(report)
    for group in by_point.values():
        point = group[0].shape_point
        artifacts = job.get("artifacts_dir")
        micro_report.run_on_board(
            group,
            source,
            micro,
            model_name=job["model"],
            artifacts_dir=point_folder(Path(artifacts), point) if artifacts else None,
            base_dir=None if job.get("imported") else root,
            pipeline="" if job.get("imported") else job.get("pipeline", ""),
            network=specialise(unbound, point),
        )


def _compile_shapes(source, job: dict, options: dict):
    """One report per (strategy, point) of the job's shape axis (``ShapeAxis.to_json()``)."""
    from planner.shapes import ShapeAxis
    from planner.tvm.shape_axis import compile_shapes

    axis = ShapeAxis.from_json(job["shapes"])
    return compile_shapes(source, job["strategies"], axis, model_name=job["model"], **options)


def _measure_cuda_memory(reports: list[StrategyReport]) -> None:
    """Device memory of each build, measured here: the worker never runs a model itself."""
    import subprocess

    from planner import npz_files
    from planner.tvm import cuda_memory

    for report in reports:
        library = report.artifacts.get("model.so")
        if not report.ok or not library or not report.inputs_file:
            continue
        try:
            inputs = npz_files.positional(npz_files.load_arrays(report.inputs_file))
        except npz_files.UnsafeArrays as exc:
            report.measured = {"cuda": {"error": str(exc)}}
            continue
        try:
            figures = cuda_memory.measure(Path(library), inputs, entry=report.entry)
        except (cuda_memory.MeasurementError, OSError, subprocess.TimeoutExpired) as exc:
            report.measured = {"cuda": {"error": str(exc)}}
            continue
        report.measured = {"cuda": figures}
        report.measured_peak_bytes = figures["inference_bytes"]


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    job = json.loads(Path(argv[0]).read_text())
    reports = run(job)
    for report in reports:
        # Failed reports too: the worker records each under the toolchain it asked for.
        report.environment["toolchain"] = job.get("toolchain", "")
    Path(argv[1]).write_text(json.dumps([r.to_json() for r in reports], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
