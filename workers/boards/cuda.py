"""A CUDA GPU attached to the worker's host.

The target is TVM's ``cuda`` for one architecture, always named: the board's ``arch``
setting (or the ``arch`` of its ``target``), else the architecture of device 0 as the
board's check saw it. The compile never asks the device itself
(:func:`planner.tvm.build.cuda.compile_callback`), so a job does the same work on any host.

The board's check (:meth:`CudaBoard.board_health`) runs :mod:`planner.tvm.build.cuda`'s probe in
the job's own sandbox, with the job's limits and the GPU's device nodes, so "online" means
that a job can initialise CUDA; where it cannot, the board is offline with the driver's
reason and the limits in force, and a run sent to it fails every Result with them.

Latency is ``time_evaluator`` on the device, which synchronises it around each sample.
Memory: each build's device bytes are counted in the sandboxed compile, beside the GPU, by
interposing the CUDA allocation calls (:mod:`planner.tvm.measure.cuda_memory`): the peak of live
device bytes during one inference, split into the VM's storages, the kernel workspace and
the weights, to the byte.

Configured in ``PEAKWATCH_BOARDS`` where the default is not wanted::

    "a100": {"kind": "cuda", "arch": "sm_80", "memory_capacity": 42949672960}
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path

from planner.job_spec import CudaOptions, valid_arch
from planner.report import BoardFigures
from workers import sandbox
from workers.boards.base import BoardOptions, BoardRunner, Health

log = logging.getLogger(__name__)

#: How long one probe's answer stands: a board's health is asked once per run it serves.
PROBE_SECONDS = 60.0
_probes: dict[object, tuple[float, dict]] = {}
_probing = threading.Lock()


def runs_on(arch: str, device: str) -> bool:
    """Whether kernels built for ``arch`` load on a GPU of architecture ``device``."""
    suffixed = arch.endswith(("a", "f"))
    built, here = arch[3:].rstrip("af"), device[3:].rstrip("af")
    if suffixed:  # architecture-specific features: that exact chip only
        return built == here
    return built[:-1] == here[:-1] and built[-1] <= here[-1]


class CudaBoard(BoardRunner):
    kind = "cuda"
    needs_devices = True

    @property
    def configured_arch(self) -> str | None:
        """The architecture the board's settings name, if any."""
        arch = self.config.extra.get("arch")
        target = self.config.target
        if isinstance(target, dict) and target.get("arch"):
            arch = arch or target["arch"]
        return arch if valid_arch(arch) else None

    @property
    def arch(self) -> str:
        """What every kernel is built for: the settings', else device 0's as probed, else
        (a board that is offline anyway) the default, so it still has a cache key."""
        from planner.tvm.build import cuda

        return self.configured_arch or self.probe().get("arch") or cuda.DEFAULT_ARCH

    @property
    def target(self) -> str:
        from planner.tvm.build import cuda

        return cuda.target_json(self.config.target_string or "cuda", self.arch)

    def probe(self) -> dict:
        """:func:`planner.tvm.build.cuda.probe`, run as a job runs: sandboxed, same limits."""
        key = (self.limits, self.needs_devices)
        with _probing:
            cached = _probes.get(key)
            if cached and time.monotonic() - cached[0] < PROBE_SECONDS:
                return cached[1]
            try:
                with tempfile.TemporaryDirectory(prefix="peakwatch-cuda-probe-") as scratch:
                    answer = sandbox.run_probe(
                        "planner.tvm.build.cuda", Path(scratch), limits=self.limits, devices=True
                    )
            except sandbox.SandboxError as exc:
                answer = {"ok": False, "error": f"the sandboxed CUDA check failed: {exc}"}
            if not isinstance(answer.get("ok"), bool) or not isinstance(
                answer.get("error", ""), str
            ):
                answer = {"ok": False, "error": "the sandboxed CUDA check answered nonsense"}
            if answer.get("arch") is not None and not valid_arch(answer["arch"]):
                answer = {**answer, "arch": None}
            _probes[key] = (time.monotonic(), answer)
            return answer

    def board_health(self) -> Health:
        answer = self.probe()
        if not answer["ok"]:
            return Health(False, f"no CUDA device usable by a job: {answer.get('error', '')}")
        configured = self.configured_arch
        found = answer.get("arch")
        if configured and found and not runs_on(configured, found):
            # A cubin loads only on its own major version, at its minor version or later:
            # say so here rather than fail every Result with a module load error.
            return Health(
                False, f"the board is configured for {configured}, whose kernels cannot run "
                f"on this host's GPU ({found})",
            )
        return Health(True)

    def describe(self) -> dict:
        from planner.tvm.build import cuda

        info = super().describe()
        info["arch"] = self.arch
        # As the sandboxed check saw it: the worker itself never opens a CUDA context,
        # which would hold device memory for as long as it runs.
        answer = self.probe()
        info["gpu"] = {
            key: answer[key] for key in ("arch", "devices", "total_memory") if key in answer
        } or {"error": answer.get("error", "")}
        info["gpu"]["driver"] = cuda.driver_version()
        return info

    @property
    def memory_capacity(self) -> int | None:
        if self.config.memory_capacity:
            return self.config.memory_capacity
        total = self.probe().get("total_memory")
        return total if isinstance(total, int) and total > 0 else None

    def compile_options(self, job) -> BoardOptions:
        return BoardOptions(
            # Kernel temporaries of GPU kernels live in shared and local memory, which a
            # device arena cannot hold; and the host allocator shim sees no GPU bytes.
            lift_temporaries=False,
            memory_configs=(),
            # Counted in the sandboxed compile, beside the build: the worker never runs a
            # model itself, and its environment holds secrets.
            cuda=CudaOptions(arch=self.arch, measure_memory=True),
            devices=True,
        )

    def after_compile(self, job, reports) -> None:
        for report in reports:
            report.board = BoardFigures(kind=self.kind, figures={"arch": self.arch})
