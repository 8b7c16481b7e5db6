"""The TVM boundary: the only modules of the planner that import ``tvm``.

``lowering`` runs TVM's CPU pipeline up to the point where every operator output is an
explicit allocation, ``extract`` turns those allocations into a planning problem, ``apply``
writes a plan back as one arena, and ``execute`` builds, runs and times the result.
"""

import sys


def _import_tvm_without_torch() -> None:
    """Import TVM with PyTorch reading as not installed, so that a process pays for PyTorch
    only when it runs a PyTorch model.

    apache-tvm-ffi 0.1.14 imports ``torch`` at its own import whenever it is installed
    (``tvm_ffi/__init__.py``, for a symbol clash seen on Windows), which is most of the cost
    of ``import tvm`` here (docs/tvm.md, "What a process imports"); nothing TVM does for
    the wing needs it: the PyTorch frontend hands tensors over through the DLPack protocol.
    ``sys.modules[name] = None`` is Python's documented way to make an import raise
    ImportError, which tvm_ffi treats as "torch is not installed". The entry is removed
    right after, so a model file or source that imports torch later gets the real one.
    """
    if "tvm" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None
    try:
        import tvm  # noqa: F401
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]


_import_tvm_without_torch()
