"""Memory-planning problems: buffers with a size and a live interval, and their file formats.

A problem is a set of buffers. Each buffer needs ``size`` bytes over the half-open interval
``[lower, upper)`` of abstract time, may require its offset to be a multiple of ``alignment``,
and may come with a fixed ``offset`` that a plan must keep. The CSV format is the one of the
MiniMalloc benchmarks (``id,lower,upper,size`` plus optional ``alignment`` and ``offset``
columns); the JSON form is ``{"name": ..., "buffers": [{"id", "lower", ...}, ...]}``.

The ``offset`` column (or field) is where a plan's offsets are written too (``write_csv``
with offsets, ``planner solve -o``, and problem.csv artifacts of older compiles), so the
readers leave it out by default: a plan read back is its problem, and every strategy plans it
afresh. ``fixed_offsets=True`` keeps it as offsets every plan must keep; it is still parsed
and checked either way.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = [
    "Buffer",
    "Problem",
    "ProblemError",
    "lower_bound",
    "problem_from_json",
    "problem_to_json",
    "read_csv",
    "read_json",
    "read_problem",
    "without_fixed_offsets",
    "write_csv",
]

REQUIRED_COLUMNS = ("id", "lower", "upper", "size")
OPTIONAL_COLUMNS = ("alignment", "offset")


# Values must fit machine integers, as the exact search and other tools hold them so:
# times are signed 64-bit, sizes, alignments and offsets unsigned 64-bit.
TIME_MIN, TIME_MAX = -(1 << 63), (1 << 63) - 1
AMOUNT_MAX = (1 << 64) - 1


class ProblemError(ValueError):
    """A malformed problem: the message says what is wrong and where.

    ``field`` names the buffer field at fault (``"size"``, ...) when one is; ``path`` is
    the JSON path of the bad value (``("buffers", 3, "size")``) when known.
    """

    def __init__(self, message: str, *, field: str | None = None, path: tuple = ()) -> None:
        super().__init__(message)
        self.field = field
        self.path = path


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True as a size is always a mistake.
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Buffer:
    """One buffer: ``size`` bytes live over ``[lower, upper)``."""

    id: str
    lower: int
    upper: int
    size: int
    alignment: int = 1
    offset: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ProblemError(f"buffer id must be a non-empty string, got {self.id!r}", field="id")
        for name in ("lower", "upper", "size", "alignment"):
            if not _is_int(getattr(self, name)):
                value = getattr(self, name)
                raise ProblemError(
                    f"buffer {self.id!r}: {name} must be an integer, got {value!r}", field=name
                )
        for name in ("lower", "upper"):
            check_range(getattr(self, name), name, f"buffer {self.id!r}: ")
        if self.size < 0:
            raise ProblemError(
                f"buffer {self.id!r}: size must be >= 0, got {self.size}", field="size"
            )
        check_range(self.size, "size", f"buffer {self.id!r}: ")
        if self.lower >= self.upper:
            raise ProblemError(
                f"buffer {self.id!r}: lower must be < upper, got [{self.lower}, {self.upper})",
                field="upper",
            )
        if self.alignment < 1:
            raise ProblemError(
                f"buffer {self.id!r}: alignment must be >= 1, got {self.alignment}",
                field="alignment",
            )
        check_range(self.alignment, "alignment", f"buffer {self.id!r}: ")
        if self.offset is not None:
            if not _is_int(self.offset) or self.offset < 0:
                raise ProblemError(
                    f"buffer {self.id!r}: offset must be a non-negative integer, "
                    f"got {self.offset!r}",
                    field="offset",
                )
            check_range(self.offset, "offset", f"buffer {self.id!r}: ")
            if self.offset % self.alignment:
                raise ProblemError(
                    f"buffer {self.id!r}: fixed offset {self.offset} is not a multiple of "
                    f"its alignment {self.alignment}",
                    field="offset",
                )

    def overlaps(self, other: Buffer) -> bool:
        """True when the two live intervals share an instant (zero sizes still overlap)."""
        return self.lower < other.upper and other.lower < self.upper


@dataclass(frozen=True)
class Problem:
    """An immutable planning problem; buffer ids are unique."""

    buffers: tuple[Buffer, ...]
    name: str = ""
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        buffers = tuple(self.buffers)
        for position, buffer in enumerate(buffers):
            if not isinstance(buffer, Buffer):
                raise ProblemError(f"buffers[{position}] is not a Buffer: {buffer!r}")
        index: dict[str, int] = {}
        for position, buffer in enumerate(buffers):
            if buffer.id in index:
                raise ProblemError(
                    f"duplicate buffer id {buffer.id!r} (buffers {index[buffer.id]} and {position})"
                )
            index[buffer.id] = position
        object.__setattr__(self, "buffers", buffers)
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.buffers)

    def __iter__(self):
        return iter(self.buffers)

    def __getitem__(self, buffer_id: str) -> Buffer:
        return self.buffers[self._index[buffer_id]]

    def position(self, buffer_id: str) -> int:
        """Index of the buffer with this id in ``buffers``."""
        return self._index[buffer_id]


def without_fixed_offsets(problem: Problem) -> Problem:
    """``problem`` with every buffer free to be placed anywhere (the same object when none
    has a fixed offset)."""
    if all(buffer.offset is None for buffer in problem.buffers):
        return problem
    return Problem(
        tuple(replace(buffer, offset=None) for buffer in problem.buffers), name=problem.name
    )


def check_range(value: int, name: str, prefix: str = "") -> None:
    """ProblemError unless ``value`` fits the 64-bit range of the field ``name``."""
    if name in ("lower", "upper"):
        low, high, kind = TIME_MIN, TIME_MAX, "a signed"
    else:
        low, high, kind = 0, AMOUNT_MAX, "an unsigned"
        if value < 0:
            raise ProblemError(f"{prefix}{name} must be >= 0, got {value}", field=name)
    if not low <= value <= high:
        raise ProblemError(
            f"{prefix}{name} {value} is out of range: it must fit {kind} 64-bit integer "
            f"({low} to {high})",
            field=name,
        )


def lower_bound(problem: Problem | Iterable[Buffer]) -> int:
    """The max-live bound: the largest total size of buffers live at one instant.

    Every plan is at least this high. A sweep over sorted interval ends, O(n log n).
    """
    buffers = [buffer for buffer in problem if buffer.size]
    if len(buffers) > 1000:
        fast = _lower_bound_numpy(buffers)
        if fast is not None:
            return fast
    events: list[tuple[int, int]] = []
    for buffer in problem:
        if buffer.size:
            events.append((buffer.lower, buffer.size))
            events.append((buffer.upper, -buffer.size))
    # Intervals are half-open, so at equal times the ends (negative) come before the starts.
    events.sort()
    live = best = 0
    for _, delta in events:
        live += delta
        if live > best:
            best = live
    return best


def _lower_bound_numpy(buffers: list[Buffer]) -> int | None:
    """``lower_bound`` by numpy for many buffers; None when the sums could leave int64.

    The sizes are summed per distinct instant (ends and starts alike) and the running sum
    taken at each: within one instant the sweep's sum only falls (the ends) and then rises
    (the starts), so its highest point is at one of those. No lexsort (slow on millions).
    """
    sizes = [buffer.size for buffer in buffers]
    if sum(sizes) >= 1 << 63:
        return None
    size = np.array(sizes, dtype=np.int64)
    lowers = np.array([buffer.lower for buffer in buffers], dtype=np.int64)
    uppers = np.array([buffer.upper for buffer in buffers], dtype=np.int64)
    times = np.sort(np.concatenate((lowers, uppers)))
    distinct = np.empty(len(times), dtype=bool)
    distinct[:1] = True
    np.not_equal(times[1:], times[:-1], out=distinct[1:])
    points = times[distinct]
    delta = np.zeros(len(points) + 1, dtype=np.int64)
    np.add.at(delta, np.searchsorted(points, lowers), size)
    np.add.at(delta, np.searchsorted(points, uppers), -size)
    return max(int(np.cumsum(delta).max()), 0)


# --------------------------------------------------------------------------------------------
# CSV


# Python's int() also takes "1_000" and digits of other scripts ("١٠"): a file with those
# is not the plain decimal CSV that other tools read, so they are refused.
_DECIMAL = re.compile(r"[+-]?[0-9]+")
# More digits than any 64-bit integer has (leading zeros aside); int() refuses some of
# these (over 4,300 digits) with a message that does not say the value is out of range.
_MAX_DIGITS = 20


def _parse_int(text: str, column: str, where: str) -> int:
    stripped = text.strip()
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} chars)"
    if not _DECIMAL.fullmatch(stripped):
        raise ProblemError(f"{where}: {column} must be an integer, got {shown!r}")
    digits = len(stripped.lstrip("+-").lstrip("0"))
    if digits > _MAX_DIGITS:
        raise ProblemError(
            f"{where}: {column} {shown} is out of range: {digits} digits, more than any "
            "64-bit integer has"
        )
    value = int(stripped, 10)
    try:
        check_range(value, column)
    except ProblemError as error:
        raise ProblemError(f"{where}: {error}") from None
    return value


def _decoding_error(label: str, path: str | os.PathLike[str], error: UnicodeDecodeError):
    """A ProblemError naming the line and column of the first byte that is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
        position = 0
    except UnicodeDecodeError as found:
        position = found.start
    line = data.count(b"\n", 0, position) + 1
    column = position - (data.rfind(b"\n", 0, position) + 1) + 1
    return ProblemError(f"{label}:{line}: column {column}: not UTF-8 text ({error.reason})")


