"""What holds a job before it runs: its rlimits, cgroup, user and ``no_new_privs`` (set in the
child between fork and exec), and the folders handed to its user."""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import stat
import tempfile
from pathlib import Path

from workers import job_limits
from workers.sandbox.limits import Limits, SandboxError

#: Between the soft CPU limit (SIGXCPU, which says why) and the hard one (SIGKILL).
CPU_GRACE = 5
#: Open files per process: the usual soft limit, which Python and TVM work within; it also
#: bounds how many files (memfds among them) the job watch reads for each process.
OPEN_FILES = 1024
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_CAP_SYS_ADMIN = 21


def confine(
    limits: Limits, stage: Stage, cgroup: job_limits.Cgroup | None, *, per_user: bool,
    address_space: bool = True,
) -> None:
    """In the child between fork and exec, still as the worker: the limits, then the user.

    ``per_user``: set the task limit here, where it counts every process of the job's
    user on the host (the reduced sandbox); bwrap's job sets it inside its own user
    namespace instead, where it counts the job's alone (:func:`bwrap.in_task_limit`).

    ``address_space``: also cap each process's address space at the job's memory. Not for
    a GPU job: the CUDA driver reserves far more address space than it ever uses (a
    process that initialises CUDA fails under 8 GiB), so there the job watch alone bounds
    what is resident, and the GPU's own memory where the driver reports it.
    """
    if cgroup is not None:
        cgroup.join()
    stage.mount()
    if address_space:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(
        resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + CPU_GRACE)
    )
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    files = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    if stage.runs_as is not None:
        user, group = stage.runs_as
        if per_user:
            # Only under a user of the sandbox's own does it bound anything (root is exempt);
            # the job watch holds the limit per job in every case.
            limit_tasks(limits.tasks)
        os.setgroups([])
        os.setresgid(group, group, group)
        # From root to another user: the kernel clears every capability.
        os.setresuid(user, user, user)
    # No setuid program or file capability gives any of it back.
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def limit_tasks(tasks: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard != resource.RLIM_INFINITY:
        tasks = min(tasks, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def hand_over(scratch: Path, tree: Path | None, runs_as: tuple[int, int] | None) -> None:
    """Give the scratch folder, and all in it, to the job's user, who writes there.

    Links are changed, never followed: the folder may hold what an earlier job left. The
    checkout stays the worker's (it is read-only to the job anyway).
    """
    if runs_as is None:
        return
    user, group = runs_as
    os.chown(scratch, user, group, follow_symlinks=False)
    for root, dirs, files in os.walk(scratch):
        dirs[:] = [d for d in dirs if tree is None or Path(root, d) != tree]
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), user, group, follow_symlinks=False)


def reachable(path: Path, user: int, group: int) -> bool:
    """Whether ``user`` (in ``group`` only) may look ``path`` up: search on every folder above."""
    for folder in path.parents:
        info = os.stat(folder)
        if info.st_uid == user:
            bit = stat.S_IXUSR
        elif info.st_gid == group:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


def check_reachable(runs_as: tuple[int, int] | None, paths: list[Path | None]) -> None:
    """The reduced sandbox shows the job the host's own paths: its user must reach them."""
    if runs_as is None:
        return
    for path in paths:
        if path is not None:
            open_for_search(Path(path).resolve(), runs_as)


def open_for_search(path: Path, runs_as: tuple[int, int]) -> None:
    """Let the job's user look ``path`` up where only the worker's temporary folders stop it.

    Such a folder (a run's, made by :class:`tempfile.TemporaryDirectory`, mode 0700) gets
    search permission for others, not the right to list it; any other closed folder above
    ``path`` is a SandboxError.
    """
    if reachable(path, *runs_as):
        return
    temporary = Path(tempfile.gettempdir()).resolve()
    for folder in reversed(path.parents):
        if temporary not in folder.parents:
            continue
        info = os.stat(folder)
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
    if not reachable(path, *runs_as):
        raise SandboxError(
            f"the sandbox's user {runs_as[0]} cannot reach {path}: a folder above it is "
            "closed to other users"
        )


def _may_mount() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    return False


class Stage:
    """Mount points the job's user can reach, for what it cannot (bwrap runs as that user).

    The worker's Python under ``/root``, or a scratch folder inside a private temporary
    folder, is closed to other users: bwrap, running as the job's user, could not bind it.
    Such a path is bound first, by the worker still, onto a mount point in an open folder,
    in a mount namespace of the job's own (:meth:`mount`, between fork and exec); bwrap
    binds the mount point where the path belongs. The host's mounts do not change.
    """

    def __init__(self, runs_as: tuple[int, int] | None):
        self.runs_as = runs_as
        self.folder: Path | None = None
        self.mounts: list[tuple[str, str]] = []

    def source(self, path: Path) -> str:
        """What bwrap binds to show ``path``: the path itself, or its mount point."""
        if self.runs_as is None or reachable(path, *self.runs_as):
            return str(path)
        if not _may_mount():  # a container's root: no CAP_SYS_ADMIN
            open_for_search(path, self.runs_as)
            return str(path)
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="peakwatch-stage-"))
            self.folder.chmod(0o755)
            if not reachable(self.folder, *self.runs_as):
                raise SandboxError(f"the sandbox's user cannot reach {self.folder}")
        point = self.folder / str(len(self.mounts))
        if path.is_dir():
            point.mkdir()
        else:
            point.touch()
        self.mounts.append((str(path), str(point)))
        return str(point)

    def mount(self) -> None:
        if not self.mounts:
            return
        if _libc.unshare(_CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        # Private first, so that none of the binds below shows on the host.
        _mount(None, "/", _MS_REC | _MS_PRIVATE)
        for source, point in self.mounts:
            _mount(source, point, _MS_BIND | _MS_REC)

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _mount(source: str | None, target: str, flags: int) -> None:
    if _libc.mount(
        None if source is None else os.fsencode(source), os.fsencode(target), None, flags, None
    ) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target}")
