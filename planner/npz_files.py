"""Arrays from an ``.npz`` file that untrusted code wrote, checked before a byte is read.

``np.load`` trusts the archive: a member's declared size, its ``.npy`` header and its dtype
decide how much is inflated and allocated, and an object dtype is unpickled when pickles
are allowed. A sandboxed child writes the inputs a model is checked on (``inputs.npz``) and
the inputs a model fixes (``fixed.npz``), and the worker and the measuring child read them,
so every member is checked against the archive's directory and its header first: a plain
name, a known compression, numeric dtypes only, and sizes that agree and stay under a
limit. The data is then read as raw bytes: nothing in the file is ever executed.

A zip is read from its end (its directory), so a zip reader takes a file that is something
else at its start: an ELF shared object, say, with an archive appended, is both a library a
loader would map and an ``.npz`` numpy reads. An archive is taken only as ``np.savez`` writes
one: its first member's header at its first byte, each member right after the one before,
then the directory and its end record, and not a byte before, between or after them.
"""

from __future__ import annotations

import math
import os
import re
import struct
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

#: More members than any model has inputs: a file with more is not one Peakwatch wrote.
MAX_MEMBERS = 4096
#: The most bytes of arrays one file may hold (inputs and unbound weights of a model).
MAX_BYTES = 4 << 30
#: A ``.npy`` header is a short dict literal; numpy's own default limit.
MAX_HEADER_BYTES = 10_000
#: bool, signed and unsigned integers, floats, complex: what a tensor holds.
NUMERIC_KINDS = frozenset("biufc")

#: A zip member's local header, where every archive ``np.savez`` writes begins.
LOCAL_HEADER = b"PK\x03\x04"
#: Sniffed only to say what a refused file is instead.
_ELF = b"\x7fELF"
_END_RECORD = b"PK\x05\x06"
_LOCAL = struct.Struct("<4s5H3L2H")  # signature ... name length, extra field length
_END = struct.Struct("<4s4H2LH")  # signature, disks, counts, directory size and offset, comment
_END64_LOCATOR = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")
_DATA_DESCRIPTOR = 0x08

_MEMBER = re.compile(r"^[A-Za-z0-9_.\-]{1,200}\.npy$")
_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


class UnsafeArrays(ValueError):
    """The file is not an archive of plain numeric arrays within the limits."""


def load_arrays(path: str | Path, *, max_bytes: int = MAX_BYTES,
                max_members: int = MAX_MEMBERS) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path`` by name (``np.savez`` order), or
    :class:`UnsafeArrays` saying what is wrong with it."""
    name = Path(path).name
    try:
        with open(path, "rb") as file:
            return _arrays(file, max_bytes, max_members, keep=True)
    except _Unreadable as exc:
        raise UnsafeArrays(f"{name} is not a readable array archive: {exc}") from None
    except UnsafeArrays as exc:
        raise UnsafeArrays(f"{name}: {exc}") from None
    except OSError as exc:
        raise UnsafeArrays(f"{name} is not a readable array archive: {exc}") from None


def check_arrays(file: BinaryIO, *, max_bytes: int = MAX_BYTES,
                 max_members: int = MAX_MEMBERS) -> None:
    """:class:`UnsafeArrays` unless the open ``file`` is an archive :func:`load_arrays`
    takes: every check it makes, every member read to its end (and its checksum), no array
    kept. For a file handed over, checked before anything is done with it; the reason
    names no file (the caller knows which it checked)."""
    try:
        _arrays(file, max_bytes, max_members, keep=False)
    except _Unreadable as exc:
        raise UnsafeArrays(f"it is not a readable archive: {exc}") from None


class _Unreadable(UnsafeArrays):
    """zipfile or numpy could not read it at all."""


def _arrays(file: BinaryIO, max_bytes: int, max_members: int, *, keep: bool):
    try:
        with zipfile.ZipFile(file) as archive:
            members = _checked_members(archive, max_bytes, max_members)
            _check_layout(file, members)
            arrays = {}
            for info in members:
                array = _read_member(archive, info, keep=keep)
                if keep:
                    arrays[info.filename.removesuffix(".npy")] = array
            return arrays
    except UnsafeArrays:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, struct.error) as exc:
        # A CRC mismatch, a truncated member, a header numpy refuses: all say the same.
        raise _Unreadable(str(exc)) from None


def positional(arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The arrays ``np.savez(path, *arrays)`` wrote, in order; UnsafeArrays unless the
    names are exactly ``arr_0`` ... ``arr_{n-1}``."""
    expected = [f"arr_{i}" for i in range(len(arrays))]
    if sorted(arrays) != sorted(expected):
        raise UnsafeArrays(
            f"the arrays are not named arr_0..arr_{len(arrays) - 1}: "
            + ", ".join(sorted(arrays)[:5])[:200]
        )
    return [arrays[key] for key in expected]


