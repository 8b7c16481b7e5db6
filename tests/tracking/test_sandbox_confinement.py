"""Untrusted code cannot read a host file or outgrow its job: the sandbox's confinement.

A hostile model file, run through the real sandbox (:func:`workers.sandbox.run_job`, real
bubblewrap), looks at who it is, reads what it should not, makes device nodes, forks,
hoards memory across children and burns CPU. What it observed comes back in the failed
report's error; a job killed on a limit comes back as a SandboxError naming the limit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import actions
from dashboard.models import Result
from tests.tracking.conftest import FORK_CHILDREN
from workers import job_limits, sandbox
from workers.boards.cpu import CpuBoard

PROJECT = Path(__file__).resolve().parents[2]

HOSTILE = '''import ctypes
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key",
           "/etc/ssl/private", "/root/.ssh")
CHUNK = 64 << 20
''' + FORK_CHILDREN + '''


def observed(**facts):
    return RuntimeError("OBSERVED" + json.dumps(facts) + "END")


def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split()[1:]


def fill(fd: int, size: int) -> None:
    block = b"x" * (1 << 20)  # small, so that the writer itself does not grow
    for _ in range(size >> 20):
        os.write(fd, block)


def job_pss() -> int:
    """Bytes of this process and its children, as the job watch counts them."""
    total = 0
    for pid in [os.getpid(), *Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
                .read_text().split()]:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


HOLD = "import sys, time; hoard = b'x' * int(sys.argv[1]); print(flush=True); time.sleep(60)"


def hold_until(target: int) -> list:
    """Fresh processes holding memory until the job holds ``target`` bytes. Not forks: a
    fork shares its parent's pages, and the parent's every write would grow the total."""
    held = []
    while (missing := target - job_pss()) > CHUNK // 4:
        held.append(subprocess.Popen([sys.executable, "-c", HOLD, str(min(8 * CHUNK, missing))],
                                     stdout=subprocess.PIPE))
        held[-1].stdout.readline()
    return held


def build(attack: str, size: int = 0, name: str = ""):
    if attack == "identity":
        made = Path(os.environ["HOME"]) / "made-inside"
        made.write_text("by the model")
        raise observed(uid=status("Uid"), gid=status("Gid"), cap_eff=status("CapEff")[0],
                       uid_map=Path("/proc/self/uid_map").read_text(), made=str(made))
    if attack == "secrets":
        seen = {}
        for path in SECRETS:
            try:
                seen[path] = os.listdir(path) if os.path.isdir(path) else Path(path).read_text()
            except OSError as exc:
                seen[path] = f"refused: {exc.strerror}"
        raise observed(seen=seen)
    if attack == "mknod":
        made = {}
        for folder in (os.environ["HOME"], "/dev", "/tmp"):
            node = os.path.join(folder, "null-again")
            try:
                os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
                made[folder] = "made"
            except OSError as exc:
                made[folder] = f"refused: {exc.strerror}"
        raise observed(made=made)
    if attack == "fork-bomb":
        # Bounded, so that an unconfined sandbox only holds 200 sleeping processes.
        forked, error = fork_children(200)
        time.sleep(20)
        raise observed(forked=forked, error=error)
    if attack == "hoard":
        # Five children, each well within the address-space limit, together over the job's.
        children = []
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                hoard = b"x" * size
                time.sleep(60)
                os._exit(0)
            children.append(pid)
        time.sleep(20)
        raise observed(held=5 * size)
    if attack == "burn":
        while True:
            pass
    if attack == "memfd":
        fill(os.memfd_create("hoard"), size)
    elif attack == "sysv":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
        libc.shmdt.argtypes = (ctypes.c_void_p,)
        for _ in range(size // CHUNK):
            # Detached at once and never removed: no process maps it any more.
            segment = libc.shmget(0, CHUNK, 0o1600)
            address = libc.shmat(segment, None, 0)
            ctypes.memset(address, 1, CHUNK)
            libc.shmdt(address)
    elif attack in ("shm-unlinked", "scratch-unlinked"):
        folder = "/dev/shm" if attack == "shm-unlinked" else os.environ["HOME"]
        if attack == "shm-unlinked":
            # /dev/shm is a small tmpfs: the job's processes hold the rest of the limit.
            held = hold_until(size)
            size = 4 * CHUNK - CHUNK // 4
        fd = os.open(os.path.join(folder, "hoard"), os.O_RDWR | os.O_CREAT, 0o600)
        os.unlink(os.path.join(folder, "hoard"))
        fill(fd, size)
    elif attack == "scratch-files":
        for number in range(size):
            Path(os.environ["HOME"], f"file-{number}").write_text("x")
    elif attack == "scratch-bytes":
        for number in range(size // CHUNK):
            fill(os.open(os.path.join(os.environ["HOME"], f"big-{number}"),
                         os.O_WRONLY | os.O_CREAT, 0o600), CHUNK)
    if attack in ("memfd", "sysv", "shm-unlinked", "scratch-unlinked", "scratch-files",
                  "scratch-bytes"):
        time.sleep(20)
        raise observed(held=size)
    if attack == "devices":
        blocks = []
        for root, dirs, files in os.walk("/dev"):
            for entry in dirs + files:
                try:
                    if stat.S_ISBLK(os.lstat(os.path.join(root, entry)).st_mode):
                        blocks.append(os.path.join(root, entry))
                except OSError:
                    pass
        try:
            shm = Path("/dev/shm", name).read_text()
        except OSError as exc:
            shm = f"refused: {exc.strerror}"
        present = [p for p in ("/dev/mem", "/dev/kmsg", "/dev/port", "/dev/sda", "/dev/vda")
                   if os.path.lexists(p)]
        raise observed(blocks=blocks, present=present, shm=shm, in_shm=os.listdir("/dev/shm"))
    raise ValueError(attack)
'''


def run_attack(
    tree: Path, scratch: Path, attack: str, limits: sandbox.Limits, *, devices: bool = False,
    **params,
):
    """The job a board's compile sends for one model (workers/boards/base.py)."""
    scratch.mkdir(parents=True, exist_ok=True)
    job = {
        "model": f"hostile-{attack}",
        "source": "models/hostile.py:build",
        "params": {"attack": attack, **params},
        "strategies": ["tvm-stock"],
        "target": "llvm",
        "artifacts_dir": str(scratch / "out"),
        "base_dir": str(tree),
        "repeat": 0,
        "memory_configs": [],
    }
    return sandbox.run_job(job, scratch, tree=tree, limits=limits, devices=devices)


