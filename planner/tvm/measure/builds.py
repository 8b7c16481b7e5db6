"""A compile's builds measured in the job's measuring process while the next ones build."""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import tvm

from planner.report import StrategyReport
from planner.tvm.build import execute
from planner.tvm.build.export import export_model_library
from planner.tvm.build.kernels import (
    KernelLibraries,
    library_of,
    load_executable,
    save_executable,
)
from planner.tvm.build.planned import Build
from planner.tvm.measure import memory

log = logging.getLogger(__name__)


class BuildMeasurements:
    """The memory measurement of one compile's builds, in the job's measuring process.

    Each distinct build asked for is written out as soon as it is built, in a thread of its
    own, and handed to the measuring process, which measures it under every allocator: both
    go on while the next strategies build. Where artifacts are kept, what is written is the
    build's ``model.so`` (the artifact itself, exported once per distinct build); otherwise
    its executable alone, beside its kernel library exported once, whichever builds use it.
    The same files give the check its VMs, so the kernels are loaded, never JIT-compiled,
    in this process too (a JIT compile beside that thread's exports would use one LLVM
    module from two threads at once). The timing waits until all of it is done. The
    reference build of a compile that did not ask for tvm-stock is written out for the
    check alone, not kept or measured.
    """

    def __init__(self, measurer, libraries: KernelLibraries, folder: Path, inputs, entry,
                 configs: Sequence[str], *, artifacts: Path | None = None, fcompile=None):
        self.measurer, self.libraries, self.entry = measurer, libraries, entry
        #: Where each build's ``model.so`` goes (kept artifacts only), and the file of each
        #: executable exported so far, which strategies sharing it copy.
        self.artifacts, self.fcompile = artifacts, fcompile
        self.copies: dict[int, Path] = {}
        self.configs = tuple(configs)
        self.folder = folder / "measured"
        self.folder.mkdir(exist_ok=True)
        self.arrays = self.folder / "inputs.npz"
        np.savez(self.arrays, *inputs)
        # Saving and exporting write files and run the C compiler, both outside the GIL.
        self._saver = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="save")
        #: By executable: (file, kernel library or None) once written, None where writing
        #: failed, and the pending figures by allocator.
        self.saved: dict[int, Future] = {}
        self.pending: dict[int, dict[str, Future]] = {}
        self._starting = threading.Lock()

    def start(self, build: Build, *, keep: bool = True) -> None:
        """Write ``build`` out and measure it; ``keep``: a strategy asked for (else the
        reference alone, written out for the check only, neither kept nor measured)."""
        same = id(build.executable)
        if not build.report.ok or build.executable is None:
            return
        with self._starting:  # strategies build in two threads (planner.tvm.compile)
            if same in self.saved:
                if keep and self.artifacts is not None:
                    # The same build under another strategy: a copy of its model.so.
                    self._saver.submit(export_model_library, self.artifacts, build, self.copies)
                return
            path = self.folder / f"executable-{len(self.saved)}.vm"
            self.saved[same] = self._saver.submit(self._save, build, path, same, keep)

    def _save(self, build: Build, path: Path, same: int, keep: bool):
        library = None
        kernels = None
        if keep and self.artifacts is not None:
            export_model_library(
                self.artifacts, build, self.copies, fcompile=self.fcompile,
                libraries=self.libraries, scratch=self.folder,
            )
            if build.library is None:
                return None
            path = build.library
        else:
            try:
                library = library_of(build.executable)
                kernels = self.libraries.files(library, self.folder) if library else None
                save_executable(build.executable, path)
            except Exception as exc:  # a missing C compiler must not lose the other figures
                log.warning("could not save %s for measuring: %s", build.report.strategy, exc)
                return None
        if keep:
            self.pending[same] = {
                config: self.measurer.submit(
                    path, self.arrays, kernels=kernels, entry=self.entry, memory_cfg=config
                )
                for config in self.configs
            }
        return path, library

    def loader(self, build: Build, dev):
        if getattr(build.executable, "kernels_loaded", False):
            # Linked to its library's loaded shared object: nothing to wait for or load.
            return execute.load(build.executable, dev)
        saving = self.saved.get(id(build.executable))
        saved = saving.result() if saving is not None else None
        if saved is None:
            # JIT-compiling a kernel library while the saving thread exports it would
            # use one LLVM module from two threads: that thread finishes first.
            self._saver.shutdown(wait=True)
            return execute.load(build.executable, dev)
        path, library = saved
        if path.suffix == ".so":  # a whole model.so
            return execute.load(tvm.runtime.load_module(str(path)), dev)
        kernels = self.libraries.loaded(library) if library is not None else None
        return execute.load(load_executable(path, kernels), dev)

    def wait(self) -> None:
        self._saver.shutdown(wait=True)
        for futures in self.pending.values():
            concurrent.futures.wait(futures.values())

    def record(self, builds: dict[str, Build]) -> None:
        """Each build's figures, where its check passed; the figures derived from them."""
        self.wait()
        for build in builds.values():
            futures = self.pending.get(id(build.executable))
            if not build.report.ok or futures is None:
                continue
            for config, future in futures.items():
                try:
                    figures = copy.deepcopy(future.result())
                except (memory.MeasurementError, OSError) as exc:
                    figures = {"error": str(exc)}
                build.report.measured[config] = figures
        for build in builds.values():
            measured = build.report.measured
            pooled, naive = measured.get("pooled", {}), measured.get("naive", {})
            if "inference_peak_bytes" in pooled:
                build.report.measured_peak_bytes = pooled["inference_peak_bytes"]
            if "retained_bytes" in naive:
                # The naive allocator returns every storage; what it still holds after the
                # call is the outputs plus the kernel workspace pool, which is never
                # returned.
                workspace = max(0, naive["retained_bytes"] - (build.report.output_bytes or 0))
                # Beside planned bytes, never in them: planned bytes are a figure of the
                # build, the same measured or not (--no-memory) and on any machine, which an
                # alert at a threshold of 0 needs. Counted from the built kernels it is the
                # same figure; an estimate differs both ways.
                measured["workspace_bytes"] = workspace
                measured["weights_bytes"] = naive.get("weights_bytes")
            say_what_the_plan_missed(build.report)


