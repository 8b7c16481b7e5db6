"""Kernel libraries built once per model and shared by every build that has the same kernels.

A memory plan changes only the Relax function: where each tensor lives in the arena. The
kernels (the PrimFuncs) are the same for every strategy that rewrites none of them, so
building the whole module again per strategy would generate, JIT-compile and export the
same machine code once per strategy. ``relax.build`` is three steps (TVM's
``relax/vm_build.py``): VM code generation (``_vmcodegen``), which leaves the PrimFuncs; the
TIR build of those PrimFuncs (``tvm.tirx.build``, LLVM code generation, most of the time);
and the link (``relax.VMLink``), which makes the executable import the kernel library.
:class:`KernelLibraries` runs the first and last per build and the middle one per distinct
set of kernels, compared by structural equality. Executables that share a library share
its runtime module, so it is JIT-compiled once, at the first ``VirtualMachine``, and
exported to one shared object (:meth:`KernelLibraries.export`) that a measuring process
loads once (:mod:`planner.tvm.measure.memory`).

The executable's own part (bytecode and bound constants) is saved alone with
:func:`save_executable` and put back together with its kernels by :func:`load_executable`.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tvm
import tvm_ffi
from tvm import relax
from tvm.relax import vm_build

from planner.tvm.build.quiet_io import LOAD_EXECUTABLE
from planner.tvm.plan import workspace


@dataclass
class KernelLibrary:
    """One compiled set of kernels and the builds that link it."""

    #: The PrimFuncs it was built from, and their structural hash, to compare with a later
    #: build's.
    functions: tvm.IRModule
    key: int
    target: str
    #: The runtime module every executable of this library imports.
    runtime: tvm.runtime.Module
    #: The shared object :meth:`KernelLibraries.export` wrote, once, and that file loaded.
    exported: Path | None = None
    loaded: tvm.runtime.Module | None = None
    #: Its machine code as an object file, written once for every ``model.so`` that links
    #: it (:meth:`KernelLibraries.export_model`).
    object_file: Path | None = None
    builds: int = 0
    #: Each kernel's workspace requests as built
    #: (:func:`planner.tvm.plan.workspace.kernel_requests`), read while it was built for a
    #: CPU; None where not read.
    workspace: dict[str, list | None] | None = None
    #: An earlier library whose machine code this one's holds no copy of: only the kernels
    #: that differ from ``base``'s (or that it lacks) were built here, and the loaded shared
    #: object imports ``base``'s, where the runtime finds the rest (the VM looks a kernel up
    #: in the library first, then in what it imports, and so on down: ``functions`` is
    #: always the whole set a name resolves to).
    base: KernelLibrary | None = None
    #: The module attributes it was built with: a base must have been built with the same.
    attrs: object = None


class _Once:
    """Values made once per IR module (compared by structural equality) and target, from
    any number of threads: a thread asking for one that another thread is making waits for
    it instead of making it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.made: list[tuple[int, str, tvm.IRModule, object]] = []
        self._making: list[tuple[int, str, tvm.IRModule, threading.Event]] = []

    def get(self, mod: tvm.IRModule, target: str, make: Callable[[], object],
            key: int | None = None) -> object:
        key = tvm_ffi.structural_hash(mod) if key is None else key
        while True:
            with self._lock:
                found = _equal(self.made, key, target, mod)
                if found is not None:
                    return found[3]
                busy = _equal(self._making, key, target, mod)
                if busy is None:
                    mine = (key, target, mod, threading.Event())
                    self._making.append(mine)
                    break
            # Then looked up again: found, or made here if that thread's attempt failed.
            busy[3].wait()
        try:
            value = make()
            with self._lock:
                self.made.append((key, target, mod, value))
            return value
        finally:
            with self._lock:
                self._making.remove(mine)
            mine[3].set()


def _equal(entries: list, key: int, target: str, mod: tvm.IRModule):
    for entry in entries:
        if entry[:2] == (key, target) and tvm_ffi.structural_equal(entry[2], mod):
            return entry
    return None