def observed(reports) -> dict:
    [report] = reports
    found = re.search(r"OBSERVED(.*)END", report.error, re.S)
    assert found, report.error
    return json.loads(found.group(1))


LIMITS = sandbox.Limits(wall_seconds=120)


@pytest.mark.usefixtures("full_sandbox")
def test_it_runs_as_an_unprivileged_user_without_capabilities(hostile_tree, tmp_path):
    scratch = tmp_path / "scratch"

    seen = observed(run_attack(hostile_tree, scratch, "identity", LIMITS))

    assert "0" not in seen["uid"] and "0" not in seen["gid"], seen
    assert int(seen["cap_eff"], 16) == 0, seen
    # Inside, the user namespace may map its uid through bwrap's own; on the host, what it
    # wrote belongs to the sandbox's user, not to root.
    made = scratch / "home" / "made-inside"
    assert made.read_text() == "by the model"
    if os.geteuid() == 0:
        owner = made.stat()
        assert (owner.st_uid, owner.st_gid) == (LIMITS.user, LIMITS.group), seen["uid_map"]
        assert LIMITS.user != 0 and LIMITS.group != 0


@pytest.mark.usefixtures("full_sandbox")
def test_it_reads_no_shadow_file_and_no_key(hostile_tree, tmp_path):
    seen = observed(run_attack(hostile_tree, tmp_path / "scratch", "secrets", LIMITS))["seen"]

    for path, outcome in seen.items():
        assert outcome.startswith("refused:"), (path, outcome)
    # Hidden, not merely unreadable: /etc is an allowlist.
    assert seen["/etc/shadow"] == "refused: No such file or directory"


@pytest.mark.usefixtures("full_sandbox")
def test_it_makes_no_device_node(hostile_tree, tmp_path):
    made = observed(run_attack(hostile_tree, tmp_path / "scratch", "mknod", LIMITS))["made"]

    assert set(made) == {str(tmp_path / "scratch" / "home"), "/dev", "/tmp"}
    for folder, outcome in made.items():
        assert outcome.startswith("refused:"), (folder, outcome)


