"""Arrays a sandboxed child wrote are checked before numpy reads a byte of them."""

from __future__ import annotations

import struct
import warnings
import zipfile
from io import BytesIO

import numpy as np
import pytest
from numpy.lib import format as npy_format

from planner.npz_files import UnsafeArrays, load_arrays, positional


def _zip(path, members: dict[str, bytes], compression=zipfile.ZIP_STORED):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicated name
        with zipfile.ZipFile(path, "w", compression) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def _npy(array: np.ndarray) -> bytes:
    buffer = BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _header(shape) -> bytes:
    buffer = BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def test_it_reads_what_numpy_savez_wrote(tmp_path):
    path = tmp_path / "inputs.npz"
    data = np.arange(12, dtype="float32").reshape(3, 4)
    np.savez(path, data, np.array([True, False]), np.asfortranarray(np.ones((2, 3), "int8")))

    arrays = positional(load_arrays(path))

    assert [a.dtype.name for a in arrays] == ["float32", "bool", "int8"]
    np.testing.assert_array_equal(arrays[0], data)
    assert arrays[2].shape == (2, 3) and arrays[0].flags.writeable


def test_it_reads_a_compressed_archive_by_name(tmp_path):
    path = tmp_path / "fixed.npz"
    np.savez_compressed(path, x=np.zeros((4, 4), "float16"), mask=np.ones(3, "uint8"))

    assert {k: v.shape for k, v in load_arrays(path).items()} == {"x": (4, 4), "mask": (3,)}


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ([("arr_0.npy", _npy(np.array([{"a": 1}], dtype=object)))], "not a numeric one"),
        ([("arr_0.npy", _npy(np.zeros(2, dtype=[("a", "i4")])))], "not a numeric one"),
        ([("arr_0.npy", _npy(np.array(["text"])))], "not a numeric one"),
        ([("../../etc/arr_0.npy", _npy(np.zeros(2)))], "not an array's name"),
        ([("arr_0.npy", _npy(np.zeros(2))), ("arr_0.npy", _npy(np.ones(2)))], "two members"),
        ([(f"arr_{i}.npy", _npy(np.zeros(1))) for i in range(5000)], "more than 4096"),
        # The header promises a million floats; the member holds two.
        ([("arr_0.npy", _header(shape=(1_000_000,)) + bytes(16))], "its header says"),
        ([("arr_0.npy", b"not an npy file at all")], "not a readable array archive"),
    ],
    ids=["pickled-object", "structured", "text", "climbing-name", "duplicate", "too-many",
         "header-lies", "not-npy"],
)
def test_it_refuses_an_archive_that_is_not_plain_numeric_arrays(tmp_path, members, reason):
    path = _zip(tmp_path / "inputs.npz", members)

    with pytest.raises(UnsafeArrays, match=reason) as refused:
        load_arrays(path)

    assert "inputs.npz" in str(refused.value)


def test_it_refuses_a_member_declaring_more_than_the_limit_before_inflating_it(tmp_path):
    # Two megabytes of zeros deflate to a few kilobytes: a small file, a large allocation.
    path = _zip(tmp_path / "inputs.npz", [("arr_0.npy", _npy(np.zeros(1 << 18)))],
                zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 64 << 10

    with pytest.raises(UnsafeArrays, match="declare more than 1048576 bytes"):
        load_arrays(path, max_bytes=1 << 20)


def test_a_member_whose_declared_size_lies_is_refused(tmp_path):
    path = _zip(tmp_path / "inputs.npz", [("arr_0.npy", _npy(np.zeros(64)))])
    raw = bytearray(path.read_bytes())
    # The central directory's uncompressed size (offset 24 of its entry) says 1 byte more.
    entry = raw.rindex(b"PK\x01\x02")
    size = struct.unpack_from("<I", raw, entry + 24)[0]
    struct.pack_into("<I", raw, entry + 24, size + 1)
    path.write_bytes(bytes(raw))

    with pytest.raises(UnsafeArrays):
        load_arrays(path)


def test_positional_arrays_must_be_named_as_savez_names_them(tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, arr_0=np.zeros(1), arr_7=np.zeros(1))

    with pytest.raises(UnsafeArrays, match="not named arr_0..arr_1"):
        positional(load_arrays(path))


def test_a_file_that_is_not_an_archive_is_refused(tmp_path):
    path = tmp_path / "inputs.npz"
    path.write_bytes(b"\x00" * 100)

    with pytest.raises(UnsafeArrays, match="not a readable array archive"):
        load_arrays(path)


def test_an_archive_appended_to_another_file_is_refused(tmp_path):
    # zipfile reads a zip from its end: whatever comes first (here an ELF header, as in a
    # shared library) it skips, and it listed the arrays.
    path = tmp_path / "fixed.npz"
    archive = _zip(tmp_path / "plain.npz", [("x.npy", _npy(np.zeros(2)))]).read_bytes()
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57) + archive)
    assert zipfile.ZipFile(path).namelist() == ["x.npy"]

    with pytest.raises(UnsafeArrays, match="first bytes are b'\\\\x7fELF', an ELF file's"):
        load_arrays(path)


def test_bytes_after_the_archive_are_refused(tmp_path):
    path = _zip(tmp_path / "fixed.npz", [("x.npy", _npy(np.zeros(2)))])
    path.write_bytes(path.read_bytes() + b"\x00" * 8)

    with pytest.raises(UnsafeArrays, match="does not end with a zip archive's end record"):
        load_arrays(path)


def test_it_reads_an_archive_with_a_zip64_end_record(tmp_path, monkeypatch):
    # np.savez writes one once the directory lies beyond 4 GiB: lowered here to be one.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 100)
    path = tmp_path / "reference.npz"
    np.savez(path, a=np.zeros(30), b=np.ones(40, "int8"))
    monkeypatch.undo()
    assert b"PK\x06\x06" in path.read_bytes()

    assert {k: v.shape for k, v in load_arrays(path).items()} == {"a": (30,), "b": (40,)}
