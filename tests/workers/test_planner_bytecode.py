"""A sandboxed job reads Peakwatch's planner as bytecode the worker compiled: the job runs
with PYTHONDONTWRITEBYTECODE=1 on a read-only view of it, and would otherwise compile every
module from source again, in every job and every measuring process.

Nothing here deletes bytecode from the checkout: another test process may be building a
wheel from it at the same moment."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from workers import sandbox
from workers.sandbox import bwrap, run


def _valid_bytecode(source: Path) -> bool:
    """Whether the bytecode beside ``source`` is the one Python would use for it: the
    source's modification time and size are in its header."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.is_file():
        return False
    header = cached.read_bytes()[:16]
    stat = source.stat()
    return (
        int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def test_a_job_starts_after_the_planner_is_compiled(tmp_path, monkeypatch):
    if not sandbox.mode().full and not sandbox.Limits().allow_reduced:
        pytest.skip(sandbox.mode().reason)
    compiled = []
    original = run._compile_planner.__wrapped__

    def compile_planner():
        original()
        compiled.append(all(_valid_bytecode(path) for path in bwrap.PLANNER_DIR.rglob("*.py")))

    monkeypatch.setattr(run, "_compile_planner", compile_planner)

    answer = sandbox.run_probe("planner.tvm.build.cuda", tmp_path, limits=sandbox.Limits())

    assert isinstance(answer, dict)
    assert compiled == [True]
