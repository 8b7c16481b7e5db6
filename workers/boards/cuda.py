"""A CUDA GPU attached to the worker's host.

The target is TVM's ``cuda`` with the architecture of device 0 (``sm_XY`` from its compute
version); Relax kernels need GPU schedules, which :mod:`tvm.s_tir.dlight`'s default rules
give (TVM's own CUDA pipeline applies the same rules after fusion).

Latency is ``time_evaluator`` on the device, which synchronises it around each sample.
Memory: the posix_memalign shim sees no device memory, so each build's drop in free device
memory around one inference is measured with ``cudaMemGetInfo``
(:mod:`workers.boards.cuda_memory`), next to the planned arena.

A worker on a host without a usable GPU reports the board offline (its Board row says why,
and a run sent to it fails with "board offline: ..." on every Result) instead of crashing.
"""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

from workers.boards import cuda_memory
from workers.boards.base import BoardRunner, Health

log = logging.getLogger(__name__)

#: Compiled for when no device says otherwise (an offline board still has a cache key).
DEFAULT_ARCH = "sm_80"


def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0, or None when TVM sees no CUDA device."""
    import tvm

    dev = tvm.cuda(0)
    if not dev.exist:
        return None
    major, minor = str(dev.compute_version).split(".")[:2]
    return f"sm_{major}{minor}"


def cuda_target(arch: str | None = None):
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": arch or device_arch() or DEFAULT_ARCH})


def kernel_source(model, target=None) -> str:
    """The CUDA C of ``model``'s kernels, built by TVM's stock CUDA pipeline.

    Needs neither a GPU nor nvcc: code generation stops at source until a module is loaded.
    """
    from tvm import relax
    from tvm.relax.backend.cuda import pipeline as cuda_pipeline

    from planner.zoo import build_network

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


class CudaBoard(BoardRunner):
    kind = "cuda"

    @property
    def target(self) -> str:
        if self.config.target_string:
            return self.config.target_string
        return json.dumps({"kind": "cuda", "arch": _cached_arch() or DEFAULT_ARCH})

    def health(self) -> Health:
        try:
            arch = _cached_arch()
        except Exception as exc:  # a broken driver is an offline board, not a crash
            return Health(False, f"no CUDA device: {type(exc).__name__}: {exc}")
        if arch is None:
            return Health(False, "no CUDA device (tvm.cuda(0).exist is False on this host)")
        return Health(True)

    def describe(self) -> dict:
        info = super().describe()
        try:
            import tvm

            dev = tvm.cuda(0)
            if dev.exist:
                info["gpu"] = {
                    "name": dev.device_name,
                    "compute_version": dev.compute_version,
                    "total_memory": dev.total_global_memory,
                    "driver": _driver_version(),
                }
        except Exception as exc:
            info["gpu"] = {"error": str(exc)}
        return info

    @property
    def memory_capacity(self) -> int | None:
        if self.config.memory_capacity:
            return self.config.memory_capacity
        try:
            import tvm

            dev = tvm.cuda(0)
            return int(dev.total_global_memory) if dev.exist else None
        except Exception:
            return None

    def measure(
        self,
        *,
        model_name: str,
        source: str,
        params: dict,
        strategies: list[str],
        artifacts_dir: Path,
        repeat: int,
    ) -> list[dict]:
        from planner.zoo import ModelSource, build_network

        reports = self.compile(
            model_name=model_name, source=source, params=params, strategies=strategies,
            artifacts_dir=artifacts_dir, repeat=repeat,
            # Kernel temporaries of GPU kernels live in shared and local memory, which a
            # device arena cannot hold; and the host allocator shim sees no GPU bytes.
            lift_temporaries=False,
            memory_configs=(),
        )
        inputs = build_network(ModelSource(source, params)).random_inputs()
        for report in reports:
            report["board"] = {"kind": self.kind, "arch": _cached_arch()}
            library = (report.get("artifacts") or {}).get("model.so")
            if report.get("error") or not library:
                continue
            try:
                figures = cuda_memory.measure(Path(library), inputs)
            except (cuda_memory.MeasurementError, OSError, subprocess.TimeoutExpired) as exc:
                report["measured"] = {"cuda": {"error": str(exc)}}
                continue
            report["measured"] = {"cuda": figures}
            report["measured_peak_bytes"] = figures["inference_bytes"]
        return reports


_ARCH: list[str | None] = []


def _cached_arch() -> str | None:
    # Querying the driver costs a CUDA context; a worker's GPU does not change under it.
    if not _ARCH:
        _ARCH.append(device_arch())
    return _ARCH[0]


def _driver_version() -> str:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
