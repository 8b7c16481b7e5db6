"""TVM's default Relax pipeline, split where memory planning happens.

TVM's own pipeline (``relax.backend.cpu_generic.pipeline``) runs dispatch, legalisation and
fusion, then the dataflow lowering that ends with ``CallTIRRewrite``, then the finalisation
that starts with ``StaticPlanBlockMemory``. We stop between the two: at that point every
operator output is an explicit ``relax.builtin.alloc_tensor`` and nothing is shared yet.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline
from tvm.relax.backend.cuda import pipeline as cuda_pipeline


def _backend(target: tvm.target.Target):
    # GPU kernels need thread bindings, which only the CUDA pipeline's schedules add.
    return cuda_pipeline if target.kind.name == "cuda" else cpu_pipeline


def lower_to_allocations(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """Run TVM's passes up to (and including) ``CallTIRRewrite``."""
    backend = _backend(target)
    passes = (
        backend.library_dispatch_passes(target)
        + backend.legalize_passes(target)
        + backend.dataflow_lower_passes(target)
    )
    with target:
        return tvm.transform.Sequential(passes)(mod)


def finish_lowering(
    mod: tvm.IRModule, target: tvm.target.Target, *, stock_planner: bool
) -> tvm.IRModule:
    """Run TVM's finalisation passes, with or without its own memory planner."""
    passes = _backend(target).finalize_passes(target)
    if not stock_planner:
        passes = [p for p in passes if p.info.name != "StaticPlanBlockMemory"]
    with target:
        return tvm.transform.Sequential(passes)(mod)


def plan_with_stock_planner(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """Only TVM's ``StaticPlanBlockMemory``, so its storages can be counted."""
    with target:
        return relax.transform.StaticPlanBlockMemory()(mod)
