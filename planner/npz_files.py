"""Arrays from an ``.npz`` file that untrusted code wrote, checked before a byte is read.

``np.load`` trusts the archive: a member's declared size, its ``.npy`` header and its dtype
decide how much is inflated and allocated, and an object dtype is unpickled when pickles
are allowed. A sandboxed child writes the inputs a model is checked on (``inputs.npz``) and
the inputs a model fixes (``fixed.npz``), and the worker and the measuring child read them,
so every member is checked against the archive's directory and its header first: a plain
name, a known compression, numeric dtypes only, and sizes that agree and stay under a
limit. The data is then read as raw bytes: nothing in the file is ever executed.
"""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path

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
        with zipfile.ZipFile(path) as archive:
            members = _checked_members(archive, max_bytes, max_members)
            return {
                info.filename.removesuffix(".npy"): _read_member(archive, info)
                for info in members
            }
    except UnsafeArrays as exc:
        raise UnsafeArrays(f"{name}: {exc}") from None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        # A CRC mismatch, a truncated member, a header numpy refuses: all say the same.
        raise UnsafeArrays(f"{name} is not a readable array archive: {exc}") from None


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


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
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
        data = stream.read(nbytes)
    if len(data) != nbytes:
        raise UnsafeArrays(f"member {info.filename} is truncated")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array.copy()
