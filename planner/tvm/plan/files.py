"""A plan's artifacts: ``plan.json``, ``problem.csv`` (and the merged problem a +rewrites
plan solved), ``timeline.svg`` and the planned module as TVMScript."""

from __future__ import annotations

import json
from pathlib import Path

from planner.problem import write_csv
from planner.report import StrategyReport, slug
from planner.timeline import render_svg
from planner.tvm.plan.extract import temporary_kernel
from planner.tvm.plan.strategy import PlannedStrategy


def artifact_folder(root: Path, report: StrategyReport) -> Path:
    """Where a strategy's artifacts of a model go, made if missing."""
    folder = root / slug(report.model) / slug(report.strategy)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _role_of(tensor) -> str:
    """``temporary`` for a kernel's temporary lifted into the plan (named ``kernel.buffer``),
    else ``intermediate``; outputs are listed apart."""
    return "temporary" if temporary_kernel(tensor.name) else "intermediate"


def write_plan_files(root: Path, build: PlannedStrategy) -> None:
    report = build.report
    extraction = build.extraction
    folder = artifact_folder(root, report)
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
