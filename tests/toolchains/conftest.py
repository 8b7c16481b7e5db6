"""Toolchains for the tests: one real release from PyPI, created once per session."""

from __future__ import annotations

import pytest

from planner.tvm import toolchain

#: The one extra release the suite installs (about 100 MB from PyPI, once per session).
RELEASE = "apache-tvm==0.26.0"


@pytest.fixture(scope="session")
def toolchain_root(tmp_path_factory):
    return tmp_path_factory.mktemp("toolchains")


@pytest.fixture(scope="session")
def release_0_26(toolchain_root):
    """(toolchain, progress lines) of apache-tvm 0.26.0, created for real."""
    lines: list[str] = []
    made = toolchain.ensure(RELEASE, toolchain_root, lines.append)
    return made, lines


@pytest.fixture
def fake_tvm_source(tmp_path):
    """A TVM "source folder" whose package lacks everything the wing needs, as a fork that
    dropped the Relax VM would: a release that cannot work, without a download."""
    package = tmp_path / "old-tvm" / "python" / "tvm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.24.0"\n')
    return tmp_path / "old-tvm"


# A real Celery worker and its broker, as tests/workers starts them.
from tests.workers.conftest import broker, start_worker  # noqa: E402,F401
