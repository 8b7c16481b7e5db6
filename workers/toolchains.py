"""The toolchains a worker compiles with: created on first use, kept in its data folder.

A suite's ``toolchains`` name TVM releases (:mod:`planner.tvm.toolchain`); each worker makes
the ones it is asked for under ``PEAKWATCH["TOOLCHAIN_DIR"]`` (``WORK_DIR/toolchains`` by
default), one at a time per spec (a file lock: two workers on one host wait for each other),
and says how it goes in the run's log. Local wheels and source folders may be named only
from the folders in ``PEAKWATCH_TOOLCHAIN_PATHS``: a manifest is written by whoever commits
to the tracked repository, and a folder named there is shown to the sandboxed compile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from planner.tvm import toolchain as toolchains
from planner.tvm.toolchain import Toolchain, ToolchainError

__all__ = ["Toolchain", "ToolchainError", "acquire", "root"]


def root() -> Path:
    configured = settings.PEAKWATCH.get("TOOLCHAIN_DIR")
    return Path(configured) if configured else Path(settings.PEAKWATCH["WORK_DIR"]) / "toolchains"


def acquire(spec: str, progress: Callable[[str], None]) -> Toolchain:
    """The toolchain ``spec`` names, ready to compile with; ToolchainError says why not."""
    allowed = [Path(p) for p in settings.PEAKWATCH.get("TOOLCHAIN_PATHS", [])]
    return toolchains.ensure(spec, root(), progress, allowed_paths=allowed)
