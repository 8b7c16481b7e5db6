"""The watch on a running job: it looks at the job's processes and kills all of them on the
first limit they cross (the limits and what a look reads: :mod:`workers.job_limits`; the
kill: :mod:`workers.sandbox.containment`).

Apart from :mod:`workers.job_limits` because it holds the job to kill, and the kill finds
the job's processes through that module.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from workers.job_limits import (
    Cgroup,
    DeviceMemory,
    Held,
    ProcessReads,
    Scratch,
    Task,
    device_memory_breach,
    memory_breach,
    processes_breach,
    tasks_breach,
)

if TYPE_CHECKING:
    from workers.sandbox.containment import Job

log = logging.getLogger(__name__)

#: Long enough to cost nothing (a /proc walk is well under a millisecond), short enough that
#: a job cannot grow far past a limit between two looks.
INTERVAL = 0.2


class JobWatch:
    """Looks at the job every ``interval`` seconds and kills all of it on its first breach.

    ``breach`` then says which limit, with the figure seen and the limit's value. Two
    threads look: one counts the job's processes and threads (a walk of ``/proc/PID/stat``,
    or the cgroup's counters), the other measures its memory and scratch folder, which
    costs more and takes longer the harder the job works against it; so a fork bomb is
    killed on its count however long a measure takes. The watch kills the moment a look
    finds a breach, and the worker kills without waiting for a look in progress
    (:meth:`stop` comes after the kill).
    """

    def __init__(
        self, job: Job, *, memory_bytes: int, processes: int, threads: int = 0,
        cgroup: Cgroup | None = None, scratch: Scratch | None = None,
        interval: float = INTERVAL, device_memory_bytes: int | None = None,
    ):
        self.job = job
        self.memory_bytes = memory_bytes
        self.processes = processes
        self.threads = threads
        self.tasks = processes + threads
        self.cgroup = cgroup
        self.scratch = scratch
        self.held = Held()
        self.reads = ProcessReads()
        self.interval = interval
        self.device_memory_bytes = device_memory_bytes
        self.device = DeviceMemory() if device_memory_bytes is not None else None
        self.breach: str | None = None
        #: The most processes and tasks one count saw.
        self.peak_processes = 0
        self.peak_tasks = 0
        self._done = threading.Event()
        self._lock = threading.Lock()
        #: The count's last walk of ``/proc`` (when, what it found), which the measure reuses
        #: while it is younger than a look: each walk reads every process on the host.
        self._walked: tuple[float, list[Task]] | None = None
        name = f"sandbox-watch-{job.root.pid}"
        self._threads = [
            threading.Thread(target=self._watch, args=(self.count,), name=name, daemon=True),
            threading.Thread(
                target=self._watch, args=(self.measure,), name=f"{name}-usage", daemon=True
            ),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _watch(self, look) -> None:
        if look == self.measure:
            self.held.join_ipc = True  # in this thread alone: see Held
        while not self._done.wait(self.interval):
            try:
                breach = look()
            except OSError as exc:  # a cgroup removed under it: the job is over
                log.debug("job watch stopped: %s", exc)
                return
            except Exception as exc:  # a job nothing watches does not run on
                log.exception("the job watch failed")
                breach = f"the job was killed: its watch failed ({type(exc).__name__}: {exc})"
            if breach:
                with self._lock:
                    self.breach = self.breach or breach
                self.job.kill()
                self._done.set()
                return

    def check(self) -> str | None:
        """One look of both kinds: the counts, then the rest."""
        return self.count() or self.measure()

    def count(self) -> str | None:
        """The process and thread limits, on the job's counts alone."""
        if self.cgroup is not None:
            _, processes, tasks, events = self.cgroup.counters()
            processes -= self.job.outside
            tasks -= self.job.outside
            if events.get("pids_max"):  # the kernel refused a task
                tasks = max(tasks, self.tasks)
        else:
            members = self.job.members()
            self._walked = (time.monotonic(), members)
            processes, tasks = len(members), sum(task.threads for task in members)
        self.peak_processes = max(self.peak_processes, processes)
        self.peak_tasks = max(self.peak_tasks, tasks)
        if processes >= self.processes:
            return processes_breach(processes, self.processes)
        if tasks >= self.tasks:
            return tasks_breach(tasks, processes, self.processes, self.threads)
        return None

    def _members(self) -> list[Task]:
        """The job's processes as the count's walk found them, if it walked within the last
        look (a process started since is measured at the next), else from a walk of its own."""
        walked = self._walked
        if walked is not None and time.monotonic() - walked[0] < self.interval:
            return walked[1]
        return self.job.members()

    def measure(self) -> str | None:
        """Memory, the scratch folder and GPU memory: reads that cost, for a bounded number
        of processes (:class:`ProcessReads`)."""
        members = None
        on_disk = 0
        if self.cgroup is not None:
            # The cgroup charges shared memory and tmpfs pages to the job already.
            memory, _, _, events = self.cgroup.counters()
            if events.get("oom_kill"):
                return memory_breach(max(memory, self.memory_bytes), self.memory_bytes)
            if self.scratch is not None:
                members = self.job.members()
                self.reads.update(members)
                on_disk = self.held.count(members, self.reads.held_files())[1]
        else:
            members = self._members()
            self.reads.update(members)
            memory, on_disk = self.held.count(members, self.reads.held_files())
            # Resident pages bound the private ones: within the limit, nothing to read.
            if memory + self.reads.resident_bytes() > self.memory_bytes:
                memory += self.reads.private_bytes(over=self.memory_bytes - memory)
        if self.scratch is not None:
            breach = self.scratch.check(on_disk)
            if breach:
                return breach
        if memory > self.memory_bytes:
            return memory_breach(memory, self.memory_bytes)
        if self.device is not None and self.device.readable:
            pids = {task.pid for task in members or self.job.members()}
            used = self.device.used_by(pids)
            if used is not None and used > self.device_memory_bytes:
                return device_memory_breach(used, self.device_memory_bytes)
        return None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop looking; call it after the kill, so that a look in progress ends at once."""
        self._done.set()
        for thread in self._threads:
            if thread.is_alive() and threading.current_thread() is not thread:
                thread.join(timeout)
                if thread.is_alive():
                    log.warning("%s did not stop in %g s", thread.name, timeout)