def _problem_name(source: object) -> str:
    if isinstance(source, str | os.PathLike):
        return Path(source).stem
    return ""


def read_csv(
    path: str | os.PathLike[str] | IO[str],
    name: str | None = None,
    *,
    fixed_offsets: bool = False,
) -> Problem:
    """Read a MiniMalloc-style CSV (``id,lower,upper,size[,alignment][,offset]``).

    An ``offset`` column is left out unless ``fixed_offsets`` (see the module's docstring).
    Raises ProblemError naming the file, line and column of the first bad cell.
    """
    if isinstance(path, str | os.PathLike):
        label = str(path)
        try:
            with open(path, newline="", encoding="utf-8-sig") as handle:
                problem = _read_csv_rows(
                    handle, label, name if name is not None else Path(path).stem
                )
        except OSError as error:
            raise ProblemError(f"{label}: cannot read: {error.strerror or error}") from error
        except UnicodeDecodeError as error:
            raise _decoding_error(label, path, error) from None
    else:
        label = getattr(path, "name", "<stream>")
        problem = _read_csv_rows(path, str(label), name or "")
    return problem if fixed_offsets else without_fixed_offsets(problem)


def _read_csv_rows(handle: IO[str], label: str, name: str) -> Problem:
    # Strict: a quote left open at the end of the file is an error, not a field that
    # swallows the rest of the file.
    reader = csv.reader(handle, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise ProblemError(
            f"{label}:1: column 1: empty file, expected a header 'id,lower,upper,size'"
        ) from None
    except csv.Error as error:
        raise ProblemError(f"{label}:1: column 1: {error}") from None
    columns = [cell.strip().lower() for cell in header]
    for number, column in enumerate(columns, start=1):
        if column not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
            raise ProblemError(
                f"{label}:1: column {number}: unknown column {column!r} "
                f"(expected {', '.join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)})"
            )
        if columns.index(column) != number - 1:
            raise ProblemError(f"{label}:1: column {number}: duplicate column {column!r}")
    missing = [column for column in REQUIRED_COLUMNS if column not in columns]
    if missing:
        raise ProblemError(
            f"{label}:1: column {len(columns) + 1}: missing column(s) {', '.join(missing)}"
        )
    position = {column: index for index, column in enumerate(columns)}

    buffers: list[Buffer] = []
    first_line: dict[str, int] = {}
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(columns):
                raise ProblemError(
                    f"{label}:{line}: column {min(len(row), len(columns)) + 1}: "
                    f"expected {len(columns)} fields, got {len(row)}"
                )
            values: dict[str, Any] = {}
            for column, index in position.items():
                where = f"{label}:{line}: column {index + 1} ({column})"
                cell = row[index]
                if column == "id":
                    values["id"] = cell.strip()
                    if not values["id"]:
                        raise ProblemError(f"{where}: empty id")
                elif column == "offset" and not cell.strip():
                    values["offset"] = None
                elif column == "alignment" and not cell.strip():
                    values["alignment"] = 1
                else:
                    values[column] = _parse_int(cell, column, where)
            buffer_id = values["id"]
            if buffer_id in first_line:
                raise ProblemError(
                    f"{label}:{line}: column {position['id'] + 1} (id): duplicate buffer id "
                    f"{buffer_id!r} (first on line {first_line[buffer_id]})"
                )
            first_line[buffer_id] = line
            try:
                buffers.append(Buffer(**values))
            except ProblemError as error:
                column = position.get(error.field or "id", 0) + 1
                raise ProblemError(
                    f"{label}:{line}: column {column} ({error.field or 'id'}): {error}"
                ) from None
    except csv.Error as error:
        raise ProblemError(f"{label}:{reader.line_num}: column 1: {error}") from None
    return Problem(tuple(buffers), name=name)


def write_csv(
    path_or_file: str | os.PathLike[str] | IO[str],
    problem: Problem,
    offsets: Mapping[str, int] | None = None,
) -> None:
    """Write the problem as CSV; with ``offsets`` (a plan), add an ``offset`` column holding
    them.

    Without ``offsets``, fixed offsets of the problem are written (empty cells elsewhere),
    which ``read_csv(..., fixed_offsets=True)`` reads back as fixed. The ``alignment``
    column is written only when some buffer needs one.
    """
    columns = list(REQUIRED_COLUMNS)
    if any(buffer.alignment != 1 for buffer in problem.buffers):
        columns.append("alignment")
    if offsets is not None or any(buffer.offset is not None for buffer in problem.buffers):
        columns.append("offset")
    if isinstance(path_or_file, str | os.PathLike):
        with open(path_or_file, "w", newline="", encoding="utf-8") as handle:
            _write_csv_rows(handle, problem, offsets, columns)
    else:
        _write_csv_rows(path_or_file, problem, offsets, columns)


def _write_csv_rows(
    handle: IO[str], problem: Problem, offsets: Mapping[str, int] | None, columns: list[str]
) -> None:
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(columns)
    for buffer in problem.buffers:
        row: list[object] = [buffer.id, buffer.lower, buffer.upper, buffer.size]
        if "alignment" in columns:
            row.append(buffer.alignment)
        if "offset" in columns:
            if offsets is not None:
                row.append(offsets[buffer.id])
            else:
                row.append("" if buffer.offset is None else buffer.offset)
        writer.writerow(row)


def problem_to_csv_text(problem: Problem, offsets: Mapping[str, int] | None = None) -> str:
    """The CSV text ``write_csv`` would write."""
    handle = io.StringIO()
    write_csv(handle, problem, offsets)
    return handle.getvalue()


# --------------------------------------------------------------------------------------------
# JSON


def problem_to_json(problem: Problem) -> dict[str, Any]:
    """A JSON-ready dict: ``{"name": ..., "buffers": [{"id", "lower", "upper", "size",
    "alignment", "offset"}, ...]}``."""
    return {
        "name": problem.name,
        "buffers": [
            {
                "id": buffer.id,
                "lower": buffer.lower,
                "upper": buffer.upper,
                "size": buffer.size,
                "alignment": buffer.alignment,
                "offset": buffer.offset,
            }
            for buffer in problem.buffers
        ],
    }


def problem_from_json(obj: Any, label: str = "<json>") -> Problem:
    """Build a problem from the dict ``problem_to_json`` returns (or a bare list of buffers).

    ``alignment`` and ``offset`` may be left out. Raises ProblemError naming the bad field.
    """
    top: tuple = ("buffers",)
    if isinstance(obj, list):
        obj = {"buffers": obj}
        top = ()
    if not isinstance(obj, dict):
        raise ProblemError(f"{label}: expected an object with 'buffers', got {type(obj).__name__}")
    name = obj.get("name", "")
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise ProblemError(f"{label}: name must be a string, got {name!r}", path=("name",))
    unknown = set(obj) - {"name", "buffers"}
    if unknown:
        first = sorted(map(str, unknown))[0]
        raise ProblemError(
            f"{label}: unknown field(s) {', '.join(sorted(map(str, unknown)))}",
            path=(first, None),
        )
    items = obj.get("buffers")
    if not isinstance(items, list):
        raise ProblemError(f"{label}: 'buffers' must be a list", path=top)
    buffers: list[Buffer] = []
    seen: dict[str, int] = {}
    allowed = set(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
    for number, item in enumerate(items):
        where = f"{label}: buffers[{number}]"
        at = (*top, number)
        if not isinstance(item, dict):
            raise ProblemError(f"{where}: expected an object, got {type(item).__name__}", path=at)
        missing = [key for key in REQUIRED_COLUMNS if key not in item]
        if missing:
            raise ProblemError(f"{where}: missing field(s) {', '.join(missing)}", path=at)
        extra = set(item) - allowed
        if extra:
            first = sorted(map(str, extra))[0]
            raise ProblemError(
                f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}",
                path=(*at, first, None),
            )
        buffer_id = item["id"]
        if _is_int(buffer_id):
            buffer_id = str(buffer_id)
        for key in ("lower", "upper", "size", "alignment", "offset"):
            value = item.get(key)
            if key in ("alignment", "offset") and value is None:
                continue
            if not _is_int(value):
                raise ProblemError(
                    f"{where}.{key}: must be an integer, got {value!r}", path=(*at, key)
                )
        if isinstance(buffer_id, str) and buffer_id in seen:
            raise ProblemError(
                f"{where}: duplicate buffer id {buffer_id!r} (first at buffers[{seen[buffer_id]}])",
                path=(*at, "id"),
            )
        alignment = item.get("alignment")
        try:
            buffer = Buffer(
                id=buffer_id,
                lower=item["lower"],
                upper=item["upper"],
                size=item["size"],
                alignment=1 if alignment is None else alignment,
                offset=item.get("offset"),
            )
        except ProblemError as error:
            raise ProblemError(
                f"{where}: {error}", path=(*at, error.field) if error.field else at
            ) from None
        seen[buffer.id] = number
        buffers.append(buffer)
    return Problem(tuple(buffers), name=name)


def read_json(path: str | os.PathLike[str], *, fixed_offsets: bool = False) -> Problem:
    """Read a problem from a JSON file in the ``problem_to_json`` form; ``offset`` fields
    are left out unless ``fixed_offsets`` (see the module's docstring)."""
    label = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ProblemError(f"{label}: cannot read: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise _decoding_error(label, path, error) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProblemError(
            f"{label}:{error.lineno}: column {error.colno}: invalid JSON: {error.msg}"
        ) from None
    except ValueError as error:
        # Python refuses integers of more than 4,300 digits.
        match = re.search(r"\d{4300,}", text)
        line, column = _line_and_column(text, match.start() if match else 0)
        raise ProblemError(f"{label}:{line}: column {column}: {error}") from None
    except RecursionError:
        # The decoder recurses once per nested array or object.
        line, column = _line_and_column(text, _too_deep(text))
        raise ProblemError(
            f"{label}:{line}: column {column}: invalid JSON: nested more than "
            f"{MAX_JSON_DEPTH} levels deep"
        ) from None
    try:
        problem = problem_from_json(obj, label=label)
    except ProblemError as error:
        line, column = _line_and_column(text, _json_position(text, error.path))
        message = str(error).removeprefix(f"{label}: ")
        raise ProblemError(f"{label}:{line}: column {column}: {message}") from None
    if not problem.name:
        problem = Problem(problem.buffers, name=Path(path).stem)
    return problem if fixed_offsets else without_fixed_offsets(problem)


# A problem is three levels deep (the object, its buffer list, a buffer); deeper nesting
# that overflows the decoder's stack is reported from this depth on.
MAX_JSON_DEPTH = 100


def _too_deep(text: str) -> int:
    """Where the first array or object nested deeper than ``MAX_JSON_DEPTH`` opens (the
    start of the text if none is)."""
    depth = 0
    in_string = escaped = False
    for position, character in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == '"':
                in_string = False
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return position
        elif character in "]}":
            depth -= 1
    return 0


def _line_and_column(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _json_position(text: str, path: tuple) -> int:
    """Where the value at ``path`` (keys and indexes; a final None: the key itself rather
    than its value) starts in the valid JSON ``text``; as deep as the path can be
    followed."""
    decoder = json.JSONDecoder()

    def skip(index: int) -> int:
        return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]

    position = skip(0)
    for step_number, step in enumerate(path):
        if step is None:
            break
        opening = text[position : position + 1]
        if opening == "{" and isinstance(step, str):
            index = skip(position + 1)
            found = None
            while index < len(text) and text[index] != "}":
                key_start = index
                key, index = decoder.raw_decode(text, index)
                index = skip(skip(index) + 1)  # the colon
                if key == step:
                    last = step_number + 1 < len(path) and path[step_number + 1] is None
                    found = key_start if last else index
                    break
                _, index = decoder.raw_decode(text, index)
                index = skip(index)
                if text[index : index + 1] == ",":
                    index = skip(index + 1)
            if found is None:
                return position
            position = found
        elif opening == "[" and isinstance(step, int):
            index = skip(position + 1)
            for _ in range(step):
                if text[index : index + 1] == "]":
                    return position
                _, index = decoder.raw_decode(text, index)
                index = skip(index)
                if text[index : index + 1] == ",":
                    index = skip(index + 1)
            position = index
        else:
            return position
    return position


def read_problem(path: str | os.PathLike[str], *, fixed_offsets: bool = False) -> Problem:
    """Read a ``.json`` or (any other suffix) CSV problem file; offsets in it are left out
    unless ``fixed_offsets`` (see the module's docstring)."""
    if Path(path).suffix.lower() == ".json":
        return read_json(path, fixed_offsets=fixed_offsets)
    return read_csv(path, fixed_offsets=fixed_offsets)
