"""A tracked repository's code cannot hand the compile a file that is not what it is named.

A model file, run by a real worker through the real sandbox, leaves a ``fixed.npz`` in the
folder its import hands over: for one model an ELF shared library gcc built with an archive
appended (a file zipfile reads as the archive, and a loader maps as the library), for the
other the same archive alone. The first model fails, its Result naming the file and what it
is not; the second completes.
"""

from __future__ import annotations

import numpy as np
import pytest

from dashboard import actions
from dashboard.models import Result, Run
from tests.helpers import record_head
from tests.workers.conftest import wait_for
from tests.workers.test_handover_by_name import library_and_archive, npz_bytes
from workers import sandbox

HANDOVER = '''import json
import shutil
import sys
from pathlib import Path

from tvm.script import ir as I, relax as R, tirx as T

from planner.tvm.network import Network


def build(payload: str):
    # Left beside the model this returns, which the import then saves as it always does:
    # the worker reads the whole folder next.
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(job["base_dir"]) / payload, out / "fixed.npz")

    @I.ir_module
    class Copy:
        @T.prim_func
        def copy(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
            for i in range(4):
                y[i] = x[i]

        @R.function
        def forward(x: R.Tensor((4,), "float32")):
            cls = Copy
            y = R.call_tir(cls.copy, (x,), out_ty=R.Tensor((4,), "float32"))
            return y

    return Network("copy", Copy, ["x"], [(4,)], ["float32"])
'''

MANIFEST = '''[suite]
strategies = ["tvm-stock"]
boards = ["cpu"]

[[models]]
name = "library-as-npz"
source = "models/handover.py:build"
params = { payload = "models/library.npz" }

[[models]]
name = "plain-npz"
source = "models/handover.py:build"
params = { payload = "models/plain.npz" }
'''


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_library_handed_over_as_fixed_npz_fails_its_model_naming_the_file(
    empty_repo, tmp_path, start_worker
):
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")
    # "w" is no input of the model: an honest archive of it changes nothing in the compile.
    weights = {"w": np.zeros(4, "float32")}
    models = empty_repo.path / "models"
    models.mkdir()
    (models / "library.npz").write_bytes(library_and_archive(tmp_path, **weights))
    (models / "plain.npz").write_bytes(npz_bytes(**weights))
    empty_repo.write("models/handover.py", HANDOVER)
    empty_repo.write("peakwatch.toml", MANIFEST)
    empty_repo.commit("Hand over a library named fixed.npz")
    commit = record_head(empty_repo.path, "hostile")
    worker = start_worker()

    run = actions.start_run(commit)

    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 600, "the run", [worker.log_path])
    results = {r.model.name: r for r in Result.objects.filter(run=run).select_related("model")}
    assert set(results) == {"library-as-npz", "plain-npz"}
    hostile, plain = results["library-as-npz"], results["plain-npz"]
    assert "fixed.npz: it is not an .npz archive of numeric arrays" in hostile.error
    assert "its first bytes are b'\\x7fELF', an ELF file's" in hostile.error
    assert hostile.planned_bytes is None and hostile.measured_peak_bytes is None
    assert plain.error == "" and plain.planned_bytes is not None
    assert worker.poll() is None
