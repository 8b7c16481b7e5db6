"""What differs between the apache-tvm releases the TVM wing runs on, in one place.

Toolchains (``planner/tvm/toolchain.py``) compile the same model with several TVM releases.
The wing is written against apache-tvm 0.27; where an older release spells something
differently, the difference is resolved here, once, and the rest of the wing imports the
name from this module. :func:`missing` lists what a release lacks that no adapter can make
up for: a toolchain with anything in that list is refused before any model runs, and its
message names the missing pieces.

Release notes, measured (see docs/toolchains.md, "Which releases work"):

- 0.27: the reference.
- 0.26: schedulable blocks are ``tvm.tirx.stmt.SBlock``/``SBlockRealize`` (0.27 moved them
  to ``tvm.s_tir.stmt``), and a block's regions are ``BufferRegion``s with ``.buffer``
  (0.27: ``TensorRegion``s with ``.source``).
- 0.25: Relax still describes values with ``StructInfo`` (``relax.TensorStructInfo``,
  ``expr.struct_info``, ``Var.name_hint``); the wing's extraction and rewrites read
  ``relax.TensorType``/``expr.ty``/``Var.name`` throughout, so it is refused.
"""

from __future__ import annotations

import importlib

import tvm

try:  # 0.27
    from tvm.s_tir.stmt import SBlock, SBlockRealize
except ImportError:
    try:  # 0.25, 0.26
        from tvm.tirx.stmt import SBlock, SBlockRealize
    except ImportError:  # refused by missing(), which names it
        SBlock = SBlockRealize = None

try:  # 0.27 moved the arithmetic analyser from tvm.arith to tvm.sym
    from tvm.sym import Analyzer
except ImportError:
    try:
        from tvm.arith import Analyzer
    except ImportError:  # then no copy is proven a slice, and none is inlined
        Analyzer = None

__all__ = ["Analyzer", "SBlock", "SBlockRealize", "git_hash", "missing", "region_buffer", "version"]


def region_buffer(region):
    """The buffer a block's read or write region covers (0.27: a ``TensorRegion``'s
    ``source``; 0.25 and 0.26: a ``BufferRegion``'s ``buffer``)."""
    source = getattr(region, "source", None)
    return source if source is not None else region.buffer


#: Names the wing uses that no adapter replaces, with what each is for (the refusal says).
REQUIRED = {
    "tvm.ir.Expr.ty": "types on Relax expressions (expr.ty, relax.TensorType), read by extraction",
    "tvm.relax.Var.name": "Relax variable names (Var.name), read by extraction and plans",
    "tvm.relax.VirtualMachine": "the Relax VM that runs and times every build",
    "tvm.relax.backend.cpu_generic.pipeline": "the CPU lowering pipeline planned against",
    "tvm.relax.transform.StaticPlanBlockMemory": "TVM's own planner (tvm-stock)",
    "tvm.relax.op.memory.alloc_storage": "one arena per planned build",
    "tvm.relax.op.memory.ensure_zero_offset": "tensors at an offset in the arena",
    "tvm.relax.frontend.nn": "the model zoo",
    "tvm.runtime.tensor": "host tensors (inputs and outputs)",
    "tvm.tirx.PrimFunc": "kernels, read for temporaries and in-place rewrites",
    "tvm.s_tir.Schedule": "kernel rewrites (in-place writes)",
    "tvm.ir.save_json": "plan.json's module artifact",
}


def version() -> str:
    return tvm.__version__


def git_hash() -> str:
    """The commit TVM was built from, as its build recorded it; empty when it did not."""
    try:
        from tvm import _version

        commit = getattr(_version, "__commit_id__", None) or ""
    except ImportError:
        commit = ""
    if not commit:
        # A build from source registers its libinfo natively (the wheels do not).
        get_global_func = getattr(tvm, "get_global_func", None)
        get_info = get_global_func and get_global_func("support.GetLibInfo", allow_missing=True)
        if get_info is not None:
            commit = str(dict(get_info()).get("GIT_COMMIT_HASH", ""))
    # setuptools-scm writes "g" + the abbreviated hash.
    return commit[1:] if len(commit) > 1 and commit[0] == "g" and _is_hex(commit[1:]) else commit


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text.lower())


def missing() -> list[str]:
    """What this TVM lacks of ``REQUIRED``, one line each, naming what it is for."""
    gaps = []
    if SBlock is None:
        gaps.append("tvm.s_tir.stmt.SBlock (schedulable blocks of kernels, read for temporaries)")
    for name, why in REQUIRED.items():
        if not _resolves(name):
            gaps.append(f"{name} ({why})")
    return gaps


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return False
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: index + 1]))
        except ImportError:
            # A field of an FFI object (Var.name) lives on instances; its class announces it.
            return (
                index == len(parts) - 1
                and isinstance(obj, type)
                and any(part in getattr(cls, "__annotations__", {}) for cls in obj.__mro__)
            )
    return True


def main() -> int:
    """``python -m planner.tvm.compat``: what a toolchain's TVM is and lacks, as JSON.

    Run in a toolchain's own interpreter when the toolchain is created
    (:mod:`planner.tvm.toolchain`), so a release that cannot work is refused before any
    model is compiled with it.
    """
    import json
    import sys

    import tvm_ffi

    sys.stdout.write(
        json.dumps(
            {
                "tvm_version": version(),
                "tvm_git_hash": git_hash(),
                "tvm_ffi_version": getattr(tvm_ffi, "__version__", ""),
                "tvm_path": str(getattr(tvm, "__file__", "")),
                "missing": missing(),
            }
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
