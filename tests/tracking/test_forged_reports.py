"""Repository code cannot forge a figure or smuggle out a host file.

A hostile model file, run by a real worker through the real sandbox, tries each of what an
attacker tried on a real deployment: writing its own reports (``planned_bytes=1``, artifacts
naming the worker's secret key and ``/proc/self/environ``, an artifact name that climbs out
of the artifact store), handing over links instead of files, and a model whose kernel calls
``system`` or pastes C source into the build through a loop's pragma. None of it is
recorded: the Results fail and say why, no page, artifact or API answer holds a byte of the
host, and the honest model after each attack completes.
"""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard import actions
from dashboard.models import Artifact, Result, Run
from tests.helpers import record_head
from tests.workers.conftest import wait_for
from workers import sandbox

HOSTILE = '''import json
import os
import sys
from pathlib import Path


def _forged(secret_path):
    return {
        "planned_bytes": 1, "intermediate_bytes": 1, "output_bytes": 0,
        "kernel_workspace_bytes": 0, "kernel_stack_bytes": 0, "measured_peak_bytes": 1,
        "outputs_match": True,
        "latency_ms": {"median": 0.001, "p90": 0.001, "samples": [0.001]},
        "artifacts": {
            "plan.json": secret_path, "model.so": "/proc/self/environ",
            "../../../../root/x.txt": secret_path,
        },
    }


def build(attack: str, secret: str = ""):
    job = json.loads(Path(sys.argv[1]).read_text())
    reports = Path(sys.argv[2])
    if attack == "forge":
        forged = [
            {**_forged(secret), "model": job["model"], "strategy": s}
            for s in job["strategies"]
        ]
        reports.write_text(json.dumps(forged))
        os._exit(0)
    if attack == "links":
        # Hand over links to host files where the model's files belong, and claim success.
        out = Path(job["out"])
        out.mkdir(parents=True, exist_ok=True)
        for name in ("module.json", "network.json"):
            os.symlink(secret, out / name)
        os.link(job["out"] + "/../job.json", out / "plans.json")
        reports.write_text("[]")
        os._exit(0)
    if attack == "extern":
        from tvm.script import ir as I, relax as R, tirx as T
        from planner.tvm.network import Network

        @I.ir_module
        class Module:
            @T.prim_func
            def shout(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
                T.evaluate(T.call_extern("int32", "system", "cat /etc/hostname"))
                for i in range(4):
                    y[i] = x[i]

            @R.function
            def forward(x: R.Tensor((4,), "float32")):
                cls = Module
                y = R.call_tir(cls.shout, (x,), out_ty=R.Tensor((4,), "float32"))
                return y

        return Network("extern", Module, ["x"], [(4,)], ["float32"])
    if attack == "pragma":
        # C source pasted into the build by a loop annotation: no call in sight.
        from tvm.script import ir as I, relax as R, tirx as T
        from planner.tvm.network import Network

        # Its own class name: TVMScript finds a class's source by name, first match wins.
        @I.ir_module
        class Pasted:
            @T.prim_func
            def paste(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
                for i in T.serial(4, annotations={"pragma_import_c": "int evil(void);"}):
                    y[i] = x[i]

            @R.function
            def forward(x: R.Tensor((4,), "float32")):
                cls = Pasted
                y = R.call_tir(cls.paste, (x,), out_ty=R.Tensor((4,), "float32"))
                return y

        return Network("pragma", Pasted, ["x"], [(4,)], ["float32"])
    raise ValueError(attack)
'''

ATTACKS = ("forge", "links", "extern", "pragma")
#: One strategy: a forged or refused handover fails every strategy alike, and TVM's stock
#: build is made whatever is asked, so this one costs the honest models no second build.
STRATEGIES = ("tvm-stock",)


def manifest(secret: str) -> str:
    lines = ['[suite]', f'strategies = {list(STRATEGIES)!r}'.replace("'", '"'),
             'boards = ["cpu"]', ""]
    for attack in ATTACKS:
        lines += ["[[models]]", f'name = "hostile-{attack}"', 'source = "models/hostile.py:build"',
                  f'params = {{ attack = "{attack}", secret = "{secret}" }}', ""]
        lines += ["[[models]]", f'name = "honest-after-{attack}"', 'source = "zoo:small_cnn"',
                  "params = { channels = 2, resolution = 8, depth = 1 }", ""]
    return "\n".join(lines)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_forged_reports_and_files_are_not_recorded(
    empty_repo, tmp_path, start_worker, monkeypatch
):
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")
    secret_value = "host-secret-7f3a9c"
    secret = tmp_path / "var" / "secret_key"
    secret.parent.mkdir()
    secret.write_text(secret_value)
    empty_repo.write("models/hostile.py", HOSTILE)
    empty_repo.write("peakwatch.toml", manifest(str(secret)))
    empty_repo.commit("Add a model that forges its figures")
    commit = record_head(empty_repo.path, "hostile")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "worker-secret-key-" + "y" * 40)
    worker = start_worker()

    run = actions.start_run(commit)

    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 600, "the run", [worker.log_path])
    results = {
        (r.model.name, r.strategy.name): r
        for r in Result.objects.filter(run=run).select_related("model", "strategy")
    }
    assert len(results) == 2 * len(ATTACKS) * len(STRATEGIES)
    for attack in ATTACKS:
        for strategy in STRATEGIES:
            honest = results[(f"honest-after-{attack}", strategy)]
            assert honest.error == "" and honest.planned_bytes > 1
            hostile = results[(f"hostile-{attack}", strategy)]
            assert hostile.error, attack
            # No forged figure is recorded: a failed Result has none.
            assert hostile.planned_bytes is None and hostile.measured_peak_bytes is None
            assert hostile.latency_median_ms is None
    error = {a: results[(f"hostile-{a}", "tvm-stock")].error for a in ATTACKS}
    assert "returned reports, not a model" in error["forge"]
    assert "module.json: it is a link" in error["links"]
    assert "calls the operator tirx.call_extern" in error["extern"]
    assert "annotation 'pragma_import_c'" in error["pragma"]

    # Nothing of the host in any artifact, page or API answer.
    stored = Artifact.objects.filter(result__run=run)
    assert stored.exists()
    assert not stored.filter(name__contains="x.txt").exists()
    assert not stored.filter(result__model__name__startswith="hostile").exists()
    for artifact in stored:
        with artifact.file.open("rb") as handle:
            content = handle.read()
        assert secret_value.encode() not in content and b"worker-secret-key" not in content
    client = Client()
    pages = [f"/runs/{run.pk}/", f"/runs/{run.pk}/results/", "/api/results/", "/api/runs/"]
    pages += [f"/artifacts/{a.pk}/download" for a in stored]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        body = b"".join(response) if response.streaming else response.content
        assert secret_value.encode() not in body and b"worker-secret-key" not in body, page
    # The worker survived all of it, and the run says results failed.
    assert worker.poll() is None
