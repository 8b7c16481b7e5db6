"""A clone of Peakwatch under /tmp compiles in the full sandbox.

The sandbox mounts a fresh tmpfs on /tmp; it once did so after binding the planner, so a
project cloned under /tmp failed every Result with ``No module named 'planner'``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from workers import sandbox

PROJECT = Path(__file__).resolve().parents[2]

COMPILE = """
import json, os, sys
from pathlib import Path
import django
django.setup()
from workers.boards.cpu import CpuBoard
reports = CpuBoard().measure(
    model_name="tiny", source="zoo:small_cnn",
    params={"channels": 2, "resolution": 8, "depth": 1},
    strategies=["tvm-stock", "greedy-by-size"], artifacts_dir=Path(sys.argv[1]), repeat=1,
)
print(json.dumps([[r.error, r.planned_bytes, sorted(r.artifacts)] for r in reports]))
"""


@pytest.mark.slow
def test_a_clone_under_tmp_compiles_in_the_sandbox():
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")
    # Under /tmp itself, wherever pytest keeps its own folders.
    root = Path(tempfile.mkdtemp(prefix="peakwatch-clone-", dir="/tmp"))
    try:
        clone = root / "peakwatch"
        subprocess.run(["git", "clone", "--quiet", str(PROJECT), str(clone)], check=True)
        artifacts = root / "artifacts"
        artifacts.mkdir()
        env = {
            key: value for key, value in os.environ.items()
            if not key.startswith(("DATABASE_URL", "REDIS_URL", "PYTHONPATH"))
        }
        env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_DATA_DIR=str(root))

        done = subprocess.run(
            [sys.executable, "-c", COMPILE, str(artifacts)], cwd=clone, env=env,
            capture_output=True, text=True, timeout=600, check=False,
        )

        assert done.returncode == 0, done.stderr[-3000:]
        for error, planned, artifacts_taken in json.loads(done.stdout.strip().splitlines()[-1]):
            assert error is None and planned > 0
            assert "plan.json" in artifacts_taken
    finally:
        shutil.rmtree(root, ignore_errors=True)
