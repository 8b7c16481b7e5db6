"""Measure the bytes a built model really holds during one inference.

The measuring runs in a fresh process with :file:`memshim.c` preloaded, so the counts are
exact and nothing else (torch, the compiler) is in them. Phases, each a difference of live
or peak bytes counted by the shim:

- ``weights_bytes``: the inputs and weights uploaded before the call,
- ``inference_peak_bytes``: the most held at once during the first inference above that
  (intermediates, kernel workspace and outputs),
- ``retained_bytes``: what stays held after it (outputs, plus whatever the allocator pools),
- ``allocator_calls``: how many allocations that inference made.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import numpy as np

SHIM_SOURCE = Path(__file__).with_name("memshim.c")
MEMORY_CONFIGS = ("pooled", "naive")


_SHIM_LOCK = threading.Lock()


class MeasurementError(RuntimeError):
    pass


def shim_library(cache_dir: Path | None = None) -> Path:
    """The compiled shim, built once per source version with the system C compiler."""
    # Builds are measured on a thread pool; sysconfig's first read is not thread-safe
    # (a racing thread saw CC as None), and one compile of the shim is enough anyway.
    with _SHIM_LOCK:
        return _shim_library(cache_dir)


def _shim_library(cache_dir: Path | None) -> Path:
    source = SHIM_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:12]
    folder = cache_dir or Path(tempfile.gettempdir()) / "peakwatch-shim"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"memshim-{digest}.so"
    if not path.exists():
        cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
        # Builds run on a thread pool: each writer needs its own partial file.
        partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        proc = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SHIM_SOURCE), "-lpthread"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise MeasurementError(f"could not compile the memory shim: {proc.stderr.strip()}")
        partial.replace(path)
    return path


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
            [sys.executable, "-m", "planner.tvm.memory", str(library), str(arrays), entry,
             memory_cfg],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
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
