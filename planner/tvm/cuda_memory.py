"""Device memory a CUDA build takes, from ``cudaMemGetInfo`` around one inference.

The posix_memalign shim of :mod:`planner.tvm.memory` sees host memory only; device
storages come from TVM's CUDA allocator (``cudaMalloc``). The CUDA runtime keeps no per-
process statistics, so this measures the drop in free device memory in a fresh process:

- ``weights_bytes``: uploading the arguments (weights bound as constants excluded),
- ``inference_bytes``: the first inference. The pooled allocator never returns a storage,
  so this is what the VM's storages and the kernel workspace came to (their peak);
- ``granularity``: the driver hands out memory in pages (2 MiB on current GPUs), so small
  models read as 0 or one page. Free memory is device-wide: another process allocating
  during the measurement shows up in it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


class MeasurementError(RuntimeError):
    pass


def measure(
    library: Path, inputs: list[np.ndarray], *, entry: str = "forward", timeout: float = 600
) -> dict:
    """Run ``library`` (a CUDA build from ``export_library``) once in a measuring process."""
    with tempfile.TemporaryDirectory(prefix="peakwatch-cuda-") as tmp:
        arrays = Path(tmp) / "inputs.npz"
        np.savez(arrays, *inputs)
        proc = subprocess.run(
            [sys.executable, "-m", "planner.tvm.cuda_memory", str(library), str(arrays), entry],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
    if proc.returncode != 0:
        raise MeasurementError(f"measuring process failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cudart() -> ctypes.CDLL:
    found = ctypes.util.find_library("cudart")
    for name in (*CUDART_NAMES, *([found] if found else [])):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise MeasurementError("libcudart is not loadable: no device memory figures")


def _free_bytes(cudart: ctypes.CDLL) -> int:
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    status = cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    if status != 0:
        raise MeasurementError(f"cudaMemGetInfo failed with CUDA error {status}")
    return free.value


def _measure_here(library: str, arrays: str, entry: str) -> dict:
    import tvm
    from tvm import relax

    dev = tvm.cuda(0)
    cudart = _cudart()
    executable = tvm.runtime.load_module(library)
    with np.load(arrays) as data:
        host = [data[f"arr_{i}"] for i in range(len(data.files))]
    vm = relax.VirtualMachine(executable, dev, memory_cfg="pooled")
    function = vm[entry]
    dev.sync()
    before_weights = _free_bytes(cudart)
    args = [tvm.runtime.tensor(value, dev) for value in host]
    dev.sync()
    start = _free_bytes(cudart)
    outputs = function(*args)
    dev.sync()
    after = _free_bytes(cudart)
    del outputs
    return {
        "memory_cfg": "pooled",
        "source": "cudaMemGetInfo",
        "weights_bytes": before_weights - start,
        "inference_bytes": start - after,
        "granularity": "driver pages (2 MiB); device-wide",
    }


if __name__ == "__main__":
    sys.modules["torch"] = None  # see planner.tvm.memory: torch is not needed here
    sys.stdout.write(json.dumps(_measure_here(*sys.argv[1:4])) + "\n")