#: How far TVM's pooled allocator may hold more than the plan before the Result says why:
#: its rounding of a few storages to 4 KB pages stays under it.
POOLED_SLACK = (1.1, 16 * 1024)


def say_what_the_plan_missed(report: StrategyReport) -> None:
    """A warning where the runtime held more than the plan accounts for (the naive
    allocator's peak, each allocation at its own size, above planned bytes), naming the part
    the plan did not see; and one where only TVM's pooled allocator did, saying why."""
    _say_what_the_pool_added(report)
    held = report.measured.get("naive", {}).get("inference_peak_bytes")
    if not isinstance(held, int) or report.planned_bytes is None or held <= report.planned_bytes:
        return
    pool = report.measured.get("workspace_bytes")
    if isinstance(pool, int) and pool > report.kernel_workspace_bytes:
        why = (
            f"TVM's workspace pool held {pool:,} B against {report.kernel_workspace_bytes:,} B "
            f"{'estimated' if report.kernel_workspace_source == 'estimate' else 'counted'}"
        )
        if report.kernel_workspace_source == "estimate":
            why += " (a kernel's requests could not be counted from the build)"
    else:
        why = "an allocation outside the plan and TVM's workspace pool"
    report.warnings.append(
        f"the runtime held {held:,} B (naive allocator), {held - report.planned_bytes:,} B "
        f"more than planned: {why}"
    )


def _say_what_the_pool_added(report: StrategyReport) -> None:
    """A warning where TVM's pooled allocator (the VM's default) held well above planned
    bytes while the naive one, each allocation at its own size, held no more: the plan
    bounds what the program allocates, and the pool's own keeping is what it adds."""
    pooled = report.measured.get("pooled", {}).get("inference_peak_bytes")
    naive = report.measured.get("naive", {}).get("inference_peak_bytes")
    planned = report.planned_bytes
    if not all(isinstance(v, int) for v in (pooled, naive, planned)):
        return
    factor, slack = POOLED_SLACK
    if naive > planned or pooled <= max(planned * factor, planned + slack):
        return
    report.warnings.append(
        f"TVM's pooled allocator held {pooled:,} B, {pooled / planned:.1f}x the "
        f"{planned:,} B planned, where the naive allocator held {naive:,} B: the pool rounds "
        "every storage up to whole 4 KB pages and keeps each freed storage for a later "
        "request of its own rounded size, so many small storages, or storages of many "
        "sizes freed at their last use, cost more there than the plan counts; run the VM "
        "with memory_cfg=\"naive\" or plan one arena (any strategy but tvm-stock) to hold "
        "the planned bytes"
    )