def on_disk(path: Path) -> bool:
    """Whether ``path`` lies on a disk, not on a tmpfs (where deleted files are memory)."""
    kind = job_limits.mounts("self").get(path.stat().st_dev, ("", ""))[1]
    return bool(kind) and kind not in job_limits.MEMORY_FILESYSTEMS


TWO_GIB = 2 << 30
MEMORY_REASON = ("memory limit of 2.0 GiB", f"PEAKWATCH_SANDBOX_MEMORY_BYTES={TWO_GIB}")
SCRATCH_BYTES_REASON = ("scratch limit of 64.0 MiB", f"PEAKWATCH_SANDBOX_SCRATCH_BYTES={64 << 20}")


@pytest.mark.usefixtures("full_sandbox")
@pytest.mark.parametrize(("attack", "limits", "size", "reason"), [
    pytest.param("fork-bomb", {"processes": 24}, 0,
                 ("process limit of 24", "PEAKWATCH_SANDBOX_PROCESSES"), id="fork-bomb"),
    # Each child holds 450 MiB on top of what it shares with its parent (about 1 GiB of
    # address space with TVM loaded): within the 2 GiB address-space limit each, 2.2 GiB
    # together.
    pytest.param("hoard", {"memory_bytes": TWO_GIB}, 450 << 20, MEMORY_REASON,
                 id="children-hoarding-memory"),
    # Memory in files no process's size shows: each grows to twice the job's limit.
    pytest.param("memfd", {"memory_bytes": TWO_GIB}, 2 * TWO_GIB, MEMORY_REASON, id="memfd"),
    pytest.param("sysv", {"memory_bytes": TWO_GIB}, 2 * TWO_GIB, MEMORY_REASON,
                 id="sysv-shared-memory-detached"),
    # /dev/shm is 256 MiB: children fill the job to near its limit, a deleted file tips it.
    pytest.param("shm-unlinked", {"memory_bytes": TWO_GIB}, TWO_GIB - (128 << 20),
                 MEMORY_REASON, id="deleted-file-in-dev-shm"),
    pytest.param("scratch-unlinked", {"memory_bytes": TWO_GIB, "scratch_bytes": 64 << 20},
                 256 << 20, None, id="deleted-file-in-scratch"),
    pytest.param("scratch-files", {"scratch_files": 200}, 2000,
                 ("limit of 200 files", "PEAKWATCH_SANDBOX_SCRATCH_FILES=200"),
                 id="scratch-files"),
    pytest.param("scratch-bytes", {"scratch_bytes": 64 << 20}, 256 << 20,
                 SCRATCH_BYTES_REASON, id="scratch-bytes"),
    pytest.param("burn", {"cpu_seconds": 4}, 0,
                 ("CPU time limit", "PEAKWATCH_SANDBOX_CPU_SECONDS=4"), id="cpu-burner"),
])
def test_a_job_over_a_limit_is_killed_and_told_which(
    hostile_tree, tmp_path, attack, limits, size, reason
):
    scratch = tmp_path / "scratch"
    if reason is None:  # a deleted file is memory on a tmpfs, disk on a disk
        reason = SCRATCH_BYTES_REASON if on_disk(tmp_path) else MEMORY_REASON

    try:
        reports = run_attack(hostile_tree, scratch, attack,
                             sandbox.Limits(wall_seconds=120, **limits), size=size)
    except sandbox.SandboxError as exc:
        stopped = str(exc)
    else:
        # What the job said instead of being stopped: the attack's own account (what it
        # held), or why it could not attack.
        pytest.fail(f"the job was not stopped; it returned {[r.error for r in reports]}")

    for words in reason:
        assert words in stopped


@pytest.mark.usefixtures("full_sandbox")
def test_a_gpu_boards_job_sees_no_host_device_and_not_the_hosts_shared_memory(
    hostile_tree, tmp_path
):
    host_file = Path("/dev/shm", f"peakwatch-test-{os.getpid()}")
    host_file.write_text("host secret")
    try:
        seen = observed(run_attack(hostile_tree, tmp_path / "scratch", "devices", LIMITS,
                                   devices=True, name=host_file.name))
    finally:
        host_file.unlink()

    assert seen["blocks"] == [] and seen["present"] == [], seen
    assert seen["shm"].startswith("refused:") and host_file.name not in seen["in_shm"], seen


