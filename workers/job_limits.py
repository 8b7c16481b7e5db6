"""Limits on a sandboxed job as a whole: how many tasks it runs and how much memory they hold.

Per-process rlimits do not bound a job: five children under an 8 GiB address-space limit
hold 40 GiB between them, and a fork bomb needs no memory at all. So the worker watches the
whole job while it runs (:class:`JobWatch`) and kills all of it on the first limit it
crosses, saying which.

Where the worker may make a cgroup v2 of the job's own (:class:`Cgroup`), the kernel holds
the limits and the watch reads the cgroup's counters and events. Elsewhere (cgroup v1, a
container without delegation) the watch walks ``/proc``: the job is the child the worker
started, everything descended from it, and everything still in its session (a process whose
parent died is re-parented away from the tree, but keeps the session unless it made its
own). Memory is each process's proportional share (``Pss``), so pages a forked child shares
with its parent are counted once.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Long enough to cost nothing (a /proc walk is well under a millisecond), short enough that
#: a job cannot grow far past a limit between two looks.
INTERVAL = 0.2
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The kernel counts threads with processes (RLIMIT_NPROC, pids.max): a job may run this many
#: tasks per process it may run, room for a thread pool per core on a large host.
TASKS_PER_PROCESS = 16
_names = itertools.count()


def size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def memory_breach(used: int, limit: int) -> str:
    return (
        f"the job was killed at {size(used)} of memory (all its processes together), over "
        f"its memory limit of {size(limit)} (PEAKWATCH_SANDBOX_MEMORY_BYTES={limit})"
    )


def processes_breach(used: int, limit: int) -> str:
    return (
        f"the job was killed at {used} processes, at its process limit of {limit} "
        f"(PEAKWATCH_SANDBOX_PROCESSES={limit})"
    )


def tasks_breach(used: int, limit: int) -> str:
    return (
        f"the job was killed at {used} processes and threads, at its limit of {limit} "
        f"({TASKS_PER_PROCESS} per process of its process limit, PEAKWATCH_SANDBOX_PROCESSES="
        f"{limit // TASKS_PER_PROCESS})"
    )


@dataclass(frozen=True)
class Task:
    pid: int
    parent: int
    session: int
    threads: int


def tasks() -> dict[int, Task]:
    """Every process on the host, from ``/proc/PID/stat``."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # it exited meanwhile
            continue
        # The command name (field 2) may hold spaces and parentheses: split after its end.
        fields = stat[stat.rfind(b")") + 2:].split()
        pid = int(entry.name)
        found[pid] = Task(pid, int(fields[1]), int(fields[3]), int(fields[17]))
    return found


def job_tasks(root: int) -> list[Task]:
    """The job started as ``root`` (a session leader): its descendants and its session."""
    everything = tasks()
    children: dict[int, list[int]] = {}
    for task in everything.values():
        children.setdefault(task.parent, []).append(task.pid)
    members = {root} | {pid for pid, task in everything.items() if task.session == root}
    todo = list(members)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in members:
                members.add(child)
                todo.append(child)
    return [everything[pid] for pid in members if pid in everything]


