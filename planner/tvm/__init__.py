"""The TVM boundary: the only modules of the planner that import ``tvm``.

One folder per stage a model goes through, in order (docs/tvm.md, "The wing's map"):
``sources`` (how a model comes in) and ``zoo`` (the built-in networks), ``plan`` (from a
Relax module to a planning problem and back), ``build`` (executables, checks), ``measure``
(what a build really holds); ``compile`` calls them in order, and ``llm``, ``micro`` and the
sandboxed ``job`` sit above it.
"""

import importlib.abc
import importlib.machinery
import sys

#: The packages whose first import imports torch when it is installed.
_IMPORTING_TORCH = ("tvm", "tvm_ffi")


class _TvmWithoutTorch(importlib.abc.MetaPathFinder):
    """Makes the first import of TVM see PyTorch as not installed, so that a process pays
    for PyTorch only when it runs a PyTorch model.

    TVM 0.27 imports ``torch`` at its own import whenever it is installed:
    apache-tvm-ffi's ``__init__`` (for a symbol clash seen on Windows) and
    ``tvm.relax.base_py_module`` (for its DLPack helpers), about two thirds of ``import tvm``
    here (docs/tvm.md, "What a compile pays for"). Nothing TVM does for the wing needs it:
    the PyTorch importer hands tensors over through the DLPack protocol. While ``tvm`` (or
    ``tvm_ffi``, if it comes first) runs its own import, ``sys.modules["torch"]`` is None,
    Python's documented way to make an import raise ImportError, which both read as "torch
    is not installed"; the entry is removed right after, so a model file or source that
    imports torch later gets the real one. Nothing happens where torch is already imported,
    or once TVM is: importing this package costs nothing, and a process that never imports
    TVM is not touched.
    """

    def find_spec(self, name, path=None, target=None):
        if name not in _IMPORTING_TORCH or "torch" in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _TorchHidden(spec.loader)
        return spec


class _TorchHidden(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        hidden = "torch" not in sys.modules
        if hidden:
            sys.modules["torch"] = None
        try:
            self._loader.exec_module(module)
        finally:
            if hidden and sys.modules.get("torch", 0) is None:
                del sys.modules["torch"]


if "tvm" not in sys.modules and not any(
    isinstance(finder, _TvmWithoutTorch) for finder in sys.meta_path
):
    sys.meta_path.insert(0, _TvmWithoutTorch())