@pytest.mark.usefixtures("full_sandbox")
def test_a_project_under_tmp_is_not_hidden_by_the_sandboxs_own_tmp(
    hostile_tree, tmp_path
):
    # The sandbox's own /tmp is a fresh tmpfs; a worker deployed under /tmp (here: a copy of
    # the project in pytest's temporary folder) must still show the planner to the job.
    project = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__")
    for package in ("planner", "workers"):
        shutil.copytree(PROJECT / package, project / package, ignore=ignore)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from workers import sandbox\n"
        "job, scratch, tree = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])\n"
        "reports = sandbox.run_job(job, scratch, tree=tree, limits=sandbox.Limits())\n"
        "print(json.dumps([r.error for r in reports]))\n"
    )
    job = {
        "model": "hostile-identity", "source": "models/hostile.py:build",
        "params": {"attack": "identity"}, "strategies": ["tvm-stock"], "target": "llvm",
        "artifacts_dir": str(scratch / "out"), "base_dir": str(hostile_tree), "repeat": 0,
        "memory_configs": [],
    }

    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(job), str(scratch), str(hostile_tree)],
        # The copy first; the rest of the project (the settings that workers.trust's imports
        # read) from where it is.
        cwd=project, env={**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{PROJECT}"},
        capture_output=True,
        text=True, timeout=300, check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    [error] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "OBSERVED" in error, error  # the model ran: the planner was found


@pytest.fixture
def without_bubblewrap(monkeypatch, tmp_path):
    """A host with no bwrap on the PATH: the reduced sandbox, probed for real."""
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "bwrap").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert shutil.which("bwrap") is None
    sandbox.mode.cache_clear()
    yield
    monkeypatch.undo()
    sandbox.mode.cache_clear()


@pytest.mark.django_db
def test_without_bubblewrap_no_repository_code_runs_unless_a_setting_allows_it(
    without_bubblewrap, hostile_tree, tmp_path, client
):
    assert not sandbox.mode().full
    board = CpuBoard(limits=LIMITS)

    with pytest.raises(sandbox.SandboxError) as caught:
        run_attack(hostile_tree, tmp_path / "scratch", "identity", LIMITS)
    health = board.health()
    actions.mark_board_seen("cpu", {**board.describe(), **health.to_json()})

    assert "PEAKWATCH_SANDBOX_ALLOW_REDUCED=1" in str(caught.value)
    assert "bubblewrap (bwrap) is not installed" in str(caught.value)
    assert not (tmp_path / "scratch" / "home" / "made-inside").exists()
    # A run sent to this worker fails every Result with this reason (workers/tasks.py).
    assert not health.online and "PEAKWATCH_SANDBOX_ALLOW_REDUCED=1" in health.reason
    page = client.get("/boards/").content.decode()
    assert "offline" in page and "runs no repository code" in page
    allowed = CpuBoard(limits=sandbox.Limits(allow_reduced=True))
    assert allowed.health().online
    assert allowed.describe()["sandbox"] == {
        "mode": "reduced", "reason": sandbox.mode().reason, "allowed": True,
    }


@pytest.mark.django_db
def test_the_run_page_says_which_sandbox_each_board_compiled_in(client, recorded_history):
    run = recorded_history[-1]
    Result.objects.filter(run=run).update(environment={"sandbox": "full"})

    page = client.get(run.get_absolute_url()).content.decode()
    assert "data-sandbox" in page and "data-sandbox-reduced" not in page

    Result.objects.filter(run=run, strategy__name="none").update(
        environment={"sandbox": "reduced"}
    )
    page = client.get(run.get_absolute_url()).content.decode()
    assert "full, reduced" in page and "data-sandbox-reduced" in page


def test_the_image_has_bubblewrap_and_its_workers_may_make_namespaces():
    # No Docker engine runs here: what a compose deployment needs is read from its files.
    import yaml

    dockerfile = (PROJECT / "Dockerfile").read_text()
    compose = yaml.safe_load((PROJECT / "docker-compose.yml").read_text())

    assert re.search(r"apt-get install[^\n]*\bbubblewrap\b", dockerfile)
    workers = {n: s for n, s in compose["services"].items() if n.startswith("worker-")}
    assert workers
    for name, service in workers.items():
        options = set(service.get("security_opt", []))
        assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= options
        assert not service.get("privileged") and not service.get("cap_add"), name
        assert "PEAKWATCH_SANDBOX_ALLOW_REDUCED" not in str(service.get("environment", "")), name
