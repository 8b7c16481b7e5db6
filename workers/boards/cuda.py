"""A CUDA GPU attached to the worker's host.

The target is TVM's ``cuda`` with the architecture of device 0 (:mod:`planner.tvm.cuda`).
Latency is ``time_evaluator`` on the device, which synchronises it around each sample.
Memory: the posix_memalign shim sees no device memory, so each build's drop in free device
memory around one inference is measured with ``cudaMemGetInfo``
(:mod:`planner.tvm.cuda_memory`), next to the planned arena, in the sandboxed compile
(with the host's devices), never in the worker.

A worker on a host without a usable GPU reports the board offline (its Board row says why,
and a run sent to it fails with "board offline: ..." on every Result) instead of crashing.
"""

from __future__ import annotations

import json
import logging

from planner.report import BoardFigures
from workers.boards.base import BoardRunner, Health

log = logging.getLogger(__name__)


class CudaBoard(BoardRunner):
    kind = "cuda"
    needs_devices = True

    @property
    def target(self) -> str:
        from planner.tvm import cuda

        if self.config.target_string:
            return self.config.target_string
        return json.dumps({"kind": "cuda", "arch": cuda.cached_arch() or cuda.DEFAULT_ARCH})

    def board_health(self) -> Health:
        from planner.tvm import cuda

        try:
            arch = cuda.cached_arch()
        except Exception as exc:  # a broken driver is an offline board, not a crash
            return Health(False, f"no CUDA device: {type(exc).__name__}: {exc}")
        if arch is None:
            return Health(False, "no CUDA device (tvm.cuda(0).exist is False on this host)")
        return Health(True)

    def describe(self) -> dict:
        from planner.tvm import cuda

        info = super().describe()
        try:
            gpu = cuda.gpu_info()
            if gpu:
                info["gpu"] = gpu
        except Exception as exc:
            info["gpu"] = {"error": str(exc)}
        return info

    @property
    def memory_capacity(self) -> int | None:
        from planner.tvm import cuda

        if self.config.memory_capacity:
            return self.config.memory_capacity
        try:
            return cuda.total_memory()
        except Exception:
            return None

    def compile_options(self, job) -> dict:
        return {
            "repeat": job.repeat,
            # Kernel temporaries of GPU kernels live in shared and local memory, which a
            # device arena cannot hold; and the host allocator shim sees no GPU bytes.
            "lift_temporaries": False,
            "memory_configs": [],
            # Measured in the sandboxed compile, beside the build: the worker never runs a
            # model itself, and its environment holds secrets.
            "cuda_memory": True,
        }

    def after_compile(self, job, reports) -> None:
        from planner.tvm import cuda

        for report in reports:
            report.board = BoardFigures(kind=self.kind, figures={"arch": cuda.cached_arch()})
