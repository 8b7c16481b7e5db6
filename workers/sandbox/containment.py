"""A started job's processes, found cheaply, and the one way to kill all of them at once.

In the full sandbox the job is a PID namespace. bwrap's first process, the worker's child,
stays in the worker's namespace and starts the namespace's first process (its init); every
process of the job descends from that init, orphans included (the kernel re-parents them to
it). SIGKILL to the init from outside makes the kernel kill every process in the namespace,
and no process can be made in it once its init is gone: one signal, however many processes
there are and whatever they do (fork into the slots a kill frees, make sessions of their
own). Killing bwrap's first process kills the init too (``--die-with-parent``), for a kill
that comes before the init is known.

Without a namespace (the reduced sandbox) the job is its first process's descendants and
its session: each is stopped (SIGSTOP: a stopped process forks no more), then killed, round
after round until none is left. A cgroup v2 of the job's own, where there is one, is killed
whole first either way (``cgroup.kill``).

Signals go through pidfds: a process that has exited, and whose number the kernel gave to
another process since, is never signalled.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from workers import job_limits

log = logging.getLogger(__name__)

#: Rounds of stop-then-kill in the reduced sandbox: each round kills every process the last
#: one's children could have become; a job limited to N tasks needs far fewer than N.
_KILL_ROUNDS = 20


class Process:
    """One process, held by a pidfd where the kernel has them (Linux 5.3 and later)."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (OSError, AttributeError):  # it is gone, or an older kernel
            self.fd = None

    def signal(self, number: int = signal.SIGKILL) -> None:
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, number)
            else:
                os.kill(self.pid, number)
        except (ProcessLookupError, PermissionError):
            pass

    def unreaped(self) -> bool:
        """Whether this child of the worker has not been waited for (its number is its own)."""
        return self._wait() != "reaped"

    def running(self) -> bool:
        """Whether this child of the worker has not exited."""
        return self._wait() == "running"

    def _wait(self) -> str:
        if self.fd is None:  # without a pidfd, only whether it is still the worker's child
            return "exited" if _parent(self.pid) == os.getpid() else "reaped"
        try:
            found = os.waitid(os.P_PIDFD, self.fd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "reaped"
        return "running" if found is None else "exited"

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Job:
    """The processes of one job the worker started as ``root``, its only child."""

    def __init__(
        self, root: int, *, namespace: bool, cgroup: job_limits.Cgroup | None = None
    ):
        self.root = Process(root)
        #: Whether ``root`` is bwrap's first process, outside the job's PID namespace.
        self.namespace = namespace
        self.cgroup = cgroup
        #: The job's PID namespace's first process, once found.
        self.init: Process | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def outside(self) -> int:
        """Processes of the job (in its cgroup) that the kernel's limit on it leaves out."""
        return 1 if self.namespace else 0

    def members(self) -> list[job_limits.Task]:
        """The job's processes, from one walk of ``/proc/PID/stat``: its namespace's, or in
        the reduced sandbox its first process's descendants and session."""
        everything = job_limits.tasks()
        if self.namespace:
            with self._lock:  # both of the watch's threads ask
                if self.init is None and not self._closed:
                    self._find_init(everything)
            return job_limits.descendants(everything, self.root.pid)
        if self.root.unreaped():
            return job_limits.job_tasks(self.root.pid, everything)
        # Its number may be another process's now: only what is still in its session.
        return [task for task in everything.values() if task.session == self.root.pid]

    def kill(self) -> None:
        """Kill every process of the job at once; it may be called again, from any thread."""
        with self._lock:
            if self._closed:
                return
            if self.root.running():
                log.info("killing the job of process %s", self.root.pid)
            if self.cgroup is not None:
                self.cgroup.kill()
            if self.namespace:
                if self.init is None:
                    self._find_init(None)
                if self.init is not None:
                    self.init.signal()
                self.root.signal()
            else:
                self._kill_each()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self.root.close()
            if self.init is not None:
                self.init.close()

    def _find_init(self, everything: dict[int, job_limits.Task] | None) -> None:
        """Hold the namespace's init by its pidfd: the only child of bwrap's first process,
        taken only while that process is the worker's unreaped child (its number its own),
        and kept only if it is still that process's child once held."""
        if not self.root.unreaped():
            return
        if everything is None:
            children = _children(self.root.pid)
        else:
            children = [t.pid for t in everything.values() if t.parent == self.root.pid]
        if len(children) != 1:
            return
        init = Process(children[0])
        if init.fd is None or _parent(init.pid) != self.root.pid:
            init.close()
            return
        self.init = init

    def _kill_each(self) -> None:
        for _ in range(_KILL_ROUNDS):
            members = [task for task in self.members() if task.state not in "ZX"]
            if not members:
                return
            for task in members:
                self._signal(task.pid, signal.SIGSTOP)
            for task in members:
                self._signal(task.pid, signal.SIGKILL)
            time.sleep(0.01)  # a killed process is listed until it has exited
        log.warning("the job of process %s still had processes after the kill", self.root.pid)

    def _signal(self, pid: int, number: int) -> None:
        if pid == self.root.pid:
            self.root.signal(number)
            return
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return []


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2:].split()[1])
