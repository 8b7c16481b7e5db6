"""Limits on a sandboxed job as a whole: how many tasks it runs and how much memory they hold.

Per-process rlimits do not bound a job: five children under an 8 GiB address-space limit
hold 40 GiB between them, and a fork bomb needs no memory at all. So the worker watches the
whole job while it runs (:class:`~workers.job_watch.JobWatch`) and kills all of it on the
first limit it crosses, saying which (the kill: :mod:`workers.sandbox.containment`).

One look costs little whatever the job does. It first counts the job's processes and
threads from one walk of ``/proc/PID/stat`` (or the cgroup's counters) and decides the
process and thread limits on that count alone; only then does it read what costs (a
process's ``smaps_rollup``, ``fd/`` and ``maps``, which also contend with the process's own
forks and page faults), for at most :data:`READS_PER_LOOK` processes (:class:`ProcessReads`).
The kernel holds the job to its task limit too (RLIMIT_NPROC, ``pids.max``), so a fork bomb
is refused at the limit the watch kills it on.

Where the worker may make a cgroup v2 of the job's own (:class:`Cgroup`), the kernel holds
the limits and the watch reads the cgroup's counters and events. Elsewhere (cgroup v1, a
container without delegation) the watch walks ``/proc``: the job is the child the worker
started, everything descended from it, and everything still in its session (a process whose
parent died is re-parented away from the tree, but keeps the session unless it made its
own). Memory is each process's proportional share (``Pss``), so pages a forked child shares
with its parent are counted once, plus the memory no process's size shows (:class:`Held`):
shared-memory files held open or mapped (``memfd_create``, deleted tmpfs files, SysV
segments, shared anonymous maps), what the job keeps in its private tmpfs mounts (``/tmp``,
``/dev/shm``), and SysV segments no process has attached, read in the job's own IPC
namespace. Files deleted on disk are counted with the scratch folder (:class:`Scratch`),
which has limits of its own on bytes and files, in both cases.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import signal
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Processes one look reads ``smaps_rollup``, ``fd/`` and ``maps`` of: the default process
#: limit, so that under it every look reads every process; above it a look reads those it
#: read longest ago, and each process is read again within a few looks.
READS_PER_LOOK = 64
CGROUP_ROOT = Path("/sys/fs/cgroup")
_names = itertools.count()


def size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _breach(seen: str, limit: str, setting: str) -> str:
    return f"the job was killed at {seen}, {limit} ({setting})"


def memory_breach(used: int, limit: int) -> str:
    return _breach(
        f"{size(used)} of memory (all its processes together, with the shared memory and "
        "in-memory files they hold)", f"over its memory limit of {size(limit)}",
        f"PEAKWATCH_SANDBOX_MEMORY_BYTES={limit}",
    )


def processes_breach(used: int, limit: int) -> str:
    return _breach(
        f"{used} processes", f"at its process limit of {limit}",
        f"PEAKWATCH_SANDBOX_PROCESSES={limit}",
    )


def scratch_bytes_breach(used: int, limit: int) -> str:
    return _breach(
        f"{size(used)} in its scratch folder (deleted files still open included)",
        f"over its scratch limit of {size(limit)}", f"PEAKWATCH_SANDBOX_SCRATCH_BYTES={limit}",
    )


def scratch_files_breach(used: int, limit: int) -> str:
    return _breach(
        f"more than {used - 1} files in its scratch folder", f"over its limit of {limit} files",
        f"PEAKWATCH_SANDBOX_SCRATCH_FILES={limit}",
    )


def tasks_breach(used: int, processes: int, limit_processes: int, limit_threads: int) -> str:
    """The kernel's count (processes and threads together) at its limit, with fewer than
    ``limit_processes`` processes: threads took the rest."""
    limit = limit_processes + limit_threads
    seen = f"{used} tasks ({processes} processes and {used - processes} threads more)"
    if limit_threads:
        where = f"at its thread limit: {limit} processes and threads together"
    else:
        where = f"at its process limit of {limit}, which counts each thread as a process"
    return _breach(
        seen, where,
        f"PEAKWATCH_SANDBOX_PROCESSES={limit_processes} + "
        f"PEAKWATCH_SANDBOX_THREADS={limit_threads}; raise PEAKWATCH_SANDBOX_THREADS for "
        "more threads",
    )


@dataclass(frozen=True)
class Task:
    pid: int
    parent: int
    session: int
    threads: int
    #: When it started (clock ticks after boot): with ``pid``, a process never seen twice.
    start: int = 0
    #: Resident pages, shared ones included: more than its share, read at no cost.
    rss: int = 0
    state: str = "R"


def tasks() -> dict[int, Task]:
    """Every process on the host, from ``/proc/PID/stat``."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            # os.open, not open(): a look reads every process's, and a file object costs
            # more than the read (half of a walk's time).
            fd = os.open(f"/proc/{entry.name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:  # it exited meanwhile
            continue
        # The command name (field 2) may hold spaces and parentheses: split after its end.
        fields = stat[stat.rfind(b")") + 2:].split()
        pid = int(entry.name)
        found[pid] = Task(
            pid, int(fields[1]), int(fields[3]), int(fields[17]), start=int(fields[19]),
            rss=int(fields[21]), state=fields[0].decode(),
        )
    return found


def descendants(everything: dict[int, Task], root: int) -> list[Task]:
    """The processes below ``root`` in ``everything``, ``root`` itself left out."""
    children: dict[int, list[int]] = {}
    for task in everything.values():
        children.setdefault(task.parent, []).append(task.pid)
    found: list[Task] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(everything[child])
            todo.append(child)
    return found


def job_tasks(root: int, everything: dict[int, Task] | None = None) -> list[Task]:
    """The job started as ``root`` (a session leader): its descendants and its session."""
    everything = tasks() if everything is None else everything
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
    """Bytes ``pid`` holds privately: its proportional set size less its shared-memory pages.

    Those pages (``Pss_Shmem``) belong to files :class:`Held` counts whole, mapped or not.
    """
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            fields = dict(line.split(b":", 1) for line in handle if b":" in line)
        shared = int(fields.get(b"Pss_Shmem", b"0").split()[0])
        return (int(fields[b"Pss"].split()[0]) - shared) * 1024
    except (OSError, KeyError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


#: Filesystems whose files are memory: counted as memory when deleted or kernel-internal.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "hugetlbfs"})
_CLONE_NEWIPC = 0x08000000
_PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)


def mounts(pid: int | str) -> dict[int, tuple[str, str]]:
    """``pid``'s mounts: device number -> (mount point, filesystem type)."""
    found = {}
    with open(f"/proc/{pid}/mountinfo") as handle:
        for line in handle:
            head, _, tail = line.partition(" - ")
            fields = head.split()
            major, minor = fields[2].split(":")
            found[os.makedev(int(major), int(minor))] = (fields[4], tail.split()[0])
    return found


def _namespace(pid: int | str, kind: str) -> int:
    return os.stat(f"/proc/{pid}/ns/{kind}").st_ino


class Held:
    """Memory a job holds outside any process's ``Pss``, and bytes of deleted files on disk.

    One per job: it remembers the job's namespaces once it finds a process inside them.
    ``count`` runs in the watch's own thread, which joins the job's IPC namespace (a
    namespace is per thread) to read the SysV segments no process has attached.
    """

    def __init__(self) -> None:
        self.inside: int | None = None
        #: Set by the watch's own thread alone: any other thread joining would stay there.
        self.join_ipc = False
        self.ipc_joined = False
        self._ipc_tried = False

    def count(self, members: list[Task], held: Iterable[tuple[str, str]]) -> tuple[int, int]:
        """(memory bytes, bytes of deleted files on disk) that ``members`` hold: their
        namespaces' memory, and the files ``held`` (:func:`_held_files`) name."""
        inside = self._inside(members)
        private: dict[int, str] = {}  # the sandbox's own tmpfs mounts
        known = mounts("thread-self")
        if inside is not None:
            try:
                theirs = mounts(inside)
            except OSError:
                theirs = {}
            private = {
                dev: point for dev, (point, kind) in theirs.items()
                if kind in MEMORY_FILESYSTEMS and dev not in known
            }
            known = {**known, **theirs}
        memory = 0
        for point in private.values():
            try:
                usage = os.statvfs(f"/proc/{inside}/root{point}")
            except OSError:
                continue
            memory += (usage.f_blocks - usage.f_bfree) * usage.f_frsize
        sysv = self._sysv(inside)
        memory += sysv or 0
        seen: set[tuple[int, int]] = set()
        on_disk = 0
        for path, name in held:
            if sysv is not None and name.startswith("/SYSV"):
                continue  # counted whole, attached or not
            try:
                info = os.stat(path)
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if key in seen or not stat.S_ISREG(info.st_mode) or info.st_dev in private:
                continue
            seen.add(key)
            kind = known.get(info.st_dev, ("", ""))[1]
            # A device no mount shows is the kernel's own (memfd, SysV, shared anonymous
            # maps): memory, like a deleted tmpfs file.
            if not kind or kind in MEMORY_FILESYSTEMS:
                memory += info.st_blocks * 512
            else:
                on_disk += info.st_blocks * 512
        return memory, on_disk

    def _inside(self, members: list[Task]) -> int | None:
        """A process of the job inside its sandbox's namespaces, if it has any.

        bwrap's own first process stays in the worker's PID namespace, and may be in a mount
        namespace of the worker's making (``confinement.Stage``); the job's are in new ones.
        """
        if self.inside is not None and any(t.pid == self.inside for t in members):
            return self.inside
        try:
            own = _namespace("thread-self", "pid")
        except OSError:
            return None
        for task in members:
            try:
                if _namespace(task.pid, "pid") != own:
                    self.inside = task.pid
                    return task.pid
            except OSError:
                continue
        return None

    def _sysv(self, inside: int | None) -> int | None:
        """Bytes of the SysV segments in the job's own IPC namespace; None where unknown.

        Only a namespace of the job's own is read: the host's holds other programs'
        segments (PostgreSQL's). Joining needs CAP_SYS_ADMIN, so a worker that is not root
        counts only the segments processes have attached (their maps).
        """
        if self.join_ipc and not self._ipc_tried and inside is not None:
            try:
                if _namespace(inside, "ipc") != _namespace("thread-self", "ipc"):
                    self._ipc_tried = True
                    fd = os.open(f"/proc/{inside}/ns/ipc", os.O_RDONLY)
                    try:
                        self.ipc_joined = _libc.setns(fd, _CLONE_NEWIPC) == 0
                    finally:
                        os.close(fd)
            except OSError:
                pass
        if not self.ipc_joined:
            return None
        total = 0
        with open("/proc/sysvipc/shm") as handle:
            header = handle.readline().split()
            rss, swap = header.index("rss"), header.index("swap")
            for line in handle:
                fields = line.split()
                total += int(fields[rss]) + int(fields[swap])
        return total


def _held_files(pid: int):
    """(path to stat, name) of what ``pid`` holds that may be memory: open or mapped files
    that are deleted, memfds, SysV segments, shared anonymous maps. Sockets, pipes and files
    still in place are not (those in place are the scratch folder's or read-only)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            name = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if name.startswith("/") and (name.startswith("/memfd:") or name.endswith(" (deleted)")):
            yield f"/proc/{pid}/fd/{fd}", name
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            maps = handle.read()
    except OSError:
        return
    # A TVM process maps thousands of regions, read every look: most hold none of these.
    if not any(marker in maps for marker in (b"/memfd:", b"/SYSV", b" (deleted)")):
        return
    for line in maps.decode(errors="surrogateescape").splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6:
            continue
        name = fields[5]
        if name.startswith(("/memfd:", "/SYSV")) or name.endswith(" (deleted)"):
            start, end = (int(part, 16) for part in fields[0].split("-"))
            # Only root may look these up; a worker that is not root counts open files alone.
            yield f"/proc/{pid}/map_files/{start:x}-{end:x}", name


class ProcessReads:
    """What the costly reads learn of each process of the job, kept from look to look: the
    files it holds that may be memory (``fd/`` and ``maps``, :func:`_held_files`) and its
    private memory (``smaps_rollup``, :func:`memory_of`, the costliest: it walks the
    process's page tables, and waits while the process forks).

    Each kind is read for at most ``per_look`` processes a look, the new ones first, then
    those read longest ago, the largest first: a look's cost does not grow with the job,
    and each process is read again within ``processes / per_look`` looks.
    """

    def __init__(self, per_look: int = READS_PER_LOOK):
        self.per_look = per_look
        self._looks = 0
        self._members: dict[tuple[int, int], Task] = {}
        #: (pid, start) -> (the look that read it, what it read)
        self._held: dict[tuple[int, int], tuple[int, list[tuple[str, str]]]] = {}
        self._private: dict[tuple[int, int], tuple[int, int]] = {}

    def update(self, members: list[Task]) -> None:
        """A new look at ``members``: the files they hold read again, within the bound."""
        self._looks += 1
        self._members = {(task.pid, task.start): task for task in members}
        self._held = {key: read for key, read in self._held.items() if key in self._members}
        self._private = {
            key: read for key, read in self._private.items() if key in self._members
        }
        for key in self._due(self._held):
            self._held[key] = (self._looks, list(_held_files(key[0])))

    def held_files(self):
        for _, files in self._held.values():
            yield from files

    def resident_bytes(self) -> int:
        """The members' resident memory, pages shared with one another counted in each: more
        than :meth:`private_bytes` can be, and free to know (``/proc/PID/stat``)."""
        return sum(task.rss for task in self._members.values()) * _PAGE

    def private_bytes(self, over: int | None = None) -> int:
        """The members' private memory, read within the bound; the others' as last read.

        With ``over``: stop reading once what this look read alone is past it (the
        processes read are the largest), and answer that.
        """
        fresh = 0
        for key in self._due(self._private):
            self._private[key] = (self._looks, memory_of(key[0]))
            fresh += self._private[key][1]
            if over is not None and fresh > over:
                return fresh
        return sum(read[1] for read in self._private.values())

    def _due(self, read: dict) -> list[tuple[int, int]]:
        due = sorted(
            self._members,
            key=lambda key: (read[key][0] if key in read else -1, -self._members[key].rss),
        )
        return due[: self.per_look]


class Scratch:
    """The job's scratch folder: its bytes (each file once, however many links) and files.

    The walk stops past the file limit, so a folder of a million files costs no more to
    look at than one just over the limit.
    """

    def __init__(self, path: Path, *, max_bytes: int, max_files: int, skip: Path | None = None):
        self.path = path
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.skip = str(skip) if skip is not None else None

    def usage(self) -> tuple[int, int]:
        """(bytes, files and folders), the count stopping at one past the limit."""
        seen: set[tuple[int, int]] = set()
        used = files = 0
        todo = [str(self.path)]
        while todo and files <= self.max_files:
            try:
                entries = os.scandir(todo.pop())
            except OSError:
                continue
            with entries:
                for entry in entries:
                    files += 1
                    if files > self.max_files:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        used += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode) and entry.path != self.skip:
                        todo.append(entry.path)
        return used, files

    def check(self, hidden: int = 0) -> str | None:
        """A breach, counting ``hidden`` bytes of deleted files the job still holds."""
        used, files = self.usage()
        if files > self.max_files:
            return scratch_files_breach(files, self.max_files)
        if used + hidden > self.max_bytes:
            return scratch_bytes_breach(used + hidden, self.max_bytes)
        return None


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


def device_memory_breach(used: int, limit: int) -> str:
    return _breach(
        f"{size(used)} of GPU memory", f"over its limit of {size(limit)}",
        f"PEAKWATCH_SANDBOX_DEVICE_MEMORY_BYTES={limit}",
    )


class _NvmlProcess(ctypes.Structure):
    # nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class DeviceMemory:
    """The GPU memory a set of host processes holds, as NVIDIA's driver reports it (NVML).

    An address-space limit cannot bound a CUDA process (the driver reserves far more than
    it uses), so a GPU job's device memory is watched here instead, where it can be read:
    without NVML (no NVIDIA driver, another vendor) :meth:`used_by` says None.
    """

    _UNAVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE

    def __init__(self) -> None:
        self._nvml = None
        self._devices: list[ctypes.c_void_p] = []
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            if nvml.nvmlInit_v2() != 0:
                return
            count = ctypes.c_uint()
            if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return
            for index in range(count.value):
                handle = ctypes.c_void_p()
                if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0:
                    self._devices.append(handle)
            self._nvml = nvml
        except (OSError, AttributeError):
            self._nvml = None

    @property
    def readable(self) -> bool:
        return self._nvml is not None

    def used_by(self, pids: set[int]) -> int | None:
        if self._nvml is None:
            return None
        total = 0
        for handle in self._devices:
            count = ctypes.c_uint(64)
            while True:
                processes = (_NvmlProcess * count.value)()
                status = self._nvml.nvmlDeviceGetComputeRunningProcesses_v3(
                    handle, ctypes.byref(count), processes
                )
                if status != 7:  # NVML_ERROR_INSUFFICIENT_SIZE: count says how many now
                    break
                count = ctypes.c_uint(count.value + 16)
            if status != 0:
                return None
            for process in processes[: count.value]:
                if process.pid in pids and process.usedGpuMemory != self._UNAVAILABLE:
                    total += process.usedGpuMemory
        return total


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
