"""A CUDA GPU: its architecture, TVM's CUDA target for it, and the CUDA C of a model.

Relax kernels need GPU schedules, which :mod:`tvm.s_tir.dlight`'s default rules give (TVM's
own CUDA pipeline applies the same rules after fusion). Device memory is measured by
:mod:`planner.tvm.cuda_memory`.
"""

from __future__ import annotations

import subprocess

import tvm

#: Compiled for when no device says otherwise (an offline board still has a cache key).
DEFAULT_ARCH = "sm_80"

_ARCH: list[str | None] = []


def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0, or None when TVM sees no CUDA device."""
    dev = tvm.cuda(0)
    if not dev.exist:
        return None
    major, minor = str(dev.compute_version).split(".")[:2]
    return f"sm_{major}{minor}"


def cached_arch() -> str | None:
    # Querying the driver costs a CUDA context; a worker's GPU does not change under it.
    if not _ARCH:
        _ARCH.append(device_arch())
    return _ARCH[0]


def cuda_target(arch: str | None = None):
    return tvm.target.Target({"kind": "cuda", "arch": arch or device_arch() or DEFAULT_ARCH})


def total_memory() -> int | None:
    dev = tvm.cuda(0)
    return int(dev.total_global_memory) if dev.exist else None


def gpu_info() -> dict:
    """What the boards page shows of device 0; empty without one."""
    dev = tvm.cuda(0)
    if not dev.exist:
        return {}
    return {
        "name": dev.device_name,
        "compute_version": dev.compute_version,
        "total_memory": dev.total_global_memory,
        "driver": _driver_version(),
    }


def kernel_source(model, target=None) -> str:
    """The CUDA C of ``model``'s kernels, built by TVM's stock CUDA pipeline.

    Needs neither a GPU nor nvcc: code generation stops at source until a module is loaded.
    """
    from tvm import relax
    from tvm.relax.backend.cuda import pipeline as cuda_pipeline

    from planner.tvm.zoo import build_network

    target = target or cuda_target()
    network = build_network(model)
    executable = relax.build(
        network.mod, target, relax_pipeline=cuda_pipeline.get_default_pipeline(target)
    )
    sources = [
        module.inspect_source()
        for module in _modules(executable.mod)
        if getattr(module, "kind", "") == "cuda"
    ]
    return "\n".join(sources)


def _modules(module):
    yield module
    for imported in module.imports:
        yield from _modules(imported)


def _driver_version() -> str:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
