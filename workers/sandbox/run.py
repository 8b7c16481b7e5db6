"""Run a job in the sandbox: which sandbox this host gives, the job's child process and its
watch, and what the worker takes back from it."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from planner.job_spec import JobSpec
from planner.report import StrategyReport
from workers import job_limits, trust
from workers.job_watch import JobWatch
from workers.sandbox import bwrap
from workers.sandbox.confinement import (
    CPU_GRACE,
    Stage,
    check_reachable,
    confine,
    hand_over,
)
from workers.sandbox.containment import Job
from workers.sandbox.limits import Limits, SandboxError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mode:
    full: bool
    reason: str

    def to_json(self) -> dict:
        return {"mode": "full" if self.full else "reduced", "reason": self.reason}


@functools.cache
def mode(user: int = Limits.user, group: int = Limits.group) -> Mode:
    """Whether this host gives the full sandbox, and why not when it does not.

    Tried the way a job runs (as ``user``/``group`` where the worker is root), on ``true``:
    a host where bwrap is installed but cannot make its namespaces (a container's seccomp
    or AppArmor profile, user namespaces switched off) gets the reduced sandbox.
    """
    if shutil.which("bwrap") is None:
        return Mode(False, "bubblewrap (bwrap) is not installed: no namespaces, no file isolation")
    limits = Limits(user=user, group=group)
    stage = Stage(limits.runs_as)
    try:
        with tempfile.TemporaryDirectory(prefix="peakwatch-probe-") as scratch:
            hand_over(Path(scratch), None, limits.runs_as)
            command = bwrap.command(
                [shutil.which("true") or "/usr/bin/true"], Path(scratch), None,
                {"PATH": "/usr/bin:/bin"}, devices=False, stage=stage,
            )
            probe = subprocess.run(
                command, capture_output=True, text=True, timeout=30, check=False,
                preexec_fn=functools.partial(confine, limits, stage, None, per_user=False),
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
    ``devices`` shows the child the host's GPU nodes (:func:`bwrap.gpu_nodes`) and bounds
    its memory without an address-space limit (see :func:`confinement.confine`). ``python``
    is the interpreter to run (a toolchain's, :mod:`planner.tvm.toolchain`; the worker's own
    by default), and ``folders`` what it reads beyond the worker's environment, shown
    read-only.
    """
    spec = job if isinstance(job, JobSpec) else JobSpec.from_json(job)
    out_path = _run_child(
        ["planner.tvm.job"], spec.to_json(), scratch, tree=tree, limits=limits,
        devices=devices, python=python, folders=folders,
    )
    try:
        _check_handed_over(out_path)
        # Parsed field by field: what a child writes is not believed (workers/trust.py).
        reports = trust.read_reports(out_path)
    except trust.HandoverError as exc:
        raise SandboxError(f"the compile's reports were refused: {exc}") from None
    for report in reports:
        if report.error and _out_of_tasks(report.error):
            report.error += f" ({_task_limit(limits)})"
    return reports


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
        _check_handed_over(out_path)
        answer = trust.read_json(out_path, max_bytes)
    except trust.HandoverError as exc:
        raise SandboxError(f"the probe's answer was refused: {exc}") from None
    if not isinstance(answer, dict):
        raise SandboxError("the probe's answer was refused: not a JSON object")
    return answer


#: Why a handed-over file that is not a plain file of its own is refused, whatever it is:
#: a link is never followed, so where it leads (a host file or nothing) changes no word.
NOT_A_PLAIN_FILE = "{name} is not a plain file of the job's own (a link, a hard link or no file)"


