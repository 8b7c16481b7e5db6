"""Creating a toolchain: a real apache-tvm release from PyPI in its own environment."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from planner.tvm import toolchain
from planner.tvm.toolchain import ToolchainError
from tests.toolchains.conftest import RELEASE

pytestmark = pytest.mark.slow


def test_it_installs_the_release_and_records_its_version_and_git_hash(release_0_26):
    made, lines = release_0_26

    assert made.spec == RELEASE
    assert made.tvm_version == "0.26.0"
    assert re.fullmatch(r"[0-9a-f]{7,40}", made.tvm_git_hash), made.tvm_git_hash
    seen = subprocess.run(
        [made.python, "-c", "import tvm, json; print(json.dumps([tvm.__version__, tvm.__file__]))"],
        capture_output=True, text=True, check=True,
    )
    version, where = json.loads(seen.stdout)
    # The toolchain's own TVM, not the one of the environment that created it.
    assert version == "0.26.0" and where.startswith(made.folders[0])


def test_it_says_how_creation_goes(release_0_26):
    _, lines = release_0_26

    text = "\n".join(lines)
    assert f"toolchain {RELEASE}: creating a virtual environment" in text
    assert f"toolchain {RELEASE}: installing {RELEASE}" in text
    assert re.search(r"ready in \d+ s, TVM 0\.26\.0 \(git [0-9a-f]+\)", text), text


def test_it_installs_only_tvm_and_borrows_torch_and_numpy(release_0_26):
    made, _ = release_0_26

    installed = subprocess.run(
        [made.python, "-c",
         "import sys, importlib.metadata as m; "
         "print('\\n'.join(sorted(d.metadata['Name'].lower() for d in "
         "m.distributions(path=[p for p in sys.path if p.startswith(sys.prefix)]))))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    # torch, numpy and onnx come from the creating environment: nothing large downloaded.
    assert installed == ["apache-tvm"]
    borrowed = subprocess.run(
        [made.python, "-c", "import numpy, torch; print(torch.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert not borrowed.startswith(made.folders[0])


def test_a_second_use_reuses_the_environment_without_a_word(release_0_26, toolchain_root):
    made, _ = release_0_26
    lines: list[str] = []

    again = toolchain.ensure(RELEASE, toolchain_root, lines.append)

    assert again == made
    assert lines == []


def test_it_refuses_a_tvm_that_lacks_what_the_wing_needs_and_names_it(
    fake_tvm_source, tmp_path
):
    lines: list[str] = []

    with pytest.raises(ToolchainError) as refused:
        toolchain.ensure(str(fake_tvm_source), tmp_path / "toolchains", lines.append)

    message = str(refused.value)
    assert "(TVM 0.24.0) cannot run Peakwatch's TVM wing; it lacks:" in message
    assert "tvm.relax.VirtualMachine (the Relax VM that runs and times every build)" in message
    assert "tvm.relax.transform.StaticPlanBlockMemory (TVM's own planner (tvm-stock))" in message
    # Remembered: the next run is told at once, without probing again.
    lines.clear()
    with pytest.raises(ToolchainError, match="cannot run Peakwatch's TVM wing"):
        toolchain.ensure(str(fake_tvm_source), tmp_path / "toolchains", lines.append)
    assert lines == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tvm", "expected apache-tvm==VERSION"),
        ("apache-tvm>=0.26", "expected apache-tvm==VERSION"),
        ("numpy==2.0", "expected apache-tvm==VERSION"),
        ("/wheels/numpy-2.0-py3-none-any.whl", "must be an apache-tvm wheel"),
    ],
)
def test_it_rejects_a_spec_that_names_no_tvm(spec, message, tmp_path):
    with pytest.raises(ToolchainError, match=re.escape(message)):
        toolchain.ensure(spec, tmp_path)


def test_a_worker_accepts_local_wheels_and_folders_only_from_its_allowed_paths(
    fake_tvm_source, tmp_path
):
    with pytest.raises(ToolchainError, match="must lie in the worker's PEAKWATCH_TOOLCHAIN_PATHS"):
        toolchain.ensure(str(fake_tvm_source), tmp_path / "t", allowed_paths=[tmp_path / "x"])
    with pytest.raises(ToolchainError, match="not a TVM source folder"):
        toolchain.ensure(str(tmp_path), tmp_path / "t", allowed_paths=[tmp_path])


def test_an_unknown_release_fails_with_pips_reason(tmp_path):
    with pytest.raises(ToolchainError) as failed:
        toolchain.ensure("apache-tvm==0.0.1", tmp_path)

    assert "pip failed" in str(failed.value)
    assert "apache-tvm==0.0.1" in str(failed.value)
