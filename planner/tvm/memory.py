"""Measure the bytes a built model really holds during one inference.

The measuring runs in a fresh process with :file:`memshim.c` preloaded, so the counts are
exact and nothing else (torch, the compiler) is in them. Phases, each a difference of live
or peak bytes counted by the shim:

- ``weights_bytes``: the arguments uploaded before the call (the data; weights are bound
  into the library as constants by ``compile_model``, so only unbound ones count),
- ``inference_peak_bytes``: the most held at once during the first inference above that
  (intermediates, kernel workspace and outputs),
- ``retained_bytes``: what stays held after it (outputs, plus whatever the allocator pools),
- ``allocator_calls``: how many allocations that inference made.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from planner.tvm import native

SHIM_SOURCE = Path(__file__).with_name("memshim.c")
MEMORY_CONFIGS = ("pooled", "naive")


class MeasurementError(RuntimeError):
    pass


def shim_library(cache_dir: Path | None = None) -> Path:
    """The compiled shim, built once per source version with the system C compiler."""
    try:
        return native.shared_library(
            SHIM_SOURCE, "memshim", libs=("-lpthread",), cache_dir=cache_dir
        )
    except native.BuildError as exc:
        raise MeasurementError(f"could not compile the memory shim: {exc}") from None


def measure(
    library: Path,
    inputs: list[np.ndarray],
    *,
    entry: str = "forward",
    memory_cfg: str = "pooled",
    timeout: float = 600,
) -> dict:
    """Run ``library`` (from ``export_library``) once in a measuring process."""
    if memory_cfg not in MEMORY_CONFIGS:
        raise ValueError(f"memory_cfg must be one of {MEMORY_CONFIGS}")
    with tempfile.TemporaryDirectory(prefix="peakwatch-measure-") as tmp:
        arrays = Path(tmp) / "inputs.npz"
        np.savez(arrays, *inputs)
        env = {**os.environ, "LD_PRELOAD": str(shim_library())}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "planner.tvm.memory",
                str(library),
                str(arrays),
                entry,
                memory_cfg,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
    if proc.returncode != 0:
        raise MeasurementError(f"measuring process failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _stats(shim) -> dict:
    values = (ctypes.c_size_t * 5)()
    shim.peakwatch_stats(values)
    return dict(zip(("live", "peak", "requested", "calls", "untracked"), values, strict=True))


def _measure_here(library: str, arrays: str, entry: str, memory_cfg: str) -> dict:
    shim = ctypes.CDLL(None)
    if not hasattr(shim, "peakwatch_stats"):
        raise MeasurementError("the memory shim is not preloaded (LD_PRELOAD)")
    import tvm
    from tvm import relax

    dev = tvm.cpu()
    executable = tvm.runtime.load_module(library)
    with np.load(arrays) as data:
        host = [data[f"arr_{i}"] for i in range(len(data.files))]
    before_weights = _stats(shim)["live"]
    args = [tvm.runtime.tensor(value, dev) for value in host]
    vm = relax.VirtualMachine(executable, dev, memory_cfg=memory_cfg)
    function = vm[entry]
    start = _stats(shim)
    shim.peakwatch_reset_peak()
    outputs = function(*args)
    during = _stats(shim)
    del outputs
    return {
        "memory_cfg": memory_cfg,
        "weights_bytes": start["live"] - before_weights,
        "inference_peak_bytes": during["peak"] - start["live"],
        "retained_bytes": during["live"] - start["live"],
        "allocator_calls": during["calls"],
        "untracked_allocations": during["untracked"],
    }


if __name__ == "__main__":
    # tvm_ffi imports torch when it is installed: seconds and hundreds of MB that the
    # measurement does not need.
    sys.modules["torch"] = None
    sys.stdout.write(json.dumps(_measure_here(*sys.argv[1:5])) + "\n")