def _check_handed_over(path: Path) -> None:
    """Refuse ``path`` unless it is a plain file with one name, looked at with lstat."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        raise trust.HandoverError(NOT_A_PLAIN_FILE.format(name=path.name))


@functools.cache
def _compile_planner() -> None:
    """Peakwatch's own planner compiled to bytecode beside its sources, once per worker
    process (only what changed is compiled again). A job runs with
    PYTHONDONTWRITEBYTECODE=1 on a read-only view of it, so without this every job, and
    its measuring process, compiles the planner's modules from source again. A worker whose
    package folder it may not write (an installed package, already compiled by pip) goes
    on without."""
    import compileall

    with contextlib.suppress(OSError):
        compileall.compile_dir(bwrap.PLANNER_DIR, quiet=2, workers=1)


def _run_child(
    module: list[str], job: dict | None, scratch: Path, *, tree: Path | None, limits: Limits,
    devices: bool, python: str | None, folders: tuple[str, ...],
) -> Path:
    """Run ``python -m MODULE [JOB.json] OUT.json`` sandboxed; return OUT.json's path, which
    exists as a name (else :class:`SandboxError` says why); it may be anything, a link
    included, and is looked at only without following it."""
    scratch = Path(scratch).resolve()
    tree = Path(tree).resolve() if tree is not None else None
    _compile_planner()
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
    hand_over(scratch, tree, runs_as)
    child = [python or sys.executable, "-m", *module, *arguments]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "PYTHONPATH": str(bwrap.PROJECT_ROOT),
        # ``python -m`` would put the working directory, the checkout, first on sys.path,
        # where its own planner/ package would stand for Peakwatch's before a line of ours
        # runs; the job puts the checkout on the path itself, after Peakwatch's packages.
        "PYTHONSAFEPATH": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        # One compile thread pool per child: two cores serve a whole board.
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "1"),
    }
    # Undone in the reverse order: the job killed, its watch stopped, then its files.
    with contextlib.ExitStack() as cleanup:
        stage = Stage(runs_as)
        cleanup.callback(stage.remove)
        if current.full:
            command = bwrap.command(
                bwrap.in_task_limit(child, limits.tasks), scratch, tree, env,
                devices=devices, folders=folders, stage=stage,
            )
        else:
            check_reachable(runs_as, [Path(child[0]), bwrap.PROJECT_ROOT, scratch, tree])
            command = child
        log.info("sandbox (%s): %s", "full" if current.full else "reduced", " ".join(child))
        # bwrap's first process, outside the job's namespace, is in its cgroup too.
        cgroup = job_limits.Cgroup.create(
            limits.memory_bytes, limits.tasks + (1 if current.full else 0), limits.cgroup
        )
        if cgroup is not None:
            cleanup.callback(cgroup.remove)
        try:
            proc = subprocess.Popen(
                command, cwd=tree or scratch, env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                preexec_fn=functools.partial(
                    confine, limits, stage, cgroup, per_user=not current.full,
                    address_space=not devices,
                ),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"the sandbox could not start: {exc}") from None
        job_processes = Job(proc.pid, namespace=current.full, cgroup=cgroup)
        cleanup.callback(job_processes.close)
        watch = JobWatch(
            job_processes, memory_bytes=limits.memory_bytes, processes=limits.processes,
            threads=limits.threads, cgroup=cgroup,
            device_memory_bytes=limits.device_memory_bytes if devices else None,
            scratch=job_limits.Scratch(
                scratch, max_bytes=limits.scratch_bytes, max_files=limits.scratch_files,
                skip=tree,
            ),
        )
        cleanup.callback(watch.stop)
        # First out: nothing it started outlives it, whatever ends this block.
        cleanup.callback(job_processes.kill)
        watch.start()
        timed_out = False
        try:
            output, _ = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            # At once: not after the watch's look in progress, which may take a while.
            job_processes.kill()
            output = _rest_of_output(proc)
        job_processes.kill()
        watch.stop()
    log.debug(
        "the job's largest count: %d processes, %d tasks", watch.peak_processes,
        watch.peak_tasks,
    )
    if output.strip():
        log.debug("sandboxed compile said:\n%s", output[-20000:])
    if watch.breach:
        raise SandboxError(watch.breach)
    if timed_out:
        raise SandboxError(
            f"the compile ran past its wall-clock limit of {limits.wall_seconds:g} s"
        )
    if not os.path.lexists(out_path):  # never followed: a link's target is no answer
        raise SandboxError(_why_no_reports(proc.returncode, output, limits))
    return out_path


def _out_of_tasks(text: str) -> bool:
    """Whether ``text`` says the kernel refused a process or thread: at the task limit,
    probably (Python's words for EAGAIN from fork and from pthread_create)."""
    return "can't start new thread" in text or "Resource temporarily unavailable" in text


def _task_limit(limits: Limits) -> str:
    return (
        f"the job may run {limits.tasks} processes and threads together, and is probably "
        f"at that limit: PEAKWATCH_SANDBOX_PROCESSES={limits.processes} + "
        f"PEAKWATCH_SANDBOX_THREADS={limits.threads}; raise PEAKWATCH_SANDBOX_THREADS for "
        "more threads"
    )


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
            f"of {limits.cpu_seconds + CPU_GRACE} s{said}"
        )
    if name:
        return f"the compile process died of {name}{said}"
    if "MemoryError" in tail:
        return (
            f"the compile ran out of memory: a process reached its address-space limit of "
            f"{job_limits.size(limits.memory_bytes)} "
            f"(PEAKWATCH_SANDBOX_MEMORY_BYTES={limits.memory_bytes}){said}"
        )
    if _out_of_tasks(tail):
        return f"the compile could not start a process or thread: {_task_limit(limits)}{said}"
    return f"the compile process exited with {code} and no reports{said}"


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
