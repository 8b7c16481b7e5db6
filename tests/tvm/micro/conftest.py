"""Micro board tests build with arm-none-eabi-gcc and run on qemu-system-arm: skip without."""

from __future__ import annotations

import pytest

from planner.tvm.micro.build import micro_toolchain_missing


@pytest.fixture(scope="session")
def toolchain():
    missing = micro_toolchain_missing()
    if missing:
        pytest.skip(f"micro toolchain missing: {missing}")
