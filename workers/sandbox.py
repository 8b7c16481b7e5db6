"""Run a compile job, and with it a tracked repository's code, in a locked-down child process.

Model factories, pipelines and planners come from repositories Peakwatch tracks, pull
requests from strangers included, so none of it runs in a worker. The child

- gets a scrubbed environment: ``PATH``, ``HOME`` and ``TMPDIR`` inside its scratch folder,
  nothing else (no database or broker URL, no tokens, no secret key);
- runs in its scratch folder (the commit's checkout and the artifacts) and can write
  nowhere else;
- has limits on address space, CPU time, file size and wall-clock time;
- with bubblewrap (Debian's ``bubblewrap``) present, sees only the system, Python and the
  planner read-only, and no network at all (``--unshare-net``): the *full* sandbox. Without
  it, the limits and the scrubbed environment still hold: the *reduced* sandbox, which the
  boards page shows with its reason.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from planner.report import StrategyReport

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Only the planner is visible to repository code, not the workers or the dashboard.
PLANNER_DIR = PROJECT_ROOT / "planner"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 8 << 30
    cpu_seconds: int = 1800
    file_bytes: int = 2 << 30
    wall_seconds: float = 1800.0
    #: How long a repository's own planner may take for one model.
    planner_seconds: float = 60.0

    @classmethod
    def from_settings(cls, values: dict | None) -> Limits:
        values = values or {}
        return cls(
            memory_bytes=int(values.get("MEMORY_BYTES", cls.memory_bytes)),
            cpu_seconds=int(values.get("CPU_SECONDS", cls.cpu_seconds)),
            file_bytes=int(values.get("FILE_BYTES", cls.file_bytes)),
            wall_seconds=float(values.get("WALL_SECONDS", cls.wall_seconds)),
            planner_seconds=float(values.get("PLANNER_SECONDS", cls.planner_seconds)),
        )


@dataclass(frozen=True)
class Mode:
    full: bool
    reason: str

    def to_json(self) -> dict:
        return {"mode": "full" if self.full else "reduced", "reason": self.reason}


class SandboxError(RuntimeError):
    """The child did not hand back reports: killed by a limit, crashed, or timed out."""


@functools.cache
def mode() -> Mode:
    """Whether this host gives the full sandbox, and why not when it does not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Mode(False, "bubblewrap (bwrap) is not installed: no network or file isolation")
    probe = subprocess.run(
        [bwrap, "--unshare-net", "--ro-bind", "/", "/", "true"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    if probe.returncode != 0:
        return Mode(False, f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}")
    return Mode(True, "bubblewrap: no network, read-only system, scrubbed environment, limits")


def run_job(
    job: dict, scratch: Path, *, tree: Path | None = None, limits: Limits, devices: bool = False,
    python: str | None = None, folders: tuple[str, ...] = (),
) -> list[StrategyReport]:
    """Run ``planner.tvm.job`` on ``job``; return its StrategyReports.

    ``scratch`` is the only folder the child may write (artifacts, its home, its temporary
    files); ``tree``, the commit's checkout, is its working directory, read-only.
    ``devices`` exposes the host's devices (a GPU) to the child. ``python`` is the
    interpreter to run (a toolchain's, :mod:`planner.tvm.toolchain`; the worker's own by
    default), and ``folders`` what it reads beyond the worker's environment, shown read-only.
    """
    scratch = Path(scratch).resolve()
    tree = Path(tree).resolve() if tree is not None else None
    for folder in ("home", "tmp"):
        (scratch / folder).mkdir(parents=True, exist_ok=True)
    job_path = scratch / "job.json"
    out_path = scratch / "reports.json"
    job_path.write_text(json.dumps(job))
    out_path.unlink(missing_ok=True)
    child = [python or sys.executable, "-m", "planner.tvm.job", str(job_path), str(out_path)]
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
    current = mode()
    if current.full:
        command = _bwrap(child, scratch, tree, env, devices=devices, folders=folders)
    else:
        command = child
    log.info("sandbox (%s): %s", "full" if current.full else "reduced", " ".join(child))
    proc = subprocess.Popen(
        command, cwd=tree or scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, preexec_fn=lambda: _apply_limits(limits),
    )
    try:
        output, _ = proc.communicate(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise SandboxError(
            f"the compile ran past its wall-clock limit of {limits.wall_seconds:g} s"
        ) from None
    finally:
        _kill_group(proc)  # nothing it started outlives it
    if output.strip():
        log.debug("sandboxed compile said:\n%s", output[-20000:])
    if not out_path.exists():
        raise SandboxError(_why_no_reports(proc.returncode, output, limits))
    return [StrategyReport.from_json(item) for item in json.loads(out_path.read_text())]


def _why_no_reports(code: int, output: str, limits: Limits) -> str:
    tail = output.strip()[-1500:]
    if code < 0:
        name = signal.Signals(-code).name
        hint = {
            "SIGXCPU": f"it used more than its {limits.cpu_seconds} s of CPU time",
            "SIGKILL": "it was killed (out of memory, or a limit)",
            "SIGXFSZ": f"it wrote a file larger than {limits.file_bytes} bytes",
            "SIGSEGV": "it crashed",
        }.get(name, "")
        return f"the compile process died of {name}" + (f": {hint}" if hint else "") + (
            f"\n{tail}" if tail else ""
        )
    if "MemoryError" in tail:
        return (
            f"the compile ran out of memory (limit {limits.memory_bytes} bytes)\n{tail}"
        )
    return f"the compile process exited with {code} and no reports\n{tail}"


def _apply_limits(limits: Limits) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _python_roots() -> list[Path]:
    """Folders the interpreter and its packages live in, to be mounted read-only."""
    roots = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    for entry in [*sys.path, site.getusersitepackages()]:
        path = Path(entry)
        if entry and path.is_dir() and "-packages" in path.name:
            roots.add(path)
    # Mounting a folder inside another one mounted already would hide nothing; keep both.
    return sorted(r.resolve() for r in roots if r.exists())


def _bwrap(
    child: list[str], scratch: Path, tree: Path | None, env: dict, *, devices: bool,
    folders: tuple[str, ...] = (),
) -> list[str]:
    args = [
        shutil.which("bwrap") or "bwrap",
        "--die-with-parent", "--new-session",
        "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--ro-bind", "/usr", "/usr",
        "--ro-bind", "/etc", "/etc",
    ]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for root in _python_roots():
        if not str(root).startswith("/usr/"):
            args += ["--ro-bind", str(root), str(root)]
    args += [
        "--ro-bind", str(PLANNER_DIR), str(PLANNER_DIR),
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--bind", str(scratch), str(scratch),
    ]
    # After the tmpfs: a toolchain kept under /tmp would be hidden by it otherwise.
    for folder in folders:
        args += ["--ro-bind", str(folder), str(folder)]
    if tree is not None:
        args += ["--ro-bind", str(tree), str(tree)]
    args += ["--chdir", str(tree or scratch), "--clearenv"]
    args += ["--dev-bind", "/dev", "/dev"] if devices else ["--dev", "/dev"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *child]
