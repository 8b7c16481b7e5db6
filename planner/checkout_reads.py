"""What a job looked at of a checkout: the record that keys a model's compile by what it read.

The import phase of a sandboxed compile runs the repository's code against its checkout,
which the worker serves to it through a view of its own (``workers/sandbox/view.py``): the
kernel asks that view about every name any process of the job looks up and every folder it
lists, whatever does it (Python, native code, a program it starts), and the view, outside the
sandbox, writes them down by path relative to the checkout:

- ``files``: every path looked up, opened or read, found or not. A file that was looked for
  and missing is as much an input as one that was read: adding it must count as a change.
- ``folders``: every folder listed. What a listing saw is the names in the folder, so a
  file added to a listed folder counts as a change too.

A path through a symbolic link is noted as given and as it resolves (the kernel looks both
up). Paths outside the checkout are the environment (Python, TVM, the system), which the
compile cache keys by its installed packages, toolchain and planner instead.

Plain Python: the workers check every field of a record with :func:`parse_reads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: At most this many paths of each kind: a job that looks at more is keyed by the whole tree.
MAX_PATHS = 20_000
MAX_PATH_CHARS = 1024
#: The record is stored with each Result it keys: a record past this size is refused (the
#: Result is keyed by the whole tree instead), rather than stored again and again. Twenty
#: thousand paths of a hundred characters fit.
MAX_RECORD_BYTES = 2 << 20
#: The checkout's root, as a path of the record.
ROOT = "."


class InvalidReads(ValueError):
    """A record that breaks the format; the message says how."""


@dataclass(frozen=True)
class CheckoutReads:
    """What a job looked at of a checkout: paths relative to its root, sorted."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"files": list(self.files), "folders": list(self.folders)}


def parse_reads(data: Any) -> CheckoutReads:
    """The record in ``data`` (JSON the view wrote, or a stored Result's), every path
    checked: a normal relative path inside the checkout (no ``..``, ``.`` or empty
    component, not absolute, no NUL), of bounded length and number. :class:`InvalidReads`
    otherwise."""
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
