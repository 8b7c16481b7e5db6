"""How fast the sandbox contains a job that attacks the host's processes, and at what cost.

    python benchmarks/containment.py                  # the three attacks, the default limits
    python benchmarks/containment.py --attack fork-bomb --wall-seconds 45

Runs, through the real sandbox (:func:`workers.sandbox.run_job`: bubblewrap, the job watch,
the kill), a hostile model file that

- ``fork-bomb``: forks forever, every process of it, and sleeps 10 ms when a fork is refused
  (the attack of issue 32);
- ``thread-bomb``: starts sleeping threads forever, and sleeps 10 ms when one is refused;
- ``fork-bomb-hog``: forks as the fork bomb does, and each new process first takes 64 MiB
  of memory of its own (under a 2 GiB memory limit);

and prints for each, in seconds from the attack's first step (a time the model writes before
it starts): when the worker killed the job (its log record), and when the job was contained
(``run_job`` returned, no process of it left: the kernel has torn every one down); the
seconds ``run_job`` took (the job's Python and TVM starting included); the most processes
and tasks (threads included) of the job seen at once (sampled every 20 ms from ``/proc``,
bwrap's first process included); the host's highest 1-minute load average while it ran; and
the message the job failed with. Target: contained within 10 s of the attack's start on a
two-core machine. Needs bubblewrap (the full sandbox); run it as root, as a worker runs, for
the jobs to run as nobody.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workers import job_limits, sandbox  # noqa: E402

TARGET_SECONDS = 10.0

#: The model file the containment tests run (each attack of issue 32).
HOSTILE = (ROOT / "tests" / "tracking" / "hostile_processes.py").read_text()

ATTACKS = {
    "fork-bomb": {},
    # No threads beyond the processes (a deployment allows 4 per core more): the limit, and
    # so the figures, are the same on any host.
    "thread-bomb": {"threads": 0},
    "fork-bomb-hog": {"memory_bytes": 2 << 30},
}


class Kills(logging.Handler):
    """When the worker killed a running job: its log record's time."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("killing the job"):
            self.times.append(record.created)


class Sampler(threading.Thread):
    """The most processes and tasks below this process, and the highest load average."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.processes = self.tasks = 0
        self.load = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.02):
            processes, tasks = job_counts()
            self.processes = max(self.processes, processes)
            self.tasks = max(self.tasks, tasks)
            self.load = max(self.load, os.getloadavg()[0])

    def stop(self) -> None:
        self._done.set()
        self.join()


def job_counts() -> tuple[int, int]:
    """Processes and tasks below this process: the sandboxed job, bwrap's first included."""
    below = job_limits.descendants(job_limits.tasks(), os.getpid())
    return len(below), sum(task.threads for task in below)


def run_attack(attack: str, folder: Path, wall_seconds: float) -> dict:
    tree = folder / "tree"
    (tree / "models").mkdir(parents=True)
    (tree / "models" / "hostile.py").write_text(HOSTILE)
    scratch = folder / "scratch"
    scratch.mkdir()
    job = {
        "model": f"hostile-{attack}", "source": "models/hostile.py:build",
        "params": {"attack": attack}, "strategies": ["tvm-stock"], "target": "llvm",
        "artifacts_dir": str(scratch / "out"), "base_dir": str(tree), "repeat": 0,
        "memory_configs": [],
    }
    limits = sandbox.Limits(wall_seconds=wall_seconds, **ATTACKS[attack])
    kills = Kills()
    logger = logging.getLogger("workers.sandbox.containment")
    logger.addHandler(kills)
    logger.setLevel(logging.INFO)
    sampler = Sampler()
    sampler.start()
    called = time.monotonic()
    try:
        reports = sandbox.run_job(job, scratch, tree=tree, limits=limits)
        said = "not stopped: " + "; ".join(r.error or "ok" for r in reports)
    except sandbox.SandboxError as exc:
        said = str(exc)
    returned = time.monotonic()
    now = time.time()
    sampler.stop()
    logger.removeHandler(kills)
    left = job_counts()[0]
    started = scratch / "home" / "attack-started"
    start = float(started.read_text()) if started.exists() else float("nan")
    return {
        "attack": attack, "contained_s": now - start,
        "killed_s": kills.times[0] - start if kills.times else float("nan"),
        "run_job_s": returned - called,
        "peak_processes": sampler.processes, "peak_tasks": sampler.tasks,
        "load": sampler.load, "left": left, "limit": limits.tasks, "said": said,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", choices=sorted(ATTACKS), action="append")
    parser.add_argument("--wall-seconds", type=float, default=45.0)
    args = parser.parse_args()
    if not sandbox.mode().full:
        print(f"the full sandbox is needed: {sandbox.mode().reason}", file=sys.stderr)
        return 2
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'attack':<15} {'killed':>8} {'contained':>10} {'run_job':>8} {'peak procs':>11} "
          f"{'peak tasks':>11} {'load':>6} {'left':>5}")
    failed = False
    for attack in args.attack or list(ATTACKS):
        with tempfile.TemporaryDirectory(prefix="peakwatch-containment-") as folder:
            found = run_attack(attack, Path(folder), args.wall_seconds)
        print(
            f"{found['attack']:<15} {found['killed_s']:>7.2f}s {found['contained_s']:>9.2f}s "
            f"{found['run_job_s']:>7.2f}s "
            f"{found['peak_processes']:>11} {found['peak_tasks']:>11} {found['load']:>6.2f} "
            f"{found['left']:>5}"
        )
        print(f"  {found['said'][:400]}")
        failed |= not found["contained_s"] < TARGET_SECONDS or found["left"] > 0
    print(f"target: contained within {TARGET_SECONDS:g} s of the attack's start, nothing left: "
          + ("missed" if failed else "met"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
