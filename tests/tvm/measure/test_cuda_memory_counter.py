"""The CUDA device-memory counter (planner/tvm/measure/cudashim.c), driven without a GPU.

Stand-ins built here take the places TVM's wheel gives the real libraries: a
``libcudart.so.13`` whose symbols carry its version node (so callers reference
``cudaMalloc@libcudart.so.13``, as libtvm_runtime_cuda.so does) and whose allocations reach
the driver through a stand-in ``libcuda.so.1``, on host memory; and a runtime library that
calls them and defines ``TVMBackendAllocWorkspace``, loaded RTLD_LOCAL as TVM loads its CUDA
runtime. A child process with the shim preloaded drives them and reports the counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.report import parse_report
from planner.tvm.measure import cuda_memory, native
from tests.conftest import fake_report

ROOT = Path(__file__).resolve().parents[3]
#: What the stand-in libcudart refuses, as a device out of memory would.
TOO_BIG = 1 << 40
OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation
NOT_INITIALISED = 3

DRIVER = r"""
#include <stdlib.h>
typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    void *found = malloc(size ? size : 1);
    if (found == NULL) return 2;
    *ptr = (CUdeviceptr)found;
    return 0;
}
int cuMemFree_v2(CUdeviceptr ptr) { free((void *)ptr); return 0; }
"""

# cudaMalloc and cudaFree go through the driver's interposed calls, as a runtime that
# reached the driver by its dynamic symbols would: the shim must count each once.
CUDART = r"""
#include <stdlib.h>
typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *ptr, size_t size);
int cuMemFree_v2(CUdeviceptr ptr);
#define TOO_BIG ((size_t)1 << 40)
/* What a failed call leaves in *ptr is unspecified: a pointer, so that only the status
 * can tell the shim the call failed. */
#define FAILED ((void *)0xdead0000)
int cudaMalloc(void **ptr, size_t size) {
    if (size >= TOO_BIG) { *ptr = FAILED; return 2; }
    CUdeviceptr found;
    int status = cuMemAlloc_v2(&found, size);
    if (status == 0) *ptr = (void *)found;
    return status;
}
int cudaFree(void *ptr) { return ptr == NULL ? 0 : cuMemFree_v2((CUdeviceptr)ptr); }
int cudaMallocAsync(void **ptr, size_t size, void *stream) {
    (void)stream;
    if (size >= TOO_BIG) { *ptr = FAILED; return 2; }
    *ptr = malloc(size);
    return 0;
}
int cudaFreeAsync(void *ptr, void *stream) { (void)stream; free(ptr); return 0; }
int cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    *pitch = (width + 511) / 512 * 512;
    *ptr = malloc(*pitch * height);
    return 0;
}
int cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)1 << 30;
    *total = (size_t)1 << 30;
    return 0;
}
"""

RUNTIME = r"""
#include <stddef.h>
#include <stdint.h>
typedef unsigned long long CUdeviceptr;
int cudaMalloc(void **, size_t);
int cudaFree(void *);
int cudaMallocAsync(void **, size_t, void *);
int cudaFreeAsync(void *, void *);
int cudaMallocPitch(void **, size_t *, size_t, size_t);
int cuMemAlloc_v2(CUdeviceptr *, size_t);
int cuMemFree_v2(CUdeviceptr);

int device_alloc(void **ptr, size_t size) { return cudaMalloc(ptr, size); }
int device_free(void *ptr) { return cudaFree(ptr); }
int device_alloc_async(void **ptr, size_t size) { return cudaMallocAsync(ptr, size, 0); }
int device_free_async(void *ptr) { return cudaFreeAsync(ptr, 0); }
int device_alloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    return cudaMallocPitch(ptr, pitch, width, height);
}
int driver_alloc(CUdeviceptr *ptr, size_t size) { return cuMemAlloc_v2(ptr, size); }
int driver_free(CUdeviceptr ptr) { return cuMemFree_v2(ptr); }
size_t device_fill(size_t count, size_t size) {
    size_t done = 0;
    for (size_t i = 0; i < count; i++) {
        void *ptr;
        if (cudaMalloc(&ptr, size) == 0) done++;
    }
    return done;
}

void *TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int code,
                               int bits) {
    (void)device_type; (void)device_id; (void)code; (void)bits;
    void *ptr = NULL;
    return cudaMalloc(&ptr, nbytes) == 0 ? ptr : NULL;
}
int TVMBackendFreeWorkspace(int device_type, int device_id, void *ptr) {
    (void)device_type; (void)device_id;
    return cudaFree(ptr);
}

/* libtvm_runtime registers these functions' addresses as the modules' context symbols, and
 * a kernel calls through them: the same here. */
