"""Measure the bytes a built model really holds during one inference.

The measuring runs in a process with :file:`memshim.c` preloaded, one forked child per build
(:class:`MeasuringProcess`), so the counts are exact and nothing else (torch, the compiler,
another build) is in them. Phases, each a difference of live
or peak bytes counted by the shim:

- ``weights_bytes``: the arguments uploaded before the call (the data; weights are bound
  into the library as constants by ``compile_model``, so only unbound ones count),
- ``inference_peak_bytes``: the most held at once during the first inference above that
  (intermediates, kernel workspace and outputs),
- ``retained_bytes``: what stays held after it (outputs, plus whatever the allocator pools),
- ``allocator_calls``: how many allocations that inference made.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
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


class MeasuringProcess:
    """One warm measuring process for a job: TVM is imported once, and each measurement runs
    in a child forked from it, so that no build finds another's pools, workspace or counts.

    The process (``python -m planner.tvm.memory --serve``, with the shim preloaded) starts
    at :meth:`start` or the first measurement (a compile starts it first thing, so that its
    start-up overlaps the builds); it serves one request at a time
    over its standard input and output, and ends with :meth:`close`. Its children start
    from the state a fresh process would have after importing TVM, with the kernel
    libraries already loaded: the figures are those a process per build gave, to the byte.
    It is never shared between two jobs; within one it sees only that job's builds. The
    build being measured is loaded once in the process, for both allocators' children.
    """

    def __init__(self, *, timeout: float = 600):
        self.timeout = timeout
        self._proc: subprocess.Popen | None = None
        self._start_error = ""
        self._closed = False
        self._stderr: list[str] = []
        self._queue = ThreadPoolExecutor(max_workers=1, thread_name_prefix="measure")

    def start(self) -> MeasuringProcess:
        """Start the process, if not yet started: cheap to make, paid for when used."""
        if self._proc is not None or self._start_error or self._closed:
            return self
        try:
            env = {**os.environ, "LD_PRELOAD": str(shim_library())}
        except MeasurementError as exc:
            self._start_error = str(exc)
            return self
        # numpy's BLAS threads would be forked in a broken state; nothing here needs them.
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        # It loads and runs builds, and never compiles: TVM's runtime library alone (TVM
        # 0.27's documented switch; an older TVM ignores it), not its compiler, which is
        # most of what ``import tvm`` costs (docs/tvm.md, "What a compile pays for").
        env["TVM_USE_RUNTIME_LIB"] = "1"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "planner.tvm.memory", "--serve"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
            start_new_session=True,
        )
        threading.Thread(target=self._drain_stderr, args=(self._proc,), daemon=True).start()
        return self

    def submit(self, executable: Path, inputs_file: Path, **options) -> Future:
        """:meth:`measure` in the background: a future of its figures."""
        return self._queue.submit(self.measure, executable, inputs_file, **options)

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-50]

    def measure(
        self,
        executable: Path,
        inputs_file: Path,
        *,
        kernels: Path | None = None,
        entry: str = "forward",
        memory_cfg: str = "pooled",
        llm: dict | None = None,
    ) -> dict:
        """Measure one build: ``executable`` as a ``.vm`` file
        (:func:`planner.tvm.kernels.save_executable`) linked to ``kernels`` (a shared
        object), or a whole ``export_library`` file (``.so``), with no ``kernels``; inputs
        as an ``.npz`` of positional arrays."""
        if memory_cfg not in MEMORY_CONFIGS:
            raise ValueError(f"memory_cfg must be one of {MEMORY_CONFIGS}")
        self.start()
        if self._proc is None:
            raise MeasurementError(self._start_error or "the measuring process was closed")
        request = {
            "executable": str(executable),
            "kernels": str(kernels) if kernels is not None else None,
            "arrays": str(inputs_file),
            "entry": entry,
            "memory_cfg": memory_cfg,
        }
        if llm is not None:
            # An LLM deployment's function: ``inputs_file`` holds its parameters, ``llm``
            # the cache's arguments and the bounds of the call (_measure_llm_here).
            request.update(kind="llm", params=str(inputs_file), **llm)
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise MeasurementError(self._died()) from None
        ready, _, _ = select.select([self._proc.stdout], [], [], self.timeout)
        if not ready:
            self._end(graceful=False)
            raise MeasurementError(f"the measurement took over {self.timeout:.0f} s")
        line = self._proc.stdout.readline()
        if not line:
            raise MeasurementError(self._died())
        answer = json.loads(line)
        if "error" in answer:
            raise MeasurementError(answer["error"])
        return answer

    def _died(self) -> str:
        self._proc.wait(timeout=30)
        tail = "".join(self._stderr).strip()[-2000:]
        code = self._proc.returncode
        self._proc = None
        return f"measuring process failed (exit {code}): {tail}"

    def close(self) -> None:
        # Requests still queued are dropped: the process is going.
        self._closed = True
        self._queue.shutdown(wait=True, cancel_futures=True)
        self._end(graceful=True)

    def _end(self, *, graceful: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10 if graceful else 0.1)
        except subprocess.TimeoutExpired:
            # The whole session: a child stuck in a measurement goes with its parent.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> MeasuringProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stats(shim) -> dict:
    values = (ctypes.c_size_t * 5)()
    shim.peakwatch_stats(values)
    return dict(zip(("live", "peak", "requested", "calls", "untracked"), values, strict=True))


def _load(executable: str, kernels):
    """A build as a runtime module: an executable ``kernels.save_executable`` wrote, linked
    to its loaded kernel library again, or a whole ``export_library`` file."""
    import tvm
    import tvm_ffi

    from planner.tvm.quiet_io import quiet_executable_io

    if Path(executable).suffix != ".vm":
        return tvm.runtime.load_module(executable)
    with quiet_executable_io():
        module = tvm_ffi.get_global_func(LOAD_EXECUTABLE)(executable)
    if kernels is not None:
        module.import_module(kernels)
    return module


#: What ``kernels.save_executable`` writes (``relax.VMExecutable``), loaded by TVM's runtime
#: without its compiler (``planner.tvm.kernels`` imports the compiler's Relax).
LOAD_EXECUTABLE = "ffi.Module.load_from_file.relax.VMExecutable"


def _virtual_machine():
    try:
        from tvm.runtime.vm import VirtualMachine  # TVM 0.27: part of the runtime
    except ImportError:  # earlier releases: Relax's, with the compiler
        from tvm.relax import VirtualMachine
    return VirtualMachine


def _measure_here(loaded, arrays: str, entry: str, memory_cfg: str) -> dict:
    shim = ctypes.CDLL(None)
    if not hasattr(shim, "peakwatch_stats"):
        raise MeasurementError("the memory shim is not preloaded (LD_PRELOAD)")
    import tvm

    dev = tvm.cpu()
    with np.load(arrays) as data:
        host = [data[f"arr_{i}"] for i in range(len(data.files))]
    before_weights = _stats(shim)["live"]
    args = [tvm.runtime.tensor(value, dev) for value in host]
    vm = _virtual_machine()(loaded, dev, memory_cfg=memory_cfg)
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


def _live_sizes(shim) -> Counter:
    """The sizes of the allocations live now, as a multiset."""
    shim.peakwatch_live_sizes.restype = ctypes.c_size_t
    room = shim.peakwatch_live_sizes(None, 0) + 256
    sizes = (ctypes.c_size_t * room)()
    count = shim.peakwatch_live_sizes(sizes, room)
    return Counter(sizes[: min(count, room)])


def _measure_llm_here(loaded, request: dict, function: str, memory_cfg: str) -> dict:
    """One call of an LLM deployment's ``function`` at its bounds, in a fresh child: the
    bytes of the parameters, of the KV cache (its allocations by size, so that pages and
    working buffers can be told apart) and the most the call held above what was live."""
    shim = ctypes.CDLL(None)
    if not hasattr(shim, "peakwatch_stats"):
        raise MeasurementError("the memory shim is not preloaded (LD_PRELOAD)")
    import tvm

    from planner.tvm import llm_runtime

    dev = tvm.cpu()
    with np.load(request["params"]) as data:
        host = [data[f"arr_{i}"] for i in range(len(data.files))]
    before = _stats(shim)["live"]
    params = [tvm.runtime.tensor(value, dev) for value in host]
    params_bytes = _stats(shim)["live"] - before
    machine = _virtual_machine()(loaded, dev, memory_cfg=memory_cfg)
    sizes, before = _live_sizes(shim), _stats(shim)["live"]
    session = llm_runtime.Session({function: machine}, params, request["cache_arguments"])
    cache_bytes = _stats(shim)["live"] - before
    made = _live_sizes(shim) - sizes
    step = llm_runtime.at_bound(function, **request["bounds"])
    arrays = session.upload(step, dev)
    session.add(step.sequences)
    start = _stats(shim)
    shim.peakwatch_reset_peak()
    logits = session.run(step, arrays)
    during = _stats(shim)
    del logits
    return {
        "memory_cfg": memory_cfg,
        "params_bytes": params_bytes,
        "kv_cache_bytes": cache_bytes,
        "kv_cache_allocations": sorted(
            ([size, count] for size, count in made.items()), reverse=True
        ),
        "inference_peak_bytes": during["peak"] - start["live"],
        "retained_bytes": during["live"] - start["live"],
        "allocator_calls": during["calls"],
        "untracked_allocations": during["untracked"],
    }


def _load_runtime_extras(tvm) -> None:
    """TVM 0.27 keeps some runtime functions that builds call (``tvm.contrib.sort.topk``,
    which a mixture of experts' router needs) in ``libtvm_runtime_extra``, which ``import
    tvm`` loads only with the compiler; a runtime-only process loads it here (1.3 MB,
    under a millisecond), where the installed TVM has it."""
    import ctypes

    for folder in (Path(tvm.__file__).parent / "lib", Path(tvm.__file__).parent):
        library = folder / "libtvm_runtime_extra.so"
        if library.is_file():
            ctypes.CDLL(str(library), mode=os.RTLD_LOCAL)
            return


def _serve() -> None:
    """The warm side of :class:`MeasuringProcess`: one JSON request per line in, one JSON
    answer per line out, each measured in a forked child."""
    import tvm

    if os.environ.get("TVM_USE_RUNTIME_LIB") == "1":
        _load_runtime_extras(tvm)

    kernels: dict[str, object] = {}
    # The build measured last, loaded here: the next request is most often the same build
    # under the other allocator, whose child then starts with it loaded too. What a child
    # counts starts after the load either way.
    last: tuple[str, object] | None = None
    for line in sys.stdin:
        request = json.loads(line)
        answer: dict
        try:
            library = request["kernels"]
            if library is not None and library not in kernels:
                # Loaded here, before the fork: every child of this job shares it.
                kernels[library] = tvm.runtime.load_module(library)
            if last is None or last[0] != request["executable"]:
                last = None  # the previous build is let go before the next is loaded
                last = (request["executable"],
                        _load(request["executable"], kernels.get(library)))
            if request.get("kind") == "llm":
                answer = _in_child(
                    _measure_llm_here, last[1], request, request["entry"], request["memory_cfg"]
                )
            else:
                answer = _in_child(
                    _measure_here, last[1], request["arrays"], request["entry"],
                    request["memory_cfg"],
                )
        except Exception as exc:  # one failed measurement is that build's, not the job's
            answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _in_child(measure, *request) -> dict:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, hand the figures over, leave without clean-up
        os.close(read_end)
        try:
            answer = measure(*request)
        except BaseException as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(answer))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as received:
        text = received.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        if os.WIFSIGNALED(status):
            return {"error": f"the measuring child was killed by signal {os.WTERMSIG(status)}"}
        return {"error": f"the measuring child exited with {os.waitstatus_to_exitcode(status)}"}
    return json.loads(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
        # Every answer is written and every child reaped: the interpreter's own teardown
        # (TVM's modules and registries) would only make the job wait for this exit.
        sys.stdout.flush()
        os._exit(0)
    else:
        sys.exit("usage: python -m planner.tvm.memory --serve")
