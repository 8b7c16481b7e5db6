"""Device memory a CUDA build takes during one inference, counted to the byte.

The measuring runs in a fresh process with :file:`cudashim.c` preloaded: TVM's CUDA runtime
links libcudart dynamically, so the shim sees every ``cudaMalloc`` and ``cudaFree`` it makes
and keeps live and peak bytes, each allocation tagged with the phase the process was in.
Free device memory (``cudaMemGetInfo``) moves in 2 MiB driver pages, device-wide: a CNN that
plans 8,704 bytes reads 2,097,152 there, so that figure is kept only as a cross-check.

Figures of :func:`measure`, in bytes unless said otherwise:

- ``peak_bytes``: the most the process held on the device at once during the inference,
  above what it held before (storages, kernel workspace, outputs);
- ``storage_bytes``: what the VM's storages were given during it (its allocations less the
  workspace). Under ``naive`` each storage is one ``cudaMalloc`` of exactly its bytes and
  is freed when the VM drops it: this compares with planned bytes to the byte, and so does
  the peak of a build with one arena, while a tvm-stock build's storages are freed as they
  die, so its peak can sit below its planned sum (a small CNN on an H100: 6,144 of 8,704).
  ``pooled`` rounds storages up to pages and keeps them for reuse, which is what a
  deployment holds;
- ``workspace_bytes``: device allocations inside ``TVMBackendAllocWorkspace`` (TVM's pool
  rounds requests to 4 KiB and keeps its pages, so a later inference may take none);
- ``retained_bytes``: what stays held after it (outputs, and storages the allocator keeps);
- ``weights_bytes``: the arguments uploaded before it (weights are bound into the library as
  constants by ``compile_model``, so only unbound ones count); ``constants_bytes``: what
  loading the library and creating the VM holds (the constants);
- ``allocations``: device allocations during the inference;
- ``untracked_allocations``: allocations past the shim's table (its figures are then too
  low), ``unknown_frees``: frees of pointers it never saw (an allocation went round it),
  both over the whole process;
- ``driver_pages_bytes``: the drop in free device memory from before the inference to after
  it (device-wide, 2 MiB pages; under ``naive`` the storages are freed again by then), None
  where ``cudaMemGetInfo`` cannot be called.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from planner.tvm.build import cuda
from planner.tvm.measure import native

SHIM_SOURCE = Path(__file__).with_name("cudashim.c")
SOURCE = "interposed cudaMalloc/cuMemAlloc"
MEMORY_CONFIGS = ("naive", "pooled")

#: The phases a measuring process tags its allocations with (``peakwatch_cuda_set_tag``).
TAG_OTHER, TAG_MODULE, TAG_INPUTS, TAG_INFERENCE = 0, 1, 2, 3
#: The layout ``peakwatch_cuda_stats`` writes (see :file:`cudashim.c`): these counters, then
#: live and allocated bytes for each of ``TAGS`` tags.
COUNTERS = (
    "live",
    "peak",
    "allocations",
    "allocated",
    "untracked",
    "unknown_frees",
    "workspace_live",
    "workspace_allocated",
)
TAGS = 8


class MeasurementError(RuntimeError):
    pass


def shim_library(cache_dir: Path | None = None) -> Path:
    """The compiled shim, built once per source version with the system C compiler."""
    try:
        return native.shared_library(
            SHIM_SOURCE, "cudashim", libs=("-ldl", "-lpthread"), cache_dir=cache_dir
        )
    except native.BuildError as exc:
        raise MeasurementError(f"could not compile the CUDA memory shim: {exc}") from None


def measure(
    library: Path,
    inputs: list[np.ndarray],
    *,
    entry: str = "forward",
    memory_cfg: str = "naive",
    timeout: float = 600,
    arch: str | None = None,
) -> dict:
    """Run ``library`` (a CUDA build from ``export_library``) once in a measuring process
    and return its figures (the module's docstring)."""
    if memory_cfg not in MEMORY_CONFIGS:
        raise ValueError(f"memory_cfg must be one of {MEMORY_CONFIGS}")
    shim = shim_library()
    with tempfile.TemporaryDirectory(prefix="peakwatch-cuda-") as tmp:
        arrays = Path(tmp) / "inputs.npz"
        np.savez(arrays, *inputs)
        preload = " ".join(filter(None, (str(shim), os.environ.get("LD_PRELOAD", ""))))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "planner.tvm.measure.cuda_memory",
                str(library),
                str(arrays),
                entry,
                memory_cfg,
                *([arch] if arch else []),
            ],
            env={**os.environ, "LD_PRELOAD": preload},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=Path(__file__).resolve().parents[3],
        )
    if proc.returncode != 0:
        raise MeasurementError(f"measuring process failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def counter() -> ctypes.CDLL:
    """The preloaded shim's functions in this process."""
    found = ctypes.CDLL(None)
    if not hasattr(found, "peakwatch_cuda_stats"):
        raise MeasurementError(
            "the CUDA memory shim is not preloaded in this process: run it with "
            "LD_PRELOAD=<shim_library()> (measure() does)"
        )
    return found


def read_stats(shim: ctypes.CDLL) -> dict:
    """The shim's counters by name, with ``tag_live`` and ``tag_allocated`` by tag."""
    values = (ctypes.c_size_t * (len(COUNTERS) + 2 * TAGS))()
    shim.peakwatch_cuda_stats(values)
    stats = dict(zip(COUNTERS, values[: len(COUNTERS)], strict=True))
    stats["tag_live"] = list(values[len(COUNTERS) :: 2])
    stats["tag_allocated"] = list(values[len(COUNTERS) + 1 :: 2])
    return stats


def _set_tag(shim: ctypes.CDLL, tag: int) -> None:
    if shim.peakwatch_cuda_set_tag(tag) != 0:
        raise MeasurementError(f"the CUDA memory shim refused tag {tag}")


def _free_bytes(cudart: ctypes.CDLL | None) -> int | None:
    if cudart is None or not hasattr(cudart, "cudaMemGetInfo"):
        return None
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    if cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) != 0:
        return None
    return free.value