def _checked_members(archive: zipfile.ZipFile, max_bytes: int, max_members: int):
    members = archive.infolist()
    if len(members) > max_members:
        raise UnsafeArrays(f"it holds {len(members)} members, more than {max_members}")
    names = [info.filename for info in members]
    if len(set(names)) != len(names):
        # np.load would keep one of the two silently: which one is the writer's choice.
        raise UnsafeArrays("it holds two members of one name")
    total = 0
    for info in members:
        if not _MEMBER.match(info.filename):
            raise UnsafeArrays(f"member {info.filename[:100]!r} is not an array's name")
        if info.compress_type not in _COMPRESSIONS or info.flag_bits & 0x1:
            raise UnsafeArrays(f"member {info.filename} is encrypted or oddly compressed")
        total += info.file_size
        if total > max_bytes:
            raise UnsafeArrays(f"its members declare more than {max_bytes} bytes")
    return members


def _check_layout(file: BinaryIO, members: list[zipfile.ZipInfo]) -> None:
    """UnsafeArrays unless ``file`` is the ``members``, one after the other from its first
    byte, then their directory and its end record, and nothing else."""
    file.seek(0, os.SEEK_END)
    size = file.tell()
    file.seek(0)
    first = file.read(4)
    if first != (LOCAL_HEADER if members else _END_RECORD):
        what = ", an ELF file's" if first == _ELF else ""
        raise UnsafeArrays(
            f"it does not begin with a zip member: its first bytes are {first!r}{what}"
        )
    offset = 0
    for info in sorted(members, key=lambda member: member.header_offset):
        if info.header_offset != offset:
            raise UnsafeArrays(
                f"it holds {info.header_offset - offset} bytes before member {info.filename}"
                if info.header_offset > offset
                else f"member {info.filename} overlaps the member before it"
            )
        if info.flag_bits & _DATA_DESCRIPTOR:
            # np.savez writes to a file it can seek in: sizes stand in the header.
            raise UnsafeArrays(f"member {info.filename} has its sizes after its data")
        file.seek(offset)
        header = file.read(_LOCAL.size)
        if len(header) != _LOCAL.size or header[:4] != LOCAL_HEADER:
            raise UnsafeArrays(f"member {info.filename} has no header where it should start")
        name_length, extra_length = _LOCAL.unpack(header)[-2:]
        offset += _LOCAL.size + name_length + extra_length + info.compress_size
    directory = _directory_offset(file, size)
    if offset != directory:
        raise UnsafeArrays(
            f"it holds {directory - offset} bytes between its members and their directory"
            if directory > offset else "its members run into their directory"
        )


def _directory_offset(file: BinaryIO, size: int) -> int:
    """Where the directory starts, which must end where the end record (or the ZIP64 end
    record, for a large archive) begins; the end record must end the file."""
    end = size - _END.size
    if end < 0:
        raise UnsafeArrays("it is too short for a zip archive")
    file.seek(end)
    signature, *_, directory_size, directory, comment = _END.unpack(file.read(_END.size))
    if signature != _END_RECORD or comment:
        raise UnsafeArrays("it does not end with a zip archive's end record")
    locator = end - _END64_LOCATOR.size
    if locator >= 0:
        file.seek(locator)
        signature, _, record, _ = _END64_LOCATOR.unpack(file.read(_END64_LOCATOR.size))
        if signature == b"PK\x06\x07":
            if record != locator - _END64.size:
                raise UnsafeArrays("it holds bytes around its ZIP64 end record")
            file.seek(record)
            fields = _END64.unpack(file.read(_END64.size))
            if fields[0] != b"PK\x06\x06" or fields[1] != _END64.size - 12:
                raise UnsafeArrays("its ZIP64 end record is not one")
            directory_size, directory = fields[-2:]
            end = record
    if directory + directory_size != end:
        raise UnsafeArrays("it holds bytes between its directory and its end record")
    return directory


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, keep: bool = True):
    # Reading stops at the declared size (checked above), whatever the compressed stream says.
    with archive.open(info) as stream:
        version = npy_format.read_magic(stream)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise UnsafeArrays(f"member {info.filename} has .npy version {version}")
        reader = {
            (1, 0): npy_format.read_array_header_1_0,
            (2, 0): npy_format.read_array_header_2_0,
        }.get(version, npy_format.read_array_header_2_0)
        shape, fortran, dtype = reader(stream, max_header_size=MAX_HEADER_BYTES)
        if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype:
            raise UnsafeArrays(f"member {info.filename} has dtype {dtype}, not a numeric one")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise UnsafeArrays(f"member {info.filename} has shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        header = stream.tell()
        if header + nbytes != info.file_size:
            raise UnsafeArrays(
                f"member {info.filename} declares {info.file_size} bytes, but its header "
                f"says {header + nbytes}"
            )
        if keep:
            data = stream.read(nbytes)
            read = len(data)
        else:
            read = 0
            while chunk := stream.read(min(nbytes - read, 1 << 20)):
                read += len(chunk)
        # One read past the end: zipfile compares the checksum once a member is used up.
        stream.read(1)
    if read != nbytes:
        raise UnsafeArrays(f"member {info.filename} is truncated")
    if not keep:
        return None
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array.copy()