def memory_of(pid: int) -> int:
    """Bytes ``pid`` holds: its proportional set size, or its resident set size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


class Cgroup:
    """A cgroup v2 of the job's own, under the one given or the worker's, if the worker may
    create one there with the memory and pids controllers: the kernel then holds the limits
    (``memory.max``, ``pids.max`` on its tasks, no swap) and kills the job as a whole
    (``cgroup.kill``)."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, memory_bytes: int, tasks: int, parent: str = "") -> Cgroup | None:
        try:
            base = Path(parent) if parent else _own_cgroup()
            if base is None or not (base / "cgroup.subtree_control").exists():
                return None
            enabled = set((base / "cgroup.subtree_control").read_text().split())
            if not {"memory", "pids"} <= enabled:
                # Fails (EBUSY) where the parent holds processes itself, e.g. the worker.
                (base / "cgroup.subtree_control").write_text("+memory +pids")
            path = base / f"peakwatch-job-{os.getpid()}-{next(_names)}"
            path.mkdir()
        except OSError as exc:
            log.debug("no cgroup v2 for the job: %s", exc)
            return None
        group = cls(path)
        try:
            (path / "memory.max").write_text(str(memory_bytes))
            (path / "pids.max").write_text(str(tasks))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
        except OSError as exc:
            log.warning("cgroup %s refused the job's limits: %s", path, exc)
            group.remove()
            return None
        return group

    def join(self) -> None:
        """Move the calling process in: called in the child before it runs the job."""
        with open(self.path / "cgroup.procs", "w") as handle:
            handle.write("0")

    def counters(self) -> tuple[int, int, int, dict[str, int]]:
        """Memory in use, processes, tasks, and the limits' event counts (``oom_kill``,
        ``pids_max``)."""
        memory = int((self.path / "memory.current").read_text())
        processes = len((self.path / "cgroup.procs").read_text().split())
        tasks = int((self.path / "pids.current").read_text())
        events = {}
        for name, key, label in (
            ("memory.events", "oom_kill", "oom_kill"), ("pids.events", "max", "pids_max"),
        ):
            for line in (self.path / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    events[label] = int(value)
        return memory, processes, tasks, events

    def kill(self) -> None:
        try:
            (self.path / "cgroup.kill").write_text("1")
            return
        except OSError:  # before Linux 5.14
            pass
        try:
            for pid in (self.path / "cgroup.procs").read_text().split():
                _kill(int(pid))
        except OSError:
            pass

    def remove(self) -> None:
        for _ in range(50):  # the kernel frees a cgroup once its last task is reaped
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self.kill()
                time.sleep(0.1)
        log.warning("cgroup %s could not be removed", self.path)


def _own_cgroup() -> Path | None:
    if not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None  # cgroup v1, or a hybrid layout: nothing to delegate from here
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return CGROUP_ROOT / line[3:].lstrip("/")
    return None


class JobWatch(threading.Thread):
    """Polls the job started as ``root`` and kills all of it on its first breach.

    ``breach`` then says which limit, with the figure seen and the limit's value.
    """

    def __init__(
        self, root: int, *, memory_bytes: int, processes: int, cgroup: Cgroup | None = None,
        interval: float = INTERVAL,
    ):
        super().__init__(name=f"sandbox-watch-{root}", daemon=True)
        self.root = root
        self.memory_bytes = memory_bytes
        self.processes = processes
        self.tasks = processes * TASKS_PER_PROCESS
        self.cgroup = cgroup
        self.interval = interval
        self.breach: str | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                breach = self.check()
            except OSError as exc:  # a cgroup removed under it: the job is over
                log.debug("job watch stopped: %s", exc)
                return
            if breach:
                self.breach = breach
                self.kill()
                return

    def check(self) -> str | None:
        if self.cgroup is not None:
            memory, processes, tasks, events = self.cgroup.counters()
            if events.get("oom_kill"):
                return memory_breach(max(memory, self.memory_bytes), self.memory_bytes)
            if events.get("pids_max"):
                return tasks_breach(max(tasks, self.tasks), self.tasks)
        else:
            members = job_tasks(self.root)
            processes = len(members)
            tasks = sum(task.threads for task in members)
            memory = sum(memory_of(task.pid) for task in members)
        if processes >= self.processes:
            return processes_breach(processes, self.processes)
        if tasks >= self.tasks:
            return tasks_breach(tasks, self.tasks)
        if memory > self.memory_bytes:
            return memory_breach(memory, self.memory_bytes)
        return None

    def stop(self) -> None:
        self._done.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()

    def kill(self) -> None:
        """Kill every process of the job, the child the worker started last."""
        if self.cgroup is not None:
            self.cgroup.kill()
        for task in sorted(job_tasks(self.root), key=lambda t: t.pid == self.root):
            _kill(task.pid)
        try:
            os.killpg(self.root, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
