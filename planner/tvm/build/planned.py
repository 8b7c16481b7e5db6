"""One strategy's plan built: the executable, and the figures only the build knows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tvm

from planner.tvm.build import execute
from planner.tvm.build.kernels import KernelLibraries, library_of
from planner.tvm.plan import lowering, workspace
from planner.tvm.plan.extract import bindings_of
from planner.tvm.plan.kernel_temps import symbol_bounds
from planner.tvm.plan.peak import peak_breakdown
from planner.tvm.plan.strategy import PlannedStrategy


@dataclass
class Build(PlannedStrategy):
    """A strategy's plan built: its executable and, once exported, its ``model.so``."""

    executable: object = None
    library: Path | None = None


def build_planned(
    planned: PlannedStrategy, target: tvm.target.Target, libraries: KernelLibraries | None
) -> Build:
    """``planned``'s module through the rest of TVM's pipeline (its planner left out) and
    built; the report gets what the build holds: the arena, the kernel workspace counted from
    the built kernels, planned bytes and the peak."""
    report, offsets, extraction, arena = (
        planned.report, planned.offsets, planned.extraction, planned.arena
    )
    final = lowering.finish_lowering(planned.module, target, stock_planner=False)
    executable = execute.build(final, target, libraries)
    report.intermediate_bytes = arena
    counted = _counted_workspace(
        planned.module, extraction.function, executable, report.shape_bounds
    )
    if counted is not None:
        report.kernel_workspace_bytes, report.kernel_workspace_source = counted, "counted"
    # Intermediates, kernel workspace and outputs, so that builds that leave kernel
    # temporaries to TVM's pool compare with builds that plan them. The pool's size is
    # counted from the built kernels, else the static estimate; measured or not, the same
    # (see planner.tvm.measure.builds).
    report.planned_bytes = arena + report.kernel_workspace_bytes + (report.output_bytes or 0)
    report.peak = peak_breakdown(extraction, offsets)
    return Build(
        report, planned.module, offsets, extraction, planned.merged, arena, executable=executable
    )


def _counted_workspace(
    planned: tvm.IRModule, entry: str, executable, bounds: dict[str, int]
) -> int | None:
    """What TVM's CPU workspace pool holds for ``executable``'s kernels, replayed in the
    order ``planned``'s ``entry`` calls them (:mod:`planner.tvm.plan.workspace`), each call's
    symbolic sizes at the function's upper ``bounds`` (read before the VM's lowering, where
    the calls still carry their arguments' shapes); None where its kernels' requests were
    not read (another target, a kernel that cannot be counted)."""
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