def _measure_here(
    library: str, arrays: str, entry: str, memory_cfg: str, arch: str | None = None
) -> dict:
    shim = counter()
    import tvm
    from tvm import relax

    if arch:
        # A library exported as CUDA source is compiled as it loads: for the board's
        # architecture, not whatever TVM would read off device 0.
        cuda.install_compile_callback(arch)

    _set_tag(shim, TAG_MODULE)
    try:
        executable = tvm.runtime.load_module(library)
    except Exception as exc:  # TVM raises its own error kinds for a file it cannot load
        raise MeasurementError(f"could not load {library}: {type(exc).__name__}: {exc}") from None
    dev = tvm.cuda(0)
    if not dev.exist:
        raise MeasurementError("no CUDA device 0 in the measuring process")
    vm = relax.VirtualMachine(executable, dev, memory_cfg=memory_cfg)
    function = vm[entry]
    with np.load(arrays) as data:
        host = [data[f"arr_{i}"] for i in range(len(data.files))]
    _set_tag(shim, TAG_INPUTS)
    args = [tvm.runtime.tensor(value, dev) for value in host]
    dev.sync()
    _set_tag(shim, TAG_OTHER)
    # By now TVM has loaded libcudart its own way, and the same name resolves to it.
    cudart = cuda.cudart()
    free_before = _free_bytes(cudart)
    start = read_stats(shim)
    shim.peakwatch_cuda_reset_peak()
    _set_tag(shim, TAG_INFERENCE)
    outputs = function(*args)
    dev.sync()
    _set_tag(shim, TAG_OTHER)
    during = read_stats(shim)
    free_after = _free_bytes(cudart)
    del outputs
    pages = None if free_before is None or free_after is None else free_before - free_after
    inference = during["tag_allocated"][TAG_INFERENCE] - start["tag_allocated"][TAG_INFERENCE]
    workspace = during["workspace_allocated"] - start["workspace_allocated"]
    return {
        "source": SOURCE,
        "memory_cfg": memory_cfg,
        "peak_bytes": during["peak"] - start["live"],
        "storage_bytes": inference - workspace,
        "workspace_bytes": workspace,
        "retained_bytes": during["live"] - start["live"],
        "weights_bytes": start["tag_live"][TAG_INPUTS],
        "constants_bytes": start["tag_live"][TAG_MODULE],
        "allocations": during["allocations"] - start["allocations"],
        "untracked_allocations": during["untracked"],
        "unknown_frees": during["unknown_frees"],
        "driver_pages_bytes": pages,
    }


if __name__ == "__main__":
    # Run as planner.tvm.measure.cuda_memory, so the wing's package imported TVM without torch.
    try:
        figures = _measure_here(*sys.argv[1:6])
    except MeasurementError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(2)
    sys.stdout.write(json.dumps(figures) + "\n")
