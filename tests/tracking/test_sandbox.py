"""Repository code is untrusted: what it tries fails, the Result says why, and work goes on.

A hostile model file tries, one model each, to read the worker's secrets, reach PostgreSQL
and Redis on 127.0.0.1, write outside its folder, allocate far more memory than allowed,
and run forever. A real worker runs them through the real sandbox; after every attempt the
next model of the run, an honest one, completes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard import actions
from dashboard.models import Result, Run
from tests.helpers import record_head
from tests.tracking.conftest import FORK_CHILDREN
from tests.workers.conftest import wait_for
from workers import sandbox

PROJECT = Path(__file__).resolve().parents[2]

HOSTILE = '''import os
import socket
import stat
import time
from pathlib import Path

SECRET_WORDS = ("DATABASE", "REDIS", "SECRET", "TOKEN", "BROKER", "PASSWORD", "DJANGO")
''' + FORK_CHILDREN + '''


def build(attack: str, paths: list = ()):
    if attack == "secrets":
        seen = sorted(k for k in os.environ if any(w in k.upper() for w in SECRET_WORDS))
        raise RuntimeError(f"secrets seen: {', '.join(seen) or 'none'}")
    if attack in ("postgres", "redis"):
        port = 5432 if attack == "postgres" else 6379
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            raise RuntimeError(f"connected to {attack}")
    if attack == "write":
        failures = []
        for path in paths:
            try:
                Path(path).write_text("escaped")
            except OSError as exc:
                failures.append(f"{path}: {exc.strerror}")
        raise RuntimeError("writes refused: " + "; ".join(failures))
    if attack == "memory":
        hoard = bytearray(64 << 30)
        raise RuntimeError(f"allocated {len(hoard)} bytes")
    if attack == "forever":
        while True:
            pass
    if attack == "identity":
        lines = Path("/proc/self/status").read_text().splitlines()
        status = dict(line.split(":", 1) for line in lines)
        seen = [f"uid {status['Uid'].split()[0]}", f"caps {status['CapEff'].strip()}"]
        try:
            Path("/etc/shadow").read_text()
            seen.append("shadow readable")
        except OSError as exc:
            seen.append(f"shadow: {exc.strerror}")
        try:
            os.mknod(os.environ["TMPDIR"] + "/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            seen.append("mknod worked")
        except OSError as exc:
            seen.append(f"mknod: {exc.strerror}")
        raise RuntimeError(" | ".join(seen))
    if attack == "forks":
        forked, error = fork_children(200)
        if error:
            raise RuntimeError(f"forks refused after {forked}: {error}")
        raise RuntimeError(f"forked {forked}")
    raise ValueError(attack)
'''

ATTACKS = ("secrets", "postgres", "redis", "write", "memory", "forever", "identity", "forks")
#: One strategy: a failed import fails every strategy alike, and TVM's stock build is made
#: whatever is asked, so this one costs the honest models no second build.
STRATEGIES = ("tvm-stock",)
#: Short, so that the model that runs forever is stopped soon, yet twice what an honest
#: compile of this tiny model takes on a loaded two-core machine.
WALL_SECONDS = 20


def manifest(escape_paths: list[str]) -> str:
    lines = ['[suite]', f'strategies = {list(STRATEGIES)!r}'.replace("'", '"'),
             'boards = ["cpu"]', ""]
    for attack in ATTACKS:
        params = f'attack = "{attack}"'
        if attack == "write":
            params += ", paths = [" + ", ".join(f'"{p}"' for p in escape_paths) + "]"
        lines += ["[[models]]", f'name = "hostile-{attack}"', 'source = "models/hostile.py:build"',
                  f"params = {{ {params} }}", ""]
        lines += ["[[models]]", f'name = "honest-after-{attack}"', 'source = "zoo:small_cnn"',
                  "params = { channels = 2, resolution = 8, depth = 1 }", ""]
    return "\n".join(lines)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_hostile_repository_code_fails_and_the_run_goes_on(
    empty_repo, tmp_path, start_worker, monkeypatch
):
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")
    outside = tmp_path / "outside.txt"
    in_planner = PROJECT / "planner" / "escaped.txt"
    empty_repo.write("models/hostile.py", HOSTILE)
    empty_repo.write("peakwatch.toml", manifest([str(outside), str(in_planner)]))
    empty_repo.commit("Add a model that misbehaves")
    commit = record_head(empty_repo.path, "hostile")
    # The worker holds secrets in its environment; tight limits keep the test short.
    monkeypatch.setenv("DJANGO_SECRET_KEY", "worker-secret-key")
    monkeypatch.setenv("PEAKWATCH_SANDBOX_MEMORY_BYTES", str(6 << 30))
    monkeypatch.setenv("PEAKWATCH_SANDBOX_WALL_SECONDS", str(WALL_SECONDS))
    worker = start_worker()

    run = actions.start_run(commit)

    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 600, "the run", [worker.log_path])
    run.refresh_from_db()
    errors = {
        (r.model.name, r.strategy.name): r.error
        for r in Result.objects.filter(run=run).select_related("model", "strategy")
    }
    assert len(errors) == 2 * len(STRATEGIES) * len(ATTACKS), errors
    for attack in ATTACKS:
        for strategy in STRATEGIES:
            # The honest model after each attack completes.
            assert errors[(f"honest-after-{attack}", strategy)] == ""
            assert errors[(f"hostile-{attack}", strategy)], attack
    hostile = {attack: errors[(f"hostile-{attack}", "tvm-stock")] for attack in ATTACKS}
    assert "secrets seen: none" in hostile["secrets"]
    for service in ("postgres", "redis"):
        assert "Errno" in hostile[service] and f"connected to {service}" not in hostile[service]
    assert "writes refused" in hostile["write"] and "Read-only file system" in hostile["write"]
    assert not outside.exists() and not in_planner.exists()
    assert "MemoryError" in hostile["memory"]
    assert f"wall-clock limit of {WALL_SECONDS} s" in hostile["forever"]
    # An unprivileged user without capabilities, host secrets and device nodes out of reach.
    assert "uid 65534 | caps 0000000000000000" in hostile["identity"], hostile["identity"]
    assert "shadow readable" not in hostile["identity"]
    assert "mknod: Operation not permitted" in hostile["identity"]
    # The job's process limit stops a fork bomb long before 200.
    assert "forks refused after" in hostile["forks"] or "process" in hostile["forks"], hostile[
        "forks"]
    # The worker survived all of it and closed the run.
    assert worker.poll() is None
    assert run.status == Run.Status.PARTIAL and run.progress_done == run.progress_total
    # The hostile models' results, no others.
    assert run.failed_results == len(STRATEGIES) * len(ATTACKS)
