"""A CUDA GPU: whether CUDA initialises, TVM's CUDA target for an architecture, CUDA C.

Relax kernels need GPU schedules, which :mod:`tvm.s_tir.dlight`'s default rules give (TVM's
own CUDA pipeline applies the same rules after fusion). Device memory is counted by
:mod:`planner.tvm.measure.cuda_memory`.

The architecture a compile builds for is always the one its target names
(:func:`target_json`, :func:`compile_callback`): TVM otherwise falls back to asking device 0,
so the same job would build other kernels on another GPU, fail on a host without one, and
fail with "No CUDA architecture was specified or GPU detected" where CUDA cannot initialise
(a sandbox whose address-space limit is below what the driver reserves).

``python -m planner.tvm.build.cuda OUT.json`` writes :func:`probe`'s answer: the boards page runs
it in the job's own sandbox, so "online" means a job can reach the GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from planner.job_spec import valid_arch

#: Compiled for when no device says otherwise (an offline board still has a cache key).
DEFAULT_ARCH = "sm_80"

CUDART_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
#: cudaDeviceGetAttribute's numbers for the compute capability.
_MAJOR, _MINOR = 75, 76


class ArchError(ValueError):
    pass


def target_json(target: str, arch: str) -> str:
    """``target`` (a JSON object or ``cuda``) as a JSON CUDA target naming ``arch``.

    A target that names another architecture is refused: the board's settings disagree.
    """
    if not valid_arch(arch):
        raise ArchError(f"{arch!r} is not a CUDA architecture (sm_80, sm_90, sm_90a)")
    text = (target or "cuda").strip()
    spec = json.loads(text) if text.startswith("{") else {"kind": text.split()[0]}
    if spec.get("kind") != "cuda":
        raise ArchError(f"a CUDA board's target is of kind cuda, not {spec.get('kind')!r}")
    named = spec.get("arch")
    if named and named != arch:
        raise ArchError(f"the target names {named}, the board {arch}")
    return json.dumps({**spec, "arch": arch}, sort_keys=True)


def named_arch(target: str) -> str:
    """The architecture a target's own words name (a JSON object's ``arch``, a string's
    ``-arch=``), refusing one that names none."""
    text = str(target).strip()
    arch = ""
    if text.startswith("{"):
        arch = str(json.loads(text).get("arch", ""))
    else:
        for word in text.split():
            if word.startswith("-arch="):
                arch = word.split("=", 1)[1]
    if not valid_arch(arch):
        raise ArchError(
            f"the CUDA target {text!r} names no architecture: Peakwatch builds only for the "
            "architecture the board names (its arch setting, or arch in its target)"
        )
    return arch


def arch_of(target) -> str:
    """The architecture a TVM target names; never the device's."""
    arch = str(target.attrs.get("arch", "")) if target is not None else ""
    if not valid_arch(arch):
        raise ArchError(
            f"the CUDA target {target} names no architecture: Peakwatch builds only for the "
            "architecture the board names (its target or its arch setting)"
        )
    return arch


#: The architecture this process builds for, once :func:`install_compile_callback` named it:
#: TVM may compile a module's kernels lazily, outside any target scope (when a library
#: exported as CUDA source is loaded).
_installed_arch: list[str] = []


def compile_callback(code: str, target=None) -> bytes:
    """TVM's ``tvm_callback_cuda_compile``: NVRTC for the architecture the target names (or
    the one this process was set up for), never device 0's."""
    import tvm

    target = target if target is not None else tvm.target.Target.current(allow_none=True)
    named = str(target.attrs.get("arch", "")) if target is not None else ""
    arch = named if valid_arch(named) else (_installed_arch[0] if _installed_arch else "")
    if not arch:
        arch = arch_of(target)  # raises, naming the target
    options = []
    headers = pip_cuda_headers()
    if headers is not None and "CUDA_PATH" not in os.environ:
        # TVM looks for the CUDA headers beside nvcc; a host with NVRTC from PyPI and no
        # toolkit has them in the wheels of the CUDA runtime and CCCL.
        os.environ["CUDA_PATH"] = str(headers)
    if headers is not None and os.environ["CUDA_PATH"] == str(headers):
        options.append(f"-I{headers / 'include' / 'cccl'}")
    return _nvrtc(code, arch, tuple(options))


@functools.lru_cache(maxsize=64)
def _nvrtc(code: str, arch: str, options: tuple[str, ...]) -> bytes:
    # Strategies of one model share most kernels' source: each is compiled once.
    from tvm.support import nvcc

    return bytes(nvcc.compile_cuda(
        code, target_format="cubin", arch=arch, options=list(options) or None,
        compiler="nvrtc",
    ))


