"""Run a compile job, and with it a tracked repository's code, in a locked-down child process.

Model factories, pipelines and planners come from repositories Peakwatch tracks, pull
requests from strangers included, so none of it runs in a worker. The child

- gets a scrubbed environment: ``PATH``, ``HOME`` and ``TMPDIR`` inside its scratch folder,
  nothing else (no database or broker URL, no tokens, no secret key);
- runs in its scratch folder (the commit's checkout and the artifacts) and can write
  nowhere else;
- runs as an unprivileged user with no capabilities and ``no_new_privs``: a worker running
  as root starts it as ``Limits.user``/``Limits.group`` (nobody/nogroup by default), which
  owns the scratch folder; any other worker runs it as itself;
- has limits on the whole job, all its processes together (memory, shared memory and
  in-memory files included; processes and threads; its scratch folder's bytes and files:
  :mod:`workers.job_limits`), on each process (address space, CPU time, file size, open
  files) and on wall-clock time; a job killed on a limit fails with a message that names
  the limit;
- with bubblewrap (Debian's ``bubblewrap``) present, runs in new user, network, PID, IPC
  and UTS namespaces (no network at all, no nested user namespaces), and sees only
  ``/usr``, the files of ``/etc`` that Python, TVM and gcc read (no shadow, ssh or TLS
  keys), Python and the planner read-only, a minimal ``/dev`` of its own with a private
  ``/dev/shm`` (no device nodes to make or open; a GPU board's job gets its GPU's nodes
  alone): the *full* sandbox. Without it only the user,
  the limits and the scrubbed environment hold: the *reduced* sandbox, which the boards
  page shows with its reason, and which runs nothing unless ``Limits.allow_reduced``
  (``PEAKWATCH_SANDBOX_ALLOW_REDUCED=1``) says so.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import json
import logging
import os
import resource
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from planner.job_spec import JobSpec
from planner.report import StrategyReport
from workers import job_limits, trust

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Only the planner is visible to repository code, not the workers or the dashboard.
PLANNER_DIR = PROJECT_ROOT / "planner"


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
    #: Processes of the whole job (and 16 times as many processes and threads together).
    processes: int = 64
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
        values = values or {}
        return cls(
            memory_bytes=int(values.get("MEMORY_BYTES", cls.memory_bytes)),
            cpu_seconds=int(values.get("CPU_SECONDS", cls.cpu_seconds)),
            file_bytes=int(values.get("FILE_BYTES", cls.file_bytes)),
            wall_seconds=float(values.get("WALL_SECONDS", cls.wall_seconds)),
            planner_seconds=float(values.get("PLANNER_SECONDS", cls.planner_seconds)),
            processes=int(values.get("PROCESSES", cls.processes)),
            user=int(values.get("USER", cls.user)),
            group=int(values.get("GROUP", cls.group)),
            allow_reduced=bool(values.get("ALLOW_REDUCED", cls.allow_reduced)),
            cgroup=str(values.get("CGROUP", cls.cgroup)),
            scratch_bytes=int(values.get("SCRATCH_BYTES", cls.scratch_bytes)),
            scratch_files=int(values.get("SCRATCH_FILES", cls.scratch_files)),
            device_memory_bytes=int(
                values.get("DEVICE_MEMORY_BYTES", cls.device_memory_bytes)
            ),
        )

    @property
    def runs_as(self) -> tuple[int, int] | None:
        """The user and group the job is switched to; None: it runs as the worker."""
        return (self.user, self.group) if os.geteuid() == 0 else None


@dataclass(frozen=True)
class Mode:
    full: bool
    reason: str

    def to_json(self) -> dict:
        return {"mode": "full" if self.full else "reduced", "reason": self.reason}


class SandboxError(RuntimeError):
    """The child did not hand back reports: killed by a limit, crashed, or timed out."""


@functools.cache
def mode(user: int = Limits.user, group: int = Limits.group) -> Mode:
    """Whether this host gives the full sandbox, and why not when it does not.

    Tried the way a job runs (as ``user``/``group`` where the worker is root), on ``true``:
    a host where bwrap is installed but cannot make its namespaces (a container's seccomp
    or AppArmor profile, user namespaces switched off) gets the reduced sandbox.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Mode(False, "bubblewrap (bwrap) is not installed: no namespaces, no file isolation")
    limits = Limits(user=user, group=group)
    stage = _Stage(limits.runs_as)
    try:
        with tempfile.TemporaryDirectory(prefix="peakwatch-probe-") as scratch:
            _hand_over(Path(scratch), None, limits.runs_as)
            command = _bwrap(
                [shutil.which("true") or "/usr/bin/true"], Path(scratch), None,
                {"PATH": "/usr/bin:/bin"}, devices=False, stage=stage,
            )
            probe = subprocess.run(
                command, capture_output=True, text=True, timeout=30, check=False,
                preexec_fn=functools.partial(_confine, limits, stage, None, per_user=False),
            )
    except (OSError, subprocess.SubprocessError, SandboxError) as exc:
        return Mode(False, f"bubblewrap cannot start the sandbox here: {exc}")
    finally:
        stage.remove()
    if probe.returncode != 0:
        return Mode(False, f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}")
    who = f"as uid {user}" if limits.runs_as else "as the worker's own user"
    return Mode(
        True,
        f"bubblewrap {who}, no capabilities: no network, read-only system, "
        "scrubbed environment, job limits",
    )


