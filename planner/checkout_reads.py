"""Which files of a checkout a process read, recorded from inside it by Python's audit hooks.

The import phase of a sandboxed compile (:mod:`planner.tvm.job`) runs the repository's code;
before any of it runs, :func:`start_recording` installs an audit hook (:func:`sys.addaudithook`)
and wraps the ``os`` functions that probe a path without opening it. From then on the process
notes, by path relative to the checkout:

- ``files``: every path it opened (``open``, ``io.open_code`` for each module it imports,
  ``os.open``, ``ctypes`` loading a library), stat'ed or checked for (``os.stat``,
  ``os.lstat``, ``os.access``: ``os.path.exists``, ``Path.is_file`` and the like), whether or
  not it was there. A file that was looked for and missing is as much an input as one that was
  read: adding it must count as a change.
- ``folders``: every folder it listed (``os.listdir``, ``os.scandir``: ``glob``, ``os.walk``,
  and the import system, which lists each folder of ``sys.path`` and each package it looks
  in). What a listing saw is the names in the folder, so a file added to a listed folder
  counts as a change too.

A path through a symbolic link is noted as given and as it resolves, so a worker sees both the
link and what it points at. Paths outside the checkout are the environment (Python, TVM, the
system), which the compile cache keys by toolchain and planner instead.

What it cannot see it says: a process that starts another program (``subprocess``,
``os.fork``, ``os.exec*``, ``os.system``, ``os.posix_spawn``) may read anything there
unrecorded, so the record is marked incomplete and the worker keys the compile by the whole
tree. Native code that opens files itself (a C extension calling ``fopen``) is not seen; the
repository's code runs in this process, so the record is a hint in any case (the compile
cache's docstring says why that is safe).

Plain Python, imported by the child before TVM: the workers read the record back with
:func:`parse_reads`, which checks every field.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

#: At most this many paths of each kind: a record beyond it is not a hint worth keeping.
MAX_PATHS = 20_000
MAX_PATH_CHARS = 1024
#: The record is stored with each Result it keys: a record past this size is refused (the
#: Result is keyed by the whole tree instead), rather than stored again and again. Twenty
#: thousand paths of a hundred characters fit.
MAX_RECORD_BYTES = 2 << 20
#: The checkout's root, as a path of the record.
ROOT = "."

#: Audit events that open or load a file by path (the first argument).
_OPENED = frozenset({"open", "ctypes.dlopen"})
_LISTED = frozenset({"os.listdir", "os.scandir"})
#: Audit events after which this process no longer sees everything read for it: Python
#: code running elsewhere (a fork), a shell, or this process replaced.
_ELSEWHERE = frozenset({"os.system", "os.exec", "os.fork", "os.forkpty", "pty.spawn"})
#: Audit events that start a program: (index of the program, index of its arguments).
_STARTED = {"subprocess.Popen": (0, 1), "os.posix_spawn": (0, 1), "os.spawn": (1, 2)}
#: Programs that run code from their command line or from files it does not name.
_INTERPRETERS = ("sh", "bash", "dash", "zsh", "ksh", "fish", "python", "env", "make")
#: ``os`` functions that look a path up without an audit event.
_PROBES = ("stat", "lstat", "access")


class InvalidReads(ValueError):
    """A record that breaks the format; the message says how."""


@dataclass(frozen=True)
class CheckoutReads:
    """What a process read of a checkout: paths relative to its root, sorted."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"files": list(self.files), "folders": list(self.folders)}


def parse_reads(data: Any) -> CheckoutReads:
    """The record in ``data`` (JSON a sandboxed process wrote), every path checked: a
    normal relative path inside the checkout (no ``..``, ``.`` or empty component, not
    absolute, no NUL), of bounded length and number. :class:`InvalidReads` otherwise;
    None-like answers (``incomplete``) are the caller's to look at first."""
    if not isinstance(data, dict):
        raise InvalidReads(f"a record is a {type(data).__name__}, not an object")
    unknown = sorted(str(k)[:80] for k in data if k not in ("files", "folders"))
    if unknown:
        raise InvalidReads(f"unknown fields: {', '.join(unknown)}")
    paths = {}
    for name in ("files", "folders"):
        values = data.get(name, [])
        if not isinstance(values, list):
            raise InvalidReads(f"{name} is not a list")
        if len(values) > MAX_PATHS:
            raise InvalidReads(f"{name} names more than {MAX_PATHS} paths")
        for value in values:
            problem = path_problem(value)
            if problem:
                shown = value[:80] if isinstance(value, str) else type(value).__name__
                raise InvalidReads(f"{name}: {shown!r} {problem}")
        paths[name] = tuple(sorted(set(values)))
    return CheckoutReads(**paths)


def path_problem(value: object) -> str:
    """Why ``value`` is not a path of a record ("" when it is one)."""
    if not isinstance(value, str):
        return "is not a text"
    if value == ROOT:
        return ""
    if not value or len(value) > MAX_PATH_CHARS:
        return "is empty or too long"
    if "\0" in value:
        return "holds a NUL"
    if value.startswith("/"):
        return "is absolute"
    try:
        # A name that is not UTF-8 decodes to lone surrogates, which JSON columns refuse.
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8"
    if any(part in ("", ".", "..") for part in value.split("/")):
        return "is not a normal relative path"
    return ""