def pip_cuda_headers() -> Path | None:
    """The ``nvidia/cu13`` folder of the ``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl``
    wheels, where both are installed."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        folder = Path(root) / "cu13"
        include = folder / "include"
        if (include / "cuda_runtime.h").is_file() and (
            include / "cccl" / "cuda" / "std" / "cstdint"
        ).is_file():
            return folder
    return None


def install_compile_callback(arch: str | None = None) -> None:
    """Make TVM compile CUDA kernels with :func:`compile_callback`, for ``arch`` where no
    target in scope names one."""
    import tvm_ffi

    if arch is not None:
        if not valid_arch(arch):
            raise ArchError(f"{arch!r} is not a CUDA architecture (sm_80, sm_90, sm_90a)")
        _installed_arch[:] = [arch]
    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_callback, override=True)


def compile_kernels(library, target) -> int:
    """NVRTC-compile the kernels of a kernel library (a runtime module) that kept them as
    CUDA source (TVM does where its CUDA runtime is not loaded: a host without a GPU), for
    ``target``'s architecture; the bytes of cubin made. A kernel the board could not compile
    fails here, on any host.
    """
    made = 0
    for module in _modules(library):
        if getattr(module, "kind", "") != "cuda" or _holds_cubin(module):
            continue
        source = module.inspect_source("")
        if source:
            made += len(compile_callback(source, target))
    return made


def _holds_cubin(module) -> bool:
    """Whether TVM compiled ``module``'s kernels already (its CUDA runtime is loaded: a
    host with a GPU), through :func:`compile_callback`."""
    try:
        return bool(module.inspect_source("cubin"))
    except UnicodeDecodeError:  # the cubin itself, which TVM hands over as text
        return True


def cuda_target(arch: str = DEFAULT_ARCH):
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": arch})


def cudart() -> ctypes.CDLL | None:
    """The CUDA runtime this process uses (TVM's copy where TVM loaded it), or None."""
    found = ctypes.util.find_library("cudart")
    for attempt in range(2):
        for name in (*CUDART_NAMES, *([found] if found else [])):
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
        if attempt == 0:
            # TVM's CUDA runtime finds the CUDA runtime its own way (its wheel's search
            # paths); once it is loaded, the same name resolves to it.
            import tvm

            tvm.cuda(0).exist  # noqa: B018
    return None


def _error_name(runtime: ctypes.CDLL, status: int) -> str:
    runtime.cudaGetErrorName.restype = ctypes.c_char_p
    runtime.cudaGetErrorString.restype = ctypes.c_char_p
    name = (runtime.cudaGetErrorName(status) or b"").decode()
    text = (runtime.cudaGetErrorString(status) or b"").decode()
    return f"{name or f'CUDA error {status}'} ({text})" if text else name


def limits_in_force() -> str:
    """This process's limits that decide whether CUDA can initialise, in words."""

    def shown(limit: int) -> str:
        if limit == resource.RLIM_INFINITY:
            return "unlimited"
        for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if limit >= scale:
                return f"{limit / scale:g} {unit}"
        return f"{limit} bytes"

    address = resource.getrlimit(resource.RLIMIT_AS)[0]
    locked = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return (
        f"address space (RLIMIT_AS) {shown(address)}, locked memory {shown(locked)}, "
        f"open files {files}"
    )


def probe() -> dict:
    """Whether CUDA initialises in this process, and device 0's architecture and size.

    Asked of the CUDA runtime directly: TVM's ``tvm.cuda(0).exist`` only says False, and
    the reason is what a user needs (a missing driver, no device nodes, a limit).
    """
    runtime = cudart()
    if runtime is None:
        return {
            "ok": False,
            "error": f"the CUDA runtime ({', '.join(CUDART_NAMES)}) cannot be loaded",
        }
    count = ctypes.c_int(0)
    status = runtime.cudaGetDeviceCount(ctypes.byref(count))
    if status != 0:
        return {
            "ok": False,
            "error": f"CUDA did not initialise: cudaGetDeviceCount returned "
            f"{_error_name(runtime, status)}; limits in force: {limits_in_force()}",
        }
    if count.value < 1:
        return {"ok": False, "error": "CUDA initialised but sees no device"}
    major, minor = ctypes.c_int(), ctypes.c_int()
    for attribute, value in ((_MAJOR, major), (_MINOR, minor)):
        status = runtime.cudaDeviceGetAttribute(ctypes.byref(value), attribute, 0)
        if status != 0:
            return {
                "ok": False,
                "error": f"cudaDeviceGetAttribute returned {_error_name(runtime, status)}; "
                f"limits in force: {limits_in_force()}",
            }
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    status = runtime.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    if status != 0:
        return {
            "ok": False,
            "error": f"cudaMemGetInfo returned {_error_name(runtime, status)}; "
            f"limits in force: {limits_in_force()}",
        }
    return {
        "ok": True,
        "arch": f"sm_{major.value}{minor.value}",
        "devices": count.value,
        "total_memory": int(total.value),
        "free_memory": int(free.value),
    }


def initialisation_failure() -> str:
    """Why CUDA cannot be used in this process, or empty when it can."""
    found = probe()
    return "" if found["ok"] else found["error"]


def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0, or None where CUDA does not initialise here."""
    found = probe()
    return found["arch"] if found["ok"] else None


def kernel_source(model, target) -> str:
    """The CUDA C of ``model``'s kernels, built by TVM's stock CUDA pipeline.

    Needs no GPU: NVRTC compiles for the target's architecture.
    """
    from tvm import relax
    from tvm.relax.backend.cuda import pipeline as cuda_pipeline

    from planner.tvm.sources import build_network

    network = build_network(model)
    install_compile_callback()
    with target:
        executable = relax.build(
            network.mod, target, relax_pipeline=cuda_pipeline.get_default_pipeline(target)
        )
    sources = [
        module.inspect_source()
        for module in _modules(executable.mod)
        if getattr(module, "kind", "") == "cuda"
    ]
    return "\n".join(sources)


def _modules(module):
    yield module
    for imported in module.imports:
        yield from _modules(imported)


def driver_version() -> str:
    """The NVIDIA driver's version, as nvidia-smi says; empty without one."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""


def main(argv: list[str]) -> int:
    """Write :func:`probe`'s answer to ``argv[0]`` (run sandboxed by the CUDA board)."""
    with open(argv[0], "w") as out:
        json.dump(probe(), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
