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
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from planner.tvm.measure import native

SHIM_SOURCE = Path(__file__).with_name("memshim.c")
MEMORY_CONFIGS = ("pooled", "naive")
#: Set while a process runs with the shim preloaded idle (:func:`preload_idle_shim`).
IDLE_ENV = "PEAKWATCH_MEMSHIM_IDLE"
#: Whether this process has the shim preloaded idle, to fork its measuring process from.
_idle_shim = False


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


def preload_idle_shim() -> None:
    """Run this process again, once, with the shim preloaded and idle, so that its measuring
    process can be forked from it once TVM is imported (:class:`MeasuringProcess`): a job
    then pays TVM's start-up once, not once more for a fresh measuring process. Call it
    first thing, before any thread starts; where the shim cannot be built or preloaded,
    nothing changes and the measuring process is started fresh."""
    global _idle_shim
    if IDLE_ENV in os.environ:  # the run again: preloaded, unless the loader refused it
        del os.environ[IDLE_ENV]
        # What this process starts (the C compiler, a fresh measuring process) starts
        # without it; the shim stays loaded here.
        os.environ.pop("LD_PRELOAD", None)
        _idle_shim = hasattr(ctypes.CDLL(None), "peakwatch_start_counting")
        return
    if os.environ.get("LD_PRELOAD"):
        return  # someone else's: left alone
    try:
        library = shim_library()
    except MeasurementError:
        return
    env = {**os.environ, "LD_PRELOAD": str(library), IDLE_ENV: "1"}
    # numpy's BLAS starts its threads as it loads, and a process with threads does not fork
    # its measuring process; nothing here needs them. OpenMP's are left alone: a model
    # file's framework computes the reference outputs with them, to the same bits as
    # before (torchvision's ResNet-18 differed in the last digit on one thread).
    env["OPENBLAS_NUM_THREADS"] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)