def refusal(limits: Limits) -> str:
    """Why this worker must not run repository code; empty when it may."""
    current = mode(limits.user, limits.group)
    if current.full or limits.allow_reduced:
        return ""
    return (
        f"only the reduced sandbox is available here ({current.reason}); repository code "
        "does not run in it unless PEAKWATCH_SANDBOX_ALLOW_REDUCED=1"
    )


def run_job(
    job: JobSpec | dict, scratch: Path, *, tree: Path | None = None, limits: Limits,
    devices: bool = False, python: str | None = None, folders: tuple[str, ...] = (),
) -> list[StrategyReport]:
    """Run ``planner.tvm.job`` on ``job``; return its StrategyReports.

    ``scratch`` is the only folder the child may write (artifacts, its home, its temporary
    files); ``tree``, the commit's checkout, is its working directory, read-only.
    ``devices`` shows the child the host's GPU nodes (:func:`gpu_nodes`) and bounds its
    memory without an address-space limit (see :func:`_confine`). ``python`` is the
    interpreter to run (a toolchain's, :mod:`planner.tvm.toolchain`; the worker's own by
    default), and ``folders`` what it reads beyond the worker's environment, shown read-only.
    """
    spec = job if isinstance(job, JobSpec) else JobSpec.from_json(job)
    out_path = _run_child(
        ["planner.tvm.job"], spec.to_json(), scratch, tree=tree, limits=limits,
        devices=devices, python=python, folders=folders,
    )
    try:
        # Parsed field by field: what a child writes is not believed (workers/trust.py).
        return trust.read_reports(out_path)
    except trust.HandoverError as exc:
        raise SandboxError(f"the compile's reports were refused: {exc}") from None


def run_probe(
    module: str, scratch: Path, *, limits: Limits, devices: bool = False, max_bytes: int = 65536
) -> dict:
    """Run ``python -m MODULE OUT.json`` as a job would run (same sandbox, same limits, the
    same devices) and return the JSON object it wrote: a board's check that a job can work.
    """
    out_path = _run_child(
        [module], None, scratch, tree=None, limits=limits, devices=devices, python=None,
        folders=(),
    )
    try:
        answer = trust.read_json(out_path, max_bytes)
    except trust.HandoverError as exc:
        raise SandboxError(f"the probe's answer was refused: {exc}") from None
    if not isinstance(answer, dict):
        raise SandboxError("the probe's answer was refused: not a JSON object")
    return answer