class KernelLibraries:
    """The kernel libraries of one process's builds: each distinct one built once, whichever
    thread asks for it."""

    def __init__(self) -> None:
        self._libraries = _Once()
        #: Every module built, with its executable: two strategies whose plans come out the
        #: same (several strategies often find the same offsets) are one build.
        self._executables = _Once()
        #: Where each library's object file is written as soon as it is built, for a
        #: compile that exports its builds (:meth:`export`, :meth:`export_model`); with
        #: ``load_kernels``, also linked to a shared object there and loaded, and every
        #: later build linked to that (a compile that keeps no ``model.so``: one that does
        #: links its executables to the library's code to export them whole).
        self.emit_to: Path | None = None
        self.load_kernels = False

    @property
    def libraries(self) -> list[KernelLibrary]:
        # A set of kernels all of one library's serves as that library: listed once.
        return list({id(entry[3]): entry[3] for entry in self._libraries.made}.values())

    def build(self, mod: tvm.IRModule, target: tvm.target.Target) -> relax.VMExecutable:
        """``relax.build(mod, target, relax_pipeline=None)``, with the kernel library of an
        earlier build of the same kernels for the same target where there is one. A module
        equal to one built before (kernels, plan and constants) gets that build's
        executable itself: callers run, check and measure it once."""
        return self._executables.get(mod, str(target), lambda: self._build(mod, target))

    def _build(self, mod: tvm.IRModule, target: tvm.target.Target) -> relax.VMExecutable:
        attrs = dict(mod.attrs) if mod.attrs else {}
        params = dict(attrs.get("const_name_to_constant", {}))
        external = list(attrs.get("external_mods", []))
        builder = relax.ExecBuilder()
        leftover = vm_build._vmcodegen(builder, mod, "bytecode")
        functions = {
            gv: func for gv, func in leftover.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc)
        }
        library = None
        if functions:
            kernels = tvm.IRModule(functions)
            key = tvm_ffi.structural_hash(kernels)
            library = self._libraries.get(
                kernels, str(target),
                lambda: self._compile(kernels, key, leftover.attrs, target), key=key,
            )
            with self._libraries._lock:
                library.builds += 1
        device_modules = [m for m in external if vm_build._is_device_module(m)]
        host_modules = [m for m in external if not vm_build._is_device_module(m)]
        runtime = library.runtime if library is not None else None
        if library is not None and library.loaded is not None and not device_modules:
            # Its machine code, loaded already: this executable runs without a JIT compile
            # and without being saved and loaded again.
            runtime = library.loaded
        if runtime is not None:
            for module in device_modules:
                runtime.import_module(module)
        linked = relax._ffi_api.VMLink(builder, target, runtime, host_modules, params)
        executable = relax.VMExecutable(linked)
        executable.kernel_library = library
        executable.kernels_loaded = library is not None and runtime is library.loaded
        return executable

    def _compile(self, kernels: tvm.IRModule, key: int, attrs, target) -> KernelLibrary:
        base, own = self._base_for(kernels, attrs, target)
        if base is not None and not own:
            return base  # every kernel is one of that library's, as it is
        tir_mod = tvm.IRModule(own if base is not None else dict(kernels.functions), attrs=attrs)
        tir_mod = vm_build._auto_attach_system_lib_prefix(tir_mod, target, None)
        # The CPU pool's requests are read from the kernels as built, not estimated.
        reading = workspace.capture() if target.kind.name == "llvm" else contextlib.nullcontext()
        with reading as requests:
            runtime = tvm.tirx.build(tir_mod, target=target)
        if target.kind.name == "cuda":
            from planner.tvm.build import cuda

            # A kernel the board could not compile fails here, on any host.
            cuda.compile_kernels(runtime, target)
        if base is not None:
            requests = _requests_of(base, kernels, requests)
        library = KernelLibrary(
            kernels, key, str(target), runtime, workspace=requests, base=base, attrs=attrs
        )
        if self.emit_to is not None and runtime.kind == "llvm":
            # In the thread that built it, beside the other library's build, rather than
            # later in the one thread that saves every build.
            _emit(library, self.emit_to)
            if self.load_kernels and not runtime.imports:
                self.export(library, self.emit_to)
                self.loaded(library)
        return library

    def _base_for(self, kernels: tvm.IRModule, attrs, target) -> tuple[KernelLibrary | None, dict]:
        """The library already built that holds most of ``kernels`` as they are, and the
        kernels it lacks (by name, compared by structural equality); (None, {}) where none
        holds any, or where libraries are not loaded as they are built.

        An LLM deployment's functions are planned one by one, and each one's plan changes a
        few of the kernels (temporaries lifted, ``noalias`` dropped) while the KV cache's
        attention kernels, most of the machine code, stay the same: built once, not once a
        function. Only where each library is loaded as it is built (``load_kernels``), so
        that nothing links the two into one ``model.so``, whose kernels would clash by name.
        """
        if not (self.load_kernels and self.emit_to is not None and target.kind.name == "llvm"):
            return None, {}
        with self._libraries._lock:
            candidates = [
                library for library in self.libraries
                if library.target == str(target)
                and library.runtime.kind == "llvm" and not library.runtime.imports
                and library.loaded is not None
                and tvm_ffi.structural_equal(library.attrs, attrs)
            ]
        best, best_own, best_shared = None, {}, 0
        for library in candidates:
            theirs = {gv.name_hint: func for gv, func in library.functions.functions.items()}
            own = {
                gv: func for gv, func in kernels.functions.items()
                if gv.name_hint not in theirs
                or not tvm_ffi.structural_equal(theirs[gv.name_hint], func)
            }
            shared = len(kernels.functions) - len(own)
            if shared > best_shared:
                best, best_own, best_shared = library, own, shared
        return best, best_own

    def files(self, library: KernelLibrary, folder: Path) -> list[Path]:
        """The shared objects a process loads for ``library``, each importing the next
        (:meth:`export`): the library's own, then its base's."""
        files = [self.export(library, folder)]
        if library.base is not None:
            files += self.files(library.base, folder)
        return files

    def export(self, library: KernelLibrary, folder: Path, **options) -> Path:
        """``library`` as a shared object in ``folder``, written the first time only (a
        library built on a base: its own kernels only, see :meth:`files`)."""
        if library.exported is None or not library.exported.is_file():
            path = Path(folder) / f"kernels-{library.key & (2**64 - 1):016x}.so"
            if options:
                library.runtime.export_library(str(path), **options)
            else:
                self._link(library.runtime, library, path, Path(folder))
            library.exported, library.loaded = path, None
        return library.exported

    def export_model(self, executable: relax.VMExecutable, path: Path, folder: Path) -> None:
        """``executable`` as one shared object at ``path`` (its kernels and its own part),
        as ``export_library`` writes it, with the kernels' machine code generated once per
        library: ``export_library`` runs LLVM's code generation for the kernels again at
        every call, which made each distinct plan of a kept compile cost a kernel build.
        ``folder`` keeps the library's object file for the next build that links it."""
        library = library_of(executable)
        if library is None:
            from planner.tvm.build.quiet_io import export_library

            export_library(executable, str(path))
        else:
            self._link(executable.mod, library, path, Path(folder))

    def _link(
        self, root: tvm.runtime.Module, library: KernelLibrary, path: Path, folder: Path
    ) -> None:
        """What ``root.export_library(path)`` writes where ``library`` is the one module of
        ``root``'s tree compiled to machine code, from the library's object file (written
        the first time). Any other tree (C sources, a second compiled module) is exported
        by ``export_library`` itself."""
        from tvm.runtime import _ffi_api as runtime_api
        from tvm.support import cc

        from planner.tvm.build.quiet_io import quiet_executable_io

        runtime = library.runtime
        compiled = root._collect_dso_modules()
        if runtime.kind != "llvm" or len(compiled) != 1 or not compiled[0].same_as(runtime):
            with quiet_executable_io():
                root.export_library(str(path))
            return
        files = [str(_emit(library, folder))]
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            if root.imports:
                # The executable's own part and every module it imports but the kernels
                # (a CUDA board's device code), packed as export_library packs them.
                prefix = runtime.get_function("__tvm_get_system_lib_prefix")() or ""
                packed = Path(scratch) / f"{prefix}devc.o"
                with quiet_executable_io():
                    runtime_api.ModulePackImportsToLLVM(
                        root,
                        bool(runtime.get_function("__tvm_is_system_module")()),
                        runtime.get_function("_get_target_string")(),
                        prefix,
                    ).write_to_file(str(packed))
                files.append(str(packed))
            cc.create_shared(str(path), files)

    def loaded(self, library: KernelLibrary) -> tvm.runtime.Module:
        """The exported ``library`` loaded into this process, once (no JIT compilation)."""
        if library.loaded is None:
            if library.exported is None:
                raise ValueError("the kernel library was not exported")
            loaded = tvm.runtime.load_module(str(library.exported))
            if library.base is not None:
                loaded.import_module(self.loaded(library.base))
            library.loaded = loaded
        return library.loaded


