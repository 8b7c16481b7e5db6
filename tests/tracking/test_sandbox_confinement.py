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
from workers import sandbox
from workers.boards.cpu import CpuBoard

PROJECT = Path(__file__).resolve().parents[2]

HOSTILE = '''import json
import os
import signal
import time
from pathlib import Path

SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key",
           "/etc/ssl/private", "/root/.ssh")


def observed(**facts):
    return RuntimeError("OBSERVED" + json.dumps(facts) + "END")


def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split()[1:]


def build(attack: str, size: int = 0):
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
        children, error = [], ""
        try:
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children.append(pid)
        except OSError as exc:
            error = exc.strerror
        time.sleep(20)
        raise observed(forked=len(children), error=error)
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
    raise ValueError(attack)
'''


@pytest.fixture
def full_sandbox():
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")


@pytest.fixture
def hostile_tree(tmp_path):
    """A commit's checkout with the hostile model file."""
    tree = tmp_path / "tree"
    (tree / "models").mkdir(parents=True)
    (tree / "models" / "hostile.py").write_text(HOSTILE)
    return tree


def run_attack(tree: Path, scratch: Path, attack: str, limits: sandbox.Limits, **params):
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
    return sandbox.run_job(job, scratch, tree=tree, limits=limits)


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


@pytest.mark.usefixtures("full_sandbox")
def test_a_fork_bomb_is_killed_on_the_process_limit(hostile_tree, tmp_path):
    limits = sandbox.Limits(wall_seconds=120, processes=24)

    with pytest.raises(sandbox.SandboxError) as caught:
        run_attack(hostile_tree, tmp_path / "scratch", "fork-bomb", limits)

    assert "process limit of 24" in str(caught.value)
    assert "PEAKWATCH_SANDBOX_PROCESSES" in str(caught.value)


@pytest.mark.usefixtures("full_sandbox")
def test_children_hoarding_memory_together_are_killed_on_the_job_memory_limit(
    hostile_tree, tmp_path
):
    # Each child holds 450 MiB on top of what it shares with its parent (about 1 GiB of
    # address space with TVM loaded): within the 2 GiB address-space limit each, 2.2 GiB
    # together.
    limits = sandbox.Limits(wall_seconds=120, memory_bytes=2 << 30)

    with pytest.raises(sandbox.SandboxError) as caught:
        run_attack(hostile_tree, tmp_path / "scratch", "hoard", limits, size=450 << 20)

    assert "memory limit of 2.0 GiB" in str(caught.value)
    assert f"PEAKWATCH_SANDBOX_MEMORY_BYTES={2 << 30}" in str(caught.value)


@pytest.mark.usefixtures("full_sandbox")
def test_a_cpu_burner_is_killed_on_its_cpu_time_limit(hostile_tree, tmp_path):
    limits = sandbox.Limits(wall_seconds=120, cpu_seconds=4)

    with pytest.raises(sandbox.SandboxError) as caught:
        run_attack(hostile_tree, tmp_path / "scratch", "burn", limits)

    assert "CPU time limit" in str(caught.value)
    assert "PEAKWATCH_SANDBOX_CPU_SECONDS=4" in str(caught.value)


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
        cwd=project, env={**os.environ, "PYTHONPATH": str(project)}, capture_output=True,
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
