"""A sandboxed job reads Peakwatch's planner as bytecode the worker compiled: the job runs
with PYTHONDONTWRITEBYTECODE=1 on a read-only view of it, and would otherwise compile every
module from source again, in every job and every measuring process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from workers import sandbox
from workers.sandbox import bwrap, run


def test_a_job_finds_the_planner_compiled_even_where_its_bytecode_was_gone(tmp_path):
    if not sandbox.mode().full and not sandbox.Limits().allow_reduced:
        pytest.skip(sandbox.mode().reason)
    bytecode = Path(importlib.util.cache_from_source(str(bwrap.PLANNER_DIR / "tvm" / "cuda.py")))
    bytecode.unlink(missing_ok=True)
    run._compile_planner.cache_clear()

    answer = sandbox.run_probe("planner.tvm.cuda", tmp_path, limits=sandbox.Limits())

    assert isinstance(answer, dict)
    assert bytecode.is_file()
    assert bytecode.stat().st_mtime >= (bwrap.PLANNER_DIR / "tvm" / "cuda.py").stat().st_mtime