void *(*volatile context_alloc)(int, int, uint64_t, int, int) = TVMBackendAllocWorkspace;
int (*volatile context_free)(int, int, void *) = TVMBackendFreeWorkspace;
void *kernel_workspace(uint64_t nbytes) { return context_alloc(2, 0, nbytes, 2, 32); }
int kernel_free_workspace(void *ptr) { return context_free(2, 0, ptr); }
"""

PRELUDE = """
import ctypes, json, os
from planner.tvm.measure import cuda_memory

shim = cuda_memory.counter()
out = {}


def snap(name):
    out[name] = cuda_memory.read_stats(shim)


def load_runtime(mode="RTLD_LOCAL"):
    rt = ctypes.CDLL(os.environ["STANDIN_RUNTIME"], mode=getattr(os, mode))
    pointer, size = ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t
    rt.device_alloc.argtypes = rt.device_alloc_async.argtypes = [pointer, size]
    rt.device_free.argtypes = rt.device_free_async.argtypes = [ctypes.c_void_p]
    rt.device_alloc_pitch.argtypes = [pointer, ctypes.POINTER(size), size, size]
    rt.driver_alloc.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), size]
    rt.driver_free.argtypes = [ctypes.c_ulonglong]
    rt.device_fill.argtypes, rt.device_fill.restype = [size, size], size
    rt.kernel_workspace.argtypes, rt.kernel_workspace.restype = [ctypes.c_uint64], ctypes.c_void_p
    rt.kernel_free_workspace.argtypes = [ctypes.c_void_p]
    return rt


def alloc(function, size):
    ptr = ctypes.c_void_p()
    status = function(ctypes.byref(ptr), size)
    return status, ptr.value
"""


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("standins")
    cc = native.host_cc()
    (folder / "driver.c").write_text(DRIVER)
    (folder / "cudart.c").write_text(CUDART)
    (folder / "runtime.c").write_text(RUNTIME)
    (folder / "cudart.map").write_text("libcudart.so.13 { global: *; };\n")
    rpath = "-Wl,-rpath,$ORIGIN"
    for command in (
        [cc, "-shared", "-fPIC", "-o", "libcuda.so.1", "driver.c", "-Wl,-soname,libcuda.so.1"],
        [
            cc,
            "-shared",
            "-fPIC",
            "-o",
            "libcudart.so.13",
            "cudart.c",
            "-Wl,-soname,libcudart.so.13",
            "-Wl,--version-script=cudart.map",
            "libcuda.so.1",
            rpath,
        ],
        [
            cc,
            "-shared",
            "-fPIC",
            "-o",
            "libruntime.so",
            "runtime.c",
            "libcudart.so.13",
            "libcuda.so.1",
            rpath,
        ],
    ):
        subprocess.run(command, cwd=folder, check=True, capture_output=True)
    return folder


def run_child(standins: Path, body: str, *, preload: bool = True) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "STANDIN_RUNTIME": str(standins / "libruntime.so"),
        "STANDIN_DRIVER": str(standins / "libcuda.so.1"),
        # Ahead of a GPU host's own libcuda and libcudart (LD_LIBRARY_PATH outranks the
        # stand-ins' RUNPATH).
        "LD_LIBRARY_PATH": str(standins),
    }
    if preload:
        env["LD_PRELOAD"] = str(cuda_memory.shim_library())
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + body + "\nprint(json.dumps(out))\n"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_standin_runtime_references_versioned_symbols_like_the_wheel(standins):
    # Otherwise the tests below would not show that an unversioned interposer catches
    # libtvm_runtime_cuda.so's cudaMalloc@libcudart.so.13.
    symbols = subprocess.run(
        ["nm", "-D", str(standins / "libruntime.so")], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"U cudaMalloc@libcudart\.so\.13", symbols)


@pytest.mark.parametrize("mode", ["RTLD_LOCAL", "RTLD_GLOBAL"])
def test_it_counts_each_allocation_under_its_tag_until_freed(standins, mode):
    out = run_child(
        standins,
        f"""