class MeasuringProcess:
    """One warm measuring process for a job: TVM is imported once, and each measurement runs
    in a child forked from it, so that no build finds another's pools, workspace or counts.

    Where this process has the shim preloaded idle (:func:`preload_idle_shim`, a worker's
    job) and no thread runs yet, :meth:`start` imports TVM here and forks the measuring
    process from this one, which starts counting there; else it starts a fresh one
    (``python -m planner.tvm.measure.memory --serve``, the shim preloaded, TVM's runtime alone).
    It starts at :meth:`start` or the first measurement (a compile starts it first thing,
    so that it is ready when the first build is); it serves one request at a time over its
    standard input and output, and ends with :meth:`close`. The shim counts only TVM's
    allocations, and every figure is a difference of counts taken in a child forked for
    one measurement, after it loaded the build: the figures are those a fresh process per
    build gave, to the byte, whichever way the process started. It is never shared between
    two jobs; within one it sees only that job's builds. The build being measured is loaded
    once in the process, for both allocators' children.
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
        if _idle_shim and _one_thread():
            import tvm  # noqa: F401  (imported here, once, for both processes)

            if _one_thread():  # importing TVM started none
                self._proc = _ForkedServer()
                threading.Thread(
                    target=self._drain_stderr, args=(self._proc,), daemon=True
                ).start()
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
            [sys.executable, "-m", "planner.tvm.measure.memory", "--serve"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[3],
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
        kernels: Path | list[Path] | None = None,
        entry: str = "forward",
        memory_cfg: str = "pooled",
        llm: dict | None = None,
    ) -> dict:
        """Measure one build: ``executable`` as a ``.vm`` file
        (:func:`planner.tvm.build.kernels.save_executable`) linked to ``kernels`` (a shared
        object, or a list of them, each importing the next:
        :meth:`planner.tvm.build.kernels.KernelLibraries.files`), or a whole ``export_library``
        file (``.so``), with no ``kernels``; inputs as an ``.npz`` of positional arrays."""
        if memory_cfg not in MEMORY_CONFIGS:
            raise ValueError(f"memory_cfg must be one of {MEMORY_CONFIGS}")
        self.start()
        if self._proc is None:
            raise MeasurementError(self._start_error or "the measuring process was closed")
        request = {
            "executable": str(executable),
            "kernels": [str(path) for path in _listed(kernels)] or None,
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


def _one_thread() -> bool:
    """Whether this process runs one thread, native ones counted (a framework's pool), so
    that a fork leaves no lock held by a thread the child does not have."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class _ForkedServer:
    """The measuring process forked from this one: what :class:`MeasuringProcess` uses of a
    ``subprocess.Popen``."""

    def __init__(self) -> None:
        requests, self._requests = os.pipe()
        self._answers, answers = os.pipe()
        self._errors, errors = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()  # its own group, killed whole as a fresh one's would be
                for fd, to in ((requests, 0), (answers, 1), (errors, 2)):
                    os.dup2(fd, to)
                for fd in (requests, self._requests, self._answers, answers, self._errors,
                           errors):
                    os.close(fd)
                ctypes.CDLL(None).peakwatch_start_counting()
                with open(0, closefd=False) as lines, open(1, "w", closefd=False) as out:
                    _serve(lines, out)
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in (requests, answers, errors):
            os.close(fd)
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = open(self._requests, "w")  # noqa: SIM115 (closed by MeasuringProcess)
        self.stdout = open(self._answers)  # noqa: SIM115
        self.stderr = open(self._errors)  # noqa: SIM115

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"measuring process {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


def _stats(shim) -> dict:
    values = (ctypes.c_size_t * 5)()
    shim.peakwatch_stats(values)
    return dict(zip(("live", "peak", "requested", "calls", "untracked"), values, strict=True))


def _listed(kernels: Path | list[Path] | None) -> list[Path]:
    if kernels is None:
        return []
    return list(kernels) if isinstance(kernels, list | tuple) else [kernels]


def _kernels(paths: list[str] | None, loaded: dict):
    """The first of ``paths`` loaded, importing the rest as loaded (once each, by path)."""
    import tvm

    if not paths:
        return None
    if paths[0] not in loaded:
        module = tvm.runtime.load_module(paths[0])
        below = _kernels(paths[1:], loaded)
        if below is not None:
            module.import_module(below)
        loaded[paths[0]] = module
    return loaded[paths[0]]


def _load(executable: str, kernels):
    """A build as a runtime module: an executable ``kernels.save_executable`` wrote, linked
    to its loaded kernel library again, or a whole ``export_library`` file."""
    import tvm
    import tvm_ffi

    from planner.tvm.build.quiet_io import LOAD_EXECUTABLE, quiet_executable_io

    if Path(executable).suffix != ".vm":
        return tvm.runtime.load_module(executable)
    with quiet_executable_io():
        module = tvm_ffi.get_global_func(LOAD_EXECUTABLE)(executable)
    if kernels is not None:
        module.import_module(kernels)
    return module


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

    from planner.tvm.llm import runtime as llm_runtime

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


def _serve(lines=None, out=None) -> None:
    """The warm side of :class:`MeasuringProcess`: one JSON request per line in, one JSON
    answer per line out, each measured in a forked child."""
    import tvm

    lines = sys.stdin if lines is None else lines
    out = sys.stdout if out is None else out
    if os.environ.get("TVM_USE_RUNTIME_LIB") == "1":
        _load_runtime_extras(tvm)

    kernels: dict[str, object] = {}
    # The build measured last, loaded here: the next request is most often the same build
    # under the other allocator, whose child then starts with it loaded too. What a child
    # counts starts after the load either way.
    last: tuple[str, object] | None = None
    for line in lines:
        request = json.loads(line)
        answer: dict
        try:
            # Loaded here, before the fork: every child of this job shares it.
            library = _kernels(request["kernels"], kernels)
            if last is None or last[0] != request["executable"]:
                last = None  # the previous build is let go before the next is loaded
                last = (request["executable"], _load(request["executable"], library))
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
        out.write(json.dumps(answer) + "\n")
        out.flush()


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
        sys.exit("usage: python -m planner.tvm.measure.memory --serve")
