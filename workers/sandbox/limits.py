"""What a sandboxed job may use and how it is run (``PEAKWATCH["SANDBOX"]``), and the error
a job that hands back no reports ends in."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields


def default_threads() -> int:
    """Threads a job may run beyond its processes by default: four per core, for the thread
    pools that start one per core (TVM's runtime, PyTorch's, onnxruntime's), so that a
    model on a host with many cores is not refused threads a 2-core host never needs."""
    return 4 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class Limits:
    """What a sandboxed job may use, and how it is run (``PEAKWATCH["SANDBOX"]``)."""

    #: All the job's processes together; also each process's address space.
    memory_bytes: int = 8 << 30
    #: Each process's CPU time.
    cpu_seconds: int = 1800
    file_bytes: int = 2 << 30
    wall_seconds: float = 1800.0
    #: How long a repository's own planner may take for one model.
    planner_seconds: float = 60.0
    #: Processes of the whole job, its PID namespace's first process (bubblewrap's) included.
    #: The kernel counts each thread as a process, so threads take from this number too,
    #: beyond the ``threads`` more it allows (:attr:`tasks`).
    processes: int = 64
    #: Threads the job may run beyond the processes' number: thread pools that start one
    #: thread per core (PyTorch's, onnxruntime's) need more on a host with many cores.
    threads: int = field(default_factory=default_threads)
    #: Who the job runs as when the worker is root (nobody and nogroup on Debian).
    user: int = 65534
    group: int = 65534
    #: Run repository code even where only the reduced sandbox is available.
    allow_reduced: bool = False
    #: A delegated cgroup v2 folder to make each job's cgroup in; empty: the worker's own.
    cgroup: str = ""
    #: The scratch folder as a whole (deleted files the job still holds included): a
    #: per-process file size limit alone lets many files fill the disk.
    scratch_bytes: int = 4 << 30
    scratch_files: int = 10_000
    #: A GPU job's device memory, all its processes together, where the driver reports it.
    device_memory_bytes: int = 16 << 30

    @classmethod
    def from_settings(cls, values: dict | None) -> Limits:
        """Limits from the settings' ``SANDBOX`` table: each field under its upper-case
        name, converted to the field's type; a name the table leaves out keeps its default."""
        values = values or {}
        convert = {"int": int, "float": float, "bool": bool, "str": str}
        return cls(**{
            f.name: convert[f.type](values[f.name.upper()])
            for f in fields(cls) if f.name.upper() in values
        })

    @property
    def tasks(self) -> int:
        """Processes and threads together, the kernel's count: what RLIMIT_NPROC and a
        cgroup's ``pids.max`` hold the job to. The job watch kills the job when it reaches
        this number, or ``processes`` processes."""
        return self.processes + self.threads

    @property
    def runs_as(self) -> tuple[int, int] | None:
        """The user and group the job is switched to; None: it runs as the worker."""
        return (self.user, self.group) if os.geteuid() == 0 else None


class SandboxError(RuntimeError):
    """The child did not hand back reports: killed by a limit, crashed, or timed out."""
