"""The bubblewrap command line a job runs under: its namespaces, what it sees of the host, its
environment, and the limit on its tasks, set inside its own user namespace."""

from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import stat
import subprocess
import sys
from pathlib import Path

from workers.sandbox.confinement import Stage

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Only the planner is visible to repository code, not the workers or the dashboard.
PLANNER_DIR = PROJECT_ROOT / "planner"

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


#: Run first in bwrap's sandbox: sets the limit on tasks (as confinement.limit_tasks),
#: becomes the job.
_TASK_LIMIT = (
    "import os, resource as r, sys; n = int(sys.argv[1]); h = r.getrlimit(r.RLIMIT_NPROC)[1]; "
    "n = n if h == r.RLIM_INFINITY else min(n, h); r.setrlimit(r.RLIMIT_NPROC, (n, n)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def in_task_limit(child: list[str], tasks: int) -> list[str]:
    """``child`` under a limit on its tasks (processes and threads), set in bwrap's sandbox.

    The kernel counts RLIMIT_NPROC per user and per user namespace, against the limit each
    namespace's creator had: set before bwrap, it would count every process of the user on
    the host (other workers' jobs); set in the namespace, it counts this job's alone, its
    PID namespace's first process (bwrap's, which runs as the job's user) included, as the
    job watch does.
    """
    return [child[0], "-I", "-c", _TASK_LIMIT, str(tasks), *child]


def python_roots() -> list[Path]:
    """Folders the interpreter and its packages live in, to be mounted read-only."""
    roots = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    for entry in [*sys.path, site.getusersitepackages()]:
        path = Path(entry)
        if entry and path.is_dir() and "-packages" in path.name:
            roots.add(path)
    # Mounting a folder inside another one mounted already would hide nothing; keep both.
    return sorted(r.resolve() for r in roots if r.exists())


def command(
    child: list[str], scratch: Path, tree: Path | None, env: dict, *, devices: bool,
    stage: Stage, folders: tuple[str, ...] = (),
) -> list[str]:
    """bwrap's command line that runs ``child`` in ``tree`` (or ``scratch``) with ``env``.

    bwrap's first process stays in the worker's PID namespace; the one it starts is the
    job's PID namespace's first process (its init, which reaps the job's orphans), and
    ``--die-with-parent`` kills it, and with it the whole namespace, when the first dies.
    """
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
    for root in python_roots():
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