def _run_child(
    module: list[str], job: dict | None, scratch: Path, *, tree: Path | None, limits: Limits,
    devices: bool, python: str | None, folders: tuple[str, ...],
) -> Path:
    """Run ``python -m MODULE [JOB.json] OUT.json`` sandboxed; return OUT.json's path, which
    exists (else :class:`SandboxError` says why)."""
    scratch = Path(scratch).resolve()
    tree = Path(tree).resolve() if tree is not None else None
    refused = refusal(limits)
    if refused:
        raise SandboxError(refused)
    current = mode(limits.user, limits.group)
    runs_as = limits.runs_as
    for folder in ("home", "tmp"):
        (scratch / folder).mkdir(parents=True, exist_ok=True)
    job_path = scratch / "job.json"
    out_path = scratch / "reports.json"
    arguments = [str(out_path)]
    if job is not None:
        _write_new(job_path, json.dumps(job))
        arguments.insert(0, str(job_path))
    out_path.unlink(missing_ok=True)
    _hand_over(scratch, tree, runs_as)
    child = [python or sys.executable, "-m", *module, *arguments]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        # One compile thread pool per child: two cores serve a whole board.
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "1"),
    }
    stage = _Stage(runs_as)
    try:
        if current.full:
            command = _bwrap(
                _in_task_limit(child, limits.processes * job_limits.TASKS_PER_PROCESS),
                scratch, tree, env,
                devices=devices, folders=folders, stage=stage,
            )
        else:
            _check_reachable(runs_as, [Path(child[0]), PROJECT_ROOT, scratch, tree])
            command = child
    except SandboxError:
        stage.remove()
        raise
    log.info("sandbox (%s): %s", "full" if current.full else "reduced", " ".join(child))
    tasks = limits.processes * job_limits.TASKS_PER_PROCESS
    cgroup = job_limits.Cgroup.create(limits.memory_bytes, tasks, limits.cgroup)
    try:
        proc = subprocess.Popen(
            command, cwd=tree or scratch, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=functools.partial(
                _confine, limits, stage, cgroup, per_user=not current.full,
                address_space=not devices,
            ),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        stage.remove()
        if cgroup is not None:
            cgroup.remove()
        raise SandboxError(f"the sandbox could not start: {exc}") from None
    watch = job_limits.JobWatch(
        proc.pid, memory_bytes=limits.memory_bytes, processes=limits.processes, cgroup=cgroup,
        device_memory_bytes=limits.device_memory_bytes if devices else None,
        scratch=job_limits.Scratch(
            scratch, max_bytes=limits.scratch_bytes, max_files=limits.scratch_files, skip=tree
        ),
    )
    watch.start()
    try:
        output, _ = proc.communicate(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        watch.stop()
        watch.kill()
        _rest_of_output(proc)
        raise SandboxError(
            watch.breach
            or f"the compile ran past its wall-clock limit of {limits.wall_seconds:g} s"
        ) from None
    finally:
        watch.stop()
        watch.kill()  # nothing it started outlives it
        if cgroup is not None:
            cgroup.remove()
        stage.remove()
    if output.strip():
        log.debug("sandboxed compile said:\n%s", output[-20000:])
    if watch.breach:
        raise SandboxError(watch.breach)
    if not out_path.exists():
        raise SandboxError(_why_no_reports(proc.returncode, output, limits))
    return out_path


def _why_no_reports(code: int, output: str, limits: Limits) -> str:
    tail = output.strip()[-1500:]
    said = f"\n{tail}" if tail else ""
    # bwrap, like a shell, reports a child killed by signal N as the exit status 128 + N.
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        name = signal.Signals(number).name if number else ""
    except ValueError:
        name = ""
    if name == "SIGXCPU":
        return (
            f"the compile was killed on its CPU time limit: a process used its "
            f"{limits.cpu_seconds} s of CPU time "
            f"(PEAKWATCH_SANDBOX_CPU_SECONDS={limits.cpu_seconds}){said}"
        )
    if name == "SIGXFSZ":
        return (
            f"the compile was killed on its file size limit: a process wrote past "
            f"{job_limits.size(limits.file_bytes)} "
            f"(PEAKWATCH_SANDBOX_FILE_BYTES={limits.file_bytes}){said}"
        )
    if name == "SIGKILL":
        return (
            "the compile was killed (SIGKILL): out of memory, or on its CPU time hard limit "
            f"of {limits.cpu_seconds + _CPU_GRACE} s{said}"
        )
    if name:
        return f"the compile process died of {name}{said}"
    if "MemoryError" in tail:
        return (
            f"the compile ran out of memory: a process reached its address-space limit of "
            f"{job_limits.size(limits.memory_bytes)} "
            f"(PEAKWATCH_SANDBOX_MEMORY_BYTES={limits.memory_bytes}){said}"
        )
    if "Resource temporarily unavailable" in tail:
        return (
            f"the compile could not start a process or thread: the job is probably at its "
            f"limit of {limits.processes * job_limits.TASKS_PER_PROCESS} processes and threads "
            f"(PEAKWATCH_SANDBOX_PROCESSES={limits.processes}){said}"
        )
    return f"the compile process exited with {code} and no reports{said}"


#: Between the soft CPU limit (SIGXCPU, which says why) and the hard one (SIGKILL).
_CPU_GRACE = 5
#: Open files per process: the usual soft limit, which Python and TVM work within; it also
#: bounds how many files (memfds among them) the job watch reads for each process.
OPEN_FILES = 1024
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_CAP_SYS_ADMIN = 21


def _confine(
    limits: Limits, stage: _Stage, cgroup: job_limits.Cgroup | None, *, per_user: bool,
    address_space: bool = True,
) -> None:
    """In the child between fork and exec, still as the worker: the limits, then the user.

    ``per_user``: set the process limit here, where it counts every process of the job's
    user on the host (the reduced sandbox); bwrap's job sets it inside its own user
    namespace instead, where it counts the job's alone (:func:`_in_task_limit`).

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
        resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + _CPU_GRACE)
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
            _limit_tasks(limits.processes * job_limits.TASKS_PER_PROCESS)
        os.setgroups([])
        os.setresgid(group, group, group)
        # From root to another user: the kernel clears every capability.
        os.setresuid(user, user, user)
    # No setuid program or file capability gives any of it back.
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def _limit_tasks(tasks: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard != resource.RLIM_INFINITY:
        tasks = min(tasks, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


#: Run first in bwrap's sandbox: sets the limit on tasks (as _limit_tasks), becomes the job.
_TASK_LIMIT = (
    "import os, resource as r, sys; n = int(sys.argv[1]); h = r.getrlimit(r.RLIMIT_NPROC)[1]; "
    "n = n if h == r.RLIM_INFINITY else min(n, h); r.setrlimit(r.RLIMIT_NPROC, (n, n)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def _in_task_limit(child: list[str], tasks: int) -> list[str]:
    """``child`` under a limit on its tasks (processes and threads), set in bwrap's sandbox.

    The kernel counts RLIMIT_NPROC per user and per user namespace, against the limit each
    namespace's creator had: set before bwrap, it would count every process of the user on
    the host (other workers' jobs); set in the namespace, it counts this job's alone.
    """
    return [child[0], "-I", "-c", _TASK_LIMIT, str(tasks), *child]


def _rest_of_output(proc: subprocess.Popen) -> str:
    try:
        return proc.communicate(timeout=30)[0] or ""
    except subprocess.TimeoutExpired:  # a process that escaped the kill holds the pipe
        return ""


def _write_new(path: Path, text: str) -> None:
    """Write ``path`` afresh: an earlier job in this folder may have left a link there."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _hand_over(scratch: Path, tree: Path | None, runs_as: tuple[int, int] | None) -> None:
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


def _reachable(path: Path, user: int, group: int) -> bool:
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


def _check_reachable(runs_as: tuple[int, int] | None, paths: list[Path | None]) -> None:
    """The reduced sandbox shows the job the host's own paths: its user must reach them."""
    if runs_as is None:
        return
    for path in paths:
        if path is not None:
            _open_for_search(Path(path).resolve(), runs_as)


def _open_for_search(path: Path, runs_as: tuple[int, int]) -> None:
    """Let the job's user look ``path`` up where only the worker's temporary folders stop it.

    Such a folder (a run's, made by :class:`tempfile.TemporaryDirectory`, mode 0700) gets
    search permission for others, not the right to list it; any other closed folder above
    ``path`` is a SandboxError.
    """
    if _reachable(path, *runs_as):
        return
    temporary = Path(tempfile.gettempdir()).resolve()
    for folder in reversed(path.parents):
        if temporary not in folder.parents:
            continue
        info = os.stat(folder)
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
    if not _reachable(path, *runs_as):
        raise SandboxError(
            f"the sandbox's user {runs_as[0]} cannot reach {path}: a folder above it is "
            "closed to other users"
        )


def _may_mount() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    return False


class _Stage:
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
        if self.runs_as is None or _reachable(path, *self.runs_as):
            return str(path)
        if not _may_mount():  # a container's root: no CAP_SYS_ADMIN
            _open_for_search(path, self.runs_as)
            return str(path)
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="peakwatch-stage-"))
            self.folder.chmod(0o755)
            if not _reachable(self.folder, *self.runs_as):
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


def _python_roots() -> list[Path]:
    """Folders the interpreter and its packages live in, to be mounted read-only."""
    roots = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    for entry in [*sys.path, site.getusersitepackages()]:
        path = Path(entry)
        if entry and path.is_dir() and "-packages" in path.name:
            roots.add(path)
    # Mounting a folder inside another one mounted already would hide nothing; keep both.
    return sorted(r.resolve() for r in roots if r.exists())


#: What Python, TVM, gcc and the C library read under /etc; nothing else of it is shown
#: (no shadow or gshadow, ssh host keys, TLS private keys, sudoers, services' credentials).
ETC_ALLOWED = (
    "alternatives",  # cc, c++ and gcc are links through here
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload",
    "passwd", "group", "nsswitch.conf", "host.conf", "hosts", "gai.conf",
    "localtime", "timezone", "locale.alias", "mime.types",
    "os-release", "debian_version", "lsb-release", "protocols", "services", "mtab",
)
#: /tmp and /dev/shm are memory no process shows in its own size: the job watch counts
#: them, and their size bounds what one can gain between two of its looks.
TMPFS_BYTES = 256 << 20


#: What a GPU board's job needs of the host's /dev: NVIDIA's nodes (nvidia0, nvidiactl,
#: nvidia-uvm, nvidia-caps/*) and DRM's (dri/card0, dri/renderD128).
GPU_NODES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")


def gpu_nodes() -> list[str]:
    """The GPU device nodes this host has (character devices only: not dri/by-path's links)."""
    found = set()
    for pattern in GPU_NODES:
        for path in glob.glob(pattern):
            try:
                if stat.S_ISCHR(os.lstat(path).st_mode):
                    found.add(path)
            except OSError:
                continue
    return sorted(found)


def _bwrap(
    child: list[str], scratch: Path, tree: Path | None, env: dict, *, devices: bool,
    stage: _Stage, folders: tuple[str, ...] = (),
) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [
        bwrap,
        "--die-with-parent", "--new-session",
        "--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop", "ALL",
    ]
    if _bwrap_has(bwrap, "--disable-userns"):  # bubblewrap 0.8
        args.append("--disable-userns")
    if stage.runs_as is not None:
        args += ["--uid", str(stage.runs_as[0]), "--gid", str(stage.runs_as[1])]
    # The tmpfs first: a bind below /tmp made before it (the project, its Python, a
    # toolchain, the scratch folder) would be hidden by it.
    args += ["--proc", "/proc", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]
    # A /dev of the job's own even for a GPU: the host's holds its disks, /dev/mem, the
    # kernel log and the host's /dev/shm. Only the GPU's nodes are added.
    args += ["--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm"]
    if devices:
        for node in gpu_nodes():
            args += ["--dev-bind-try", node, node]

    def show(path: Path, *, writable: bool = False) -> None:
        args.extend(["--bind" if writable else "--ro-bind", stage.source(path), str(path)])

    show(Path("/usr"))
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            show(path)
    etc = [Path("/etc", name) for name in ETC_ALLOWED]
    for path in [*etc, *sorted(Path("/etc").glob("python3*"))]:
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.exists():
            show(path)
    for root in _python_roots():
        if not str(root).startswith("/usr/"):
            show(root)
    show(PLANNER_DIR)
    for folder in folders:
        show(Path(folder))
    show(scratch, writable=True)
    if tree is not None:
        show(tree)
    # Nothing to write outside the scratch folder, /tmp and /dev/shm, not even in memory.
    args += ["--remount-ro", "/", "--chdir", str(tree or scratch), "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *child]


@functools.cache
def _bwrap_has(bwrap: str, option: str) -> bool:
    usage = subprocess.run(
        [bwrap, "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    return option in usage.stdout + usage.stderr