rt = load_runtime({mode!r})
shim.peakwatch_cuda_set_tag(2)
status_a, a = alloc(rt.device_alloc, 1000)
status_b, b = alloc(rt.device_alloc, 24)
out["status"] = [status_a, status_b]
snap("both")
out["free_status"] = rt.device_free(a)
snap("freed")
""",
    )
    assert out["status"] == [0, 0] and out["free_status"] == 0
    both, freed = out["both"], out["freed"]
    assert (both["live"], both["peak"], both["allocations"], both["allocated"]) == (
        1024,
        1024,
        2,
        1024,
    )
    assert both["tag_live"][2] == both["tag_allocated"][2] == 1024
    assert both["tag_live"][0] == both["tag_allocated"][0] == 0
    assert (freed["live"], freed["peak"], freed["allocated"]) == (24, 1024, 1024)
    assert (freed["tag_live"][2], freed["tag_allocated"][2]) == (24, 1024)
    assert freed["unknown_frees"] == freed["untracked"] == 0


def test_a_runtime_call_that_reaches_the_driver_counts_once(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
_, ptr = alloc(rt.device_alloc, 4096)
snap("runtime")
device = ctypes.c_ulonglong()
rt.driver_alloc(ctypes.byref(device), 512)
snap("driver")
rt.driver_free(device.value)
rt.device_free(ptr)
snap("freed")
""",
    )
    assert (out["runtime"]["allocations"], out["runtime"]["allocated"]) == (1, 4096)
    assert (out["driver"]["allocations"], out["driver"]["live"]) == (2, 4608)
    assert (out["freed"]["live"], out["freed"]["unknown_frees"]) == (0, 0)


def test_the_peak_restarts_from_live_bytes_on_reset_and_counters_keep_counting(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
_, a = alloc(rt.device_alloc, 1000)
_, b = alloc(rt.device_alloc, 24)
rt.device_free(a)
snap("before_reset")
shim.peakwatch_cuda_reset_peak()
snap("reset")
_, c = alloc(rt.device_alloc, 100)
rt.device_free(c)
snap("after")
""",
    )
    assert out["before_reset"]["peak"] == 1024
    assert (out["reset"]["peak"], out["reset"]["live"]) == (24, 24)
    after = out["after"]
    assert (after["peak"], after["live"], after["allocations"], after["allocated"]) == (
        124,
        24,
        3,
        1124,
    )


def test_allocations_inside_the_kernel_workspace_count_as_workspace_too(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
shim.peakwatch_cuda_set_tag(3)
workspace = rt.kernel_workspace(4096)
_, storage = alloc(rt.device_alloc, 100)
out["workspace_given"] = workspace is not None
snap("held")
out["free_status"] = rt.kernel_free_workspace(workspace)
snap("released")
""",
    )
    held, released = out["held"], out["released"]
    assert out["workspace_given"] and out["free_status"] == 0
    assert (held["workspace_allocated"], held["workspace_live"]) == (4096, 4096)
    assert (held["tag_allocated"][3], held["live"]) == (4196, 4196)
    assert (released["workspace_live"], released["workspace_allocated"]) == (0, 4096)
    assert (released["live"], released["tag_live"][3]) == (100, 100)


def test_a_failed_allocation_is_returned_and_not_counted(standins):
    out = run_child(
        standins,
        f"""
rt = load_runtime()
out["statuses"] = [alloc(rt.device_alloc, {TOO_BIG})[0], alloc(rt.device_alloc_async, {TOO_BIG})[0]]
snap("after")
""",
    )
    assert out["statuses"] == [OUT_OF_MEMORY, OUT_OF_MEMORY]
    after = out["after"]
    assert (after["allocations"], after["allocated"], after["live"], after["untracked"]) == (
        0,
        0,
        0,
        0,
    )


def test_freeing_null_is_legal_and_frees_nothing(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
alloc(rt.device_alloc, 64)
out["status"] = rt.device_free(None)
snap("after")
""",
    )
    assert out["status"] == 0
    assert (out["after"]["live"], out["after"]["unknown_frees"]) == (64, 0)


def test_freeing_a_pointer_it_never_saw_counts_as_unknown(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
_, seen = alloc(rt.device_alloc, 64)
# Through the driver's own handle: its definition, not the interposer's.
driver = ctypes.CDLL(os.environ["STANDIN_DRIVER"])
driver.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
unseen = ctypes.c_ulonglong()
driver.cuMemAlloc_v2(ctypes.byref(unseen), 32)
snap("unseen_allocated")
out["status"] = rt.device_free(unseen.value)
snap("after")
""",
    )
    assert out["unseen_allocated"]["allocations"] == 1
    assert out["status"] == 0
    assert (out["after"]["unknown_frees"], out["after"]["live"]) == (1, 64)