def _requests_of(base: KernelLibrary, kernels: tvm.IRModule, own: dict | None) -> dict | None:
    """The workspace requests of ``kernels`` where ``own`` holds those built here and
    ``base`` the rest; None where either was not read."""
    if base.workspace is None or own is None:
        return None
    names = {gv.name_hint for gv in kernels.functions}
    return {**{k: v for k, v in base.workspace.items() if k in names}, **own}


def _emit(library: KernelLibrary, folder: Path) -> Path:
    """The library's machine code as an object file in ``folder``, generated the first
    time (LLVM's code generation: about as long as the kernel build itself)."""
    if library.object_file is None or not library.object_file.is_file():
        object_file = Path(folder) / f"kernels-{library.key & (2**64 - 1):016x}.o"
        library.runtime.write_to_file(str(object_file))
        library.object_file = object_file
    return library.object_file


def library_of(executable) -> KernelLibrary | None:
    """The kernel library :meth:`KernelLibraries.build` linked into ``executable``."""
    return getattr(executable, "kernel_library", None)


def save_executable(executable: relax.VMExecutable, path: Path) -> None:
    """The executable's bytecode and constants alone, without its kernels."""
    from planner.tvm.build.quiet_io import quiet_executable_io

    with quiet_executable_io():
        executable.mod.write_to_file(str(path))


def load_executable(path: Path, kernels: tvm.runtime.Module | None) -> relax.VMExecutable:
    """An executable :func:`save_executable` wrote, linked to ``kernels`` again."""
    from planner.tvm.build.quiet_io import quiet_executable_io

    with quiet_executable_io():
        module = tvm_ffi.get_global_func(LOAD_EXECUTABLE)(str(path))
    if kernels is not None:
        module.import_module(kernels)
    return relax.VMExecutable(module)
