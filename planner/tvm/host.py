"""What the compiling host is: versions and CPU, recorded with every Result.

Results from two CPUs, or two TVM builds, are not comparable; the board page and each
Result say which ones they came from.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import tvm

from planner.tvm.compat import git_hash


def tvm_version() -> str:
    return tvm.__version__


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "numpy": np.__version__,
        "tvm": tvm.__version__,
        "tvm_git_hash": git_hash(),
    }


def llvm_host() -> dict:
    """What ``llvm`` means on this host."""
    from tvm.target import codegen

    return {
        "llvm_cpu": str(codegen.llvm_get_system_cpu()),
        "llvm_triple": str(codegen.llvm_get_system_triple()),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
