"""TVM's executable I/O without its noise: importable without TVM, so that a process that
only loads and runs builds (:mod:`planner.tvm.measure.memory`) can start TVM's runtime alone."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

#: What :func:`planner.tvm.build.kernels.save_executable` writes (``relax.VMExecutable``),
#: loaded by TVM's runtime without its compiler (``planner.tvm.build.kernels`` imports the
#: compiler's Relax).
LOAD_EXECUTABLE = "ffi.Module.load_from_file.relax.VMExecutable"


#: TVM 0.27 logs a warning for every memory scope each time it saves or loads a VM
#: executable (a debugging line left in src/runtime/vm/executable.cc): hundreds of lines per
#: model in a user's terminal and a worker's log, with nothing to act on.
_SCOPE_SAVING = re.compile(
    rb"^\[[0-9:]+\] \S*executable\.cc:\d+: Warning: Scope (Saving|Loaded):"
)


#: File descriptor 2 belongs to the whole process: threads that hold back stderr at the
#: same time (one saving an executable while another loads one) share one redirection,
#: made by the first to enter and undone by the last to leave.
_STDERR_LOCK = threading.Lock()
_held_stderr: list = []  # [the temporary file, the original descriptor, how many inside]


@contextlib.contextmanager
def quiet_executable_io() -> Iterator[None]:
    """Hold back what native code writes to stderr meanwhile, then pass on every line but
    those warnings. (At the file descriptor: TVM's C++ logging bypasses ``sys.stderr``.)"""
    with _STDERR_LOCK:
        if not _held_stderr:
            sys.stderr.flush()
            held = tempfile.TemporaryFile()
            original = os.dup(2)
            os.dup2(held.fileno(), 2)
            _held_stderr[:] = [held, original, 0]
        _held_stderr[2] += 1
    try:
        yield
    finally:
        with _STDERR_LOCK:
            _held_stderr[2] -= 1
            if _held_stderr[2] == 0:
                held, original, _ = _held_stderr
                _held_stderr.clear()
                os.dup2(original, 2)
                os.close(original)
                held.seek(0)
                kept = b"".join(line for line in held if not _SCOPE_SAVING.match(line))
                held.close()
                if kept:
                    os.write(2, kept)


def export_library(executable, path: str, **options) -> None:
    """``executable.export_library(path, **options)``, without TVM 0.27's stray warnings."""
    with quiet_executable_io():
        executable.export_library(path, **options)
