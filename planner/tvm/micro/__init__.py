"""Bare-metal exports of planned models, built for Cortex-M boards and run on QEMU.

The public API, for the command line and the micro board runner::

    from planner.tvm.micro import export_c, run_micro, micro_toolchain_missing

- :func:`export_c` (``export.py``) writes a planned model as a C project: TVM's kernels for
  target ``c``, a driver with every tensor at its planned offset in one static arena,
  ``const`` weights, no heap and no TVM runtime;
- :func:`run_micro` (``run.py``) exports, builds and runs a model on an emulated board under
  several strategies and returns one :class:`MicroResult` per strategy;
- :func:`micro_toolchain_missing` says why this machine cannot build or emulate (or None).

Names are resolved on first use, so importing the package (as the command line does to
register its subcommands) loads no TVM.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "export_c": "planner.tvm.micro.export",
    "ExportedProject": "planner.tvm.micro.export",
    "ExportError": "planner.tvm.micro.export",
    "run_micro": "planner.tvm.micro.run",
    "MicroResult": "planner.tvm.micro.run",
    "micro_toolchain_missing": "planner.tvm.micro.build",
    "INSTRUCTIONS_LABEL": "planner.tvm.micro.run",
    "Board": "planner.tvm.micro.boards",
    "BOARDS": "planner.tvm.micro.boards",
    "get_board": "planner.tvm.micro.boards",
    "resolve_board": "planner.tvm.micro.boards",
    "run_on_board": "planner.tvm.micro.report",
    "MicroPlanError": "planner.tvm.micro.plan",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
