"""A file a sandboxed child hands back is taken only as what its name says it is.

The finding: a file that is both an ELF shared object and a valid ``fixed.npz`` (a zip is
read from its end, so a library with an archive appended is one to zipfile, which the
arrays are read with) was copied into the compile's folder; only the module check's
allowlist kept it from being loaded.
"""

from __future__ import annotations

import ctypes
import io
import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from planner.report import parse_report
from tests.workers.test_child_output_trust import honest
from workers import trust

LIBRARY_SOURCE = "int evil(void) { return 42; }\n"


def shared_object(folder: Path) -> bytes:
    """A real ELF shared object, built by gcc, exporting ``evil()``."""
    source = folder / "evil.c"
    source.write_text(LIBRARY_SOURCE)
    library = folder / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library.read_bytes()


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def library_and_archive(folder: Path, **arrays: np.ndarray) -> bytes:
    """A file that is both: gcc's library, then an archive ``np.savez`` wrote."""
    return shared_object(folder) + npz_bytes(**arrays)


@pytest.fixture
def handed(tmp_path) -> Path:
    """The import's folder, with a module and plans that are what they say."""
    folder = tmp_path / "import" / "network"
    folder.mkdir(parents=True)
    (folder / "module.json").write_text(json.dumps({"root": 1, "nodes": []}))
    (folder / "plans.json").write_text("{}")
    return folder


def test_a_library_with_an_archive_appended_is_not_handed_over(tmp_path, handed):
    polyglot = handed / "fixed.npz"
    polyglot.write_bytes(library_and_archive(tmp_path, x=np.zeros(4, "float32")))
    # Given a file that really is both: a loader maps it, and zipfile (which the arrays
    # were read with) lists the archive in it.
    assert ctypes.CDLL(str(polyglot)).evil() == 42
    assert zipfile.ZipFile(polyglot).namelist() == ["x.npy"]
    received = tmp_path / "compile" / "network"

    with pytest.raises(trust.HandoverError) as refused:
        trust.copy_plain_files(
            handed, received, ["module.json", "fixed.npz", "plans.json"], 1 << 20
        )

    assert str(refused.value) == (
        "fixed.npz: it is not an .npz archive of numeric arrays: it does not begin with a "
        "zip member: its first bytes are b'\\x7fELF', an ELF file's"
    )
    assert not (received / "fixed.npz").exists()


def test_archives_and_json_that_are_what_they_say_are_handed_over(tmp_path, handed):
    arrays = {"x": np.arange(6, dtype="float32").reshape(2, 3), "mask": np.ones(3, "bool")}
    np.savez(handed / "fixed.npz", **arrays)
    np.savez_compressed(handed / "reference.npz", **{f"{'a' * 32}.0": np.zeros(2, "int64")})
    received = tmp_path / "compile" / "network"
    names = ["module.json", "fixed.npz", "plans.json", "reference.npz"]

    trust.copy_plain_files(handed, received, names, 1 << 20)

    for name in names:
        assert (received / name).read_bytes() == (handed / name).read_bytes()
    assert np.load(received / "fixed.npz")["mask"].all()


def _pickled() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=True, x=np.array([{"a": 1}], dtype=object))
    return buffer.getvalue()


def _forged_first_member() -> bytes:
    # A zip's signature at offset 0, and the archive's real first member further on, with
    # offsets that count from the start of the file (as ``zip -A`` makes them).
    buffer = io.BytesIO(b"PK\x03\x04" + b"#!/bin/sh\nid\n")
    buffer.seek(0, io.SEEK_END)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("x.npy", npz_member(np.zeros(2)))
    return buffer.getvalue()


def npz_member(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize(("name", "content", "reason"), [
    ("fixed.npz", _pickled(), "member x.npy has dtype object, not a numeric one"),
    ("fixed.npz", _forged_first_member(), "it holds 17 bytes before member x.npy"),
    ("reference.npz", npz_bytes(x=np.zeros(2)) + b"\x7fELF",
     "it does not end with a zip archive's end record"),
    ("fixed.npz", b"\x7fELF" + bytes(60), "it is not a readable archive"),
    ("module.json", b"\x7fELF\x02\x01\x01" + bytes(60), "it is not JSON"),
    ("plans.json", b"[" * 100 + b"]" * 100, "it nests arrays and objects deeper than 64"),
], ids=["pickled", "bytes-before-its-first-member", "bytes-after-its-end",
        "not-an-archive", "not-json", "too-deep"])
def test_a_file_that_is_not_what_its_name_says_is_refused_by_name(
    tmp_path, handed, name, content, reason
):
    (handed / name).write_bytes(content)

    with pytest.raises(trust.HandoverError, match=f"^{name}: .*{reason}"):
        trust.copy_plain_files(handed, tmp_path / "received", [name], 1 << 20)
    assert not (tmp_path / "received" / name).exists()


def test_the_compiles_artifacts_are_taken_only_as_what_they_say(tmp_path):
    out = tmp_path / "out"
    folder = out / "m" / "greedy-by-size"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_bytes(shared_object(tmp_path))
    (folder / "module.py").write_text("# a module")
    (out / "m" / "inputs.npz").write_bytes(library_and_archive(tmp_path, arr_0=np.zeros(2)))
    report = parse_report(honest())

    trust.collect_artifacts(report, out, model="m", limit=1 << 20)

    assert report.artifacts == {"module.py": str(folder / "module.py")}
    assert report.inputs_file == ""
    warnings = "\n".join(report.warnings)
    assert "artifact plan.json skipped: it is not JSON" in warnings
    assert "inputs.npz skipped: it is not an .npz archive of numeric arrays: it does not " \
        "begin with a zip member" in warnings