def test_async_and_pitched_allocations_are_counted(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
_, stream_ordered = alloc(rt.device_alloc_async, 300)
pitched, pitch = ctypes.c_void_p(), ctypes.c_size_t()
rt.device_alloc_pitch(ctypes.byref(pitched), ctypes.byref(pitch), 100, 3)
out["pitch"] = pitch.value
snap("held")
rt.device_free_async(stream_ordered)
snap("async_freed")
rt.device_free(pitched.value)
snap("freed")
""",
    )
    assert out["pitch"] == 512
    assert (out["held"]["live"], out["held"]["allocations"]) == (300 + 512 * 3, 2)
    assert out["async_freed"]["live"] == 512 * 3
    assert (out["freed"]["live"], out["freed"]["unknown_frees"]) == (0, 0)


def test_allocations_past_a_full_table_are_untracked(standins):
    slots = 1 << int(
        re.search(r"#define SLOT_BITS (\d+)", cuda_memory.SHIM_SOURCE.read_text()).group(1)
    )
    out = run_child(
        standins,
        f"""
rt = load_runtime()
out["done"] = rt.device_fill({slots + 3}, 16)
snap("full")
""",
    )
    assert out["done"] == slots + 3
    full = out["full"]
    assert (full["untracked"], full["allocations"], full["live"]) == (3, slots, 16 * slots)


def test_a_tag_out_of_range_is_refused_and_the_last_tag_kept(standins):
    out = run_child(
        standins,
        """
rt = load_runtime()
out["accepted"] = shim.peakwatch_cuda_set_tag(1)
out["refused"] = [shim.peakwatch_cuda_set_tag(cuda_memory.TAGS), shim.peakwatch_cuda_set_tag(-1)]
alloc(rt.device_alloc, 10)
snap("after")
""",
    )
    assert out["accepted"] == 0 and out["refused"] == [-1, -1]
    assert out["after"]["tag_live"][1] == 10


def test_without_libcudart_calls_fail_as_not_initialised_until_it_is_loaded(standins):
    out = run_child(
        standins,
        """
ptr = ctypes.c_void_p()
shim.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
out["early"] = [
    shim.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(10)),
    shim.cuMemAlloc_v2(ctypes.byref(ctypes.c_ulonglong()), 10),
]
snap("early_stats")
rt = load_runtime()
out["late"] = alloc(rt.device_alloc, 10)[0]
snap("late_stats")
""",
    )
    assert out["early"] == [NOT_INITIALISED, NOT_INITIALISED]
    assert out["early_stats"]["allocations"] == 0
    assert (out["late"], out["late_stats"]["live"]) == (0, 10)


def test_counter_refuses_a_process_without_the_shim():
    with pytest.raises(cuda_memory.MeasurementError, match="not preloaded"):
        cuda_memory.counter()


def test_measure_says_which_library_it_could_not_load(tmp_path):
    library = tmp_path / "model.so"
    library.write_bytes(b"not a shared library")
    with pytest.raises(cuda_memory.MeasurementError, match="could not load .*model.so"):
        cuda_memory.measure(library, [np.zeros(4, dtype="float32")], timeout=300)


FIGURES = {
    "source": cuda_memory.SOURCE,
    "memory_cfg": "naive",
    "peak_bytes": 8704,
    "storage_bytes": 8192,
    "workspace_bytes": 0,
    "retained_bytes": 512,
    "weights_bytes": 64,
    "constants_bytes": 4096,
    "allocations": 3,
    "untracked_allocations": 0,
    "unknown_frees": 0,
    "driver_pages_bytes": None,
}


def _cuda_report(tmp_path, monkeypatch, figures):
    from planner.tvm import job

    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, np.zeros(4, dtype="float32"))
    (tmp_path / "model.so").write_bytes(b"")
    report = fake_report(
        9000, 1.0, artifacts={"model.so": str(tmp_path / "model.so")}, inputs_file=str(inputs)
    )
    monkeypatch.setattr(cuda_memory, "measure", lambda *args, **kwargs: dict(figures))
    job._measure_cuda_memory([report])
    return report


def test_a_cuda_report_carries_the_counted_peak_and_parses(tmp_path, monkeypatch):
    report = _cuda_report(tmp_path, monkeypatch, FIGURES)
    assert report.measured == {"cuda": FIGURES}
    assert report.measured_peak_bytes == 8704
    assert parse_report(report.to_json()).measured == {"cuda": FIGURES}


def test_a_cuda_report_gives_no_peak_when_allocations_went_past_the_counter(tmp_path, monkeypatch):
    report = _cuda_report(tmp_path, monkeypatch, {**FIGURES, "untracked_allocations": 2})
    assert report.measured_peak_bytes is None
    assert any("2 allocations went past the counter" in w for w in report.warnings)
    assert parse_report(report.to_json()).measured["cuda"]["untracked_allocations"] == 2


def test_a_cuda_reports_kernel_workspace_is_what_the_workspace_pool_took(tmp_path, monkeypatch):
    report = _cuda_report(
        tmp_path, monkeypatch, {**FIGURES, "workspace_bytes": 4096, "peak_bytes": 13096}
    )

    assert (report.kernel_workspace_bytes, report.kernel_workspace_source) == (4096, "measured")
    # Arena, workspace and outputs: the planned bytes the peak is compared with.
    assert report.planned_bytes == 7976 + 4096 + 1024 == report.measured_peak_bytes
    assert parse_report(report.to_json()).planned_bytes == 13096
