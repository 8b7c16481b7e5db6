"""The target a compile builds for, made from a board's words."""

from __future__ import annotations

import tvm


def make_target(target: str = "llvm") -> tvm.target.Target:
    made = tvm.target.Target(target)
    if made.kind.name == "cuda":
        from planner.tvm.build import cuda

        # TVM fills in a missing architecture from device 0 (or sm_50 without one): the
        # same job would then build other kernels on another host. It must be named.
        cuda.named_arch(target)
    return made