@dataclass
class Recorder:
    """Notes what this process reads under ``root`` (see the module docstring)."""

    root: str
    files: set[str]
    folders: set[str]
    #: Why the record is not the whole story ("" while it is).
    incomplete: str = ""

    def __post_init__(self) -> None:
        self._busy = threading.local()

    def note(self, path: Any, *, listed: bool = False) -> None:
        if self.incomplete or getattr(self._busy, "on", False):
            return
        # Anything called from here may be audited or wrapped in turn (realpath stats):
        # those calls are the recorder's own, not the process's.
        self._busy.on = True
        try:
            self._note(path, listed)
        except Exception:  # a path that cannot be read as one is not a file of the checkout
            pass
        finally:
            self._busy.on = False

    def _note(self, path: Any, listed: bool) -> None:
        if path is None:
            path = "."
        if isinstance(path, int):
            # A descriptor (os.scandir(fd), fdopen): the kernel knows which path it is.
            path = os.readlink(f"/proc/self/fd/{path}")
        path = os.fsdecode(os.fspath(path))
        given = os.path.abspath(path)
        resolved = os.path.realpath(given)
        target = self.folders if listed else self.files
        for candidate in dict.fromkeys((given, resolved)):
            relative = self._relative(candidate)
            if relative is None:
                continue
            if relative not in target and len(target) >= MAX_PATHS:
                self.incomplete = f"it read more than {MAX_PATHS} paths of the checkout"
                return
            target.add(relative)

    def _relative(self, path: str) -> str | None:
        if path == self.root:
            return ROOT
        if not path.startswith(self.root + os.sep):
            return None
        relative = path[len(self.root) + 1:]
        problem = path_problem(relative)
        if problem:
            # Left out, it would look unread: the record says it is incomplete instead.
            self.incomplete = f"a path of the checkout {problem}"
            return None
        return relative

    def hook(self, event: str, args: tuple) -> None:
        if event in _OPENED:
            if args and args[0] is not None and not isinstance(args[0], int):
                self.note(args[0])
        elif event in _LISTED:
            self.note(args[0] if args else None, listed=True)
        elif event in _STARTED:
            self.started(event, args)
        elif event in _ELSEWHERE and not self.incomplete:
            self.incomplete = f"it ran code this record cannot see ({event})"

    def started(self, event: str, args: tuple) -> None:
        """A program started: what its command line names in the checkout is read.

        The environment starts programs of its own (``ctypes.util.find_library`` runs
        ``ldconfig -p``), so a program alone does not make the record incomplete; one of
        the checkout's, a shell or an interpreter (which may read files nobody named) does.
        """
        where, what = _STARTED[event]
        argv = [os.fsdecode(a) for a in (args[what] or ()) if isinstance(a, (str, bytes))]
        program = args[where] if args[where] is not None else (argv[0] if argv else "")
        program = os.fsdecode(program)
        name = os.path.basename(program)
        if name.startswith(_INTERPRETERS) or self._relative(
            os.path.realpath(os.path.abspath(program))
        ) is not None:
            self.incomplete = f"it ran {name[:80]!r}, which may read files unrecorded"
            return
        for argument in argv[1:]:
            # An option's value (--file=x) is a path as much as a bare argument is.
            for path in (argument, argument.partition("=")[2]):
                if path and not path.startswith("-"):
                    self.note(path)
        self.note(program)

    def result(self) -> dict:
        """The record as JSON: :class:`CheckoutReads`, or why there is none."""
        if self.incomplete:
            return {"incomplete": self.incomplete}
        return CheckoutReads(tuple(sorted(self.files)), tuple(sorted(self.folders))).to_json()

    def write(self, path: str) -> None:
        reads = self.result()
        # Stops noting first: writing the record opens a file too.
        self.incomplete = self.incomplete or "the record was written"
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(reads, handle)


def start_recording(root: str) -> Recorder:
    """Record from now on what this process reads of the checkout ``root``.

    Call it before any of the repository's code runs: an audit hook cannot be removed, and
    what was read before it is not known.
    """
    recorder = Recorder(os.path.realpath(root), set(), set())
    sys.addaudithook(recorder.hook)
    for name in _PROBES:
        original = getattr(os, name)

        def probe(path, *args, _original=original, **kwargs):
            if not isinstance(path, int) and kwargs.get("dir_fd") is None:
                recorder.note(path)
            return _original(path, *args, **kwargs)

        setattr(os, name, probe)
        # Code that asks whether a function takes a descriptor or dir_fd asks of the
        # function it finds on os: the wrapper takes what the original took.
        for supported in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks,
                          os.supports_effective_ids):
            if original in supported:
                supported.add(probe)
    # The import system lists each folder of sys.path once and keeps the names: folders it
    # listed before the hook (the checkout is sys.path[0]) are listed again, under it.
    importlib.invalidate_caches()
    return recorder
