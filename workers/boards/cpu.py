"""The local CPU board: LLVM code for the worker's own host."""

from __future__ import annotations

from workers.boards.base import BoardRunner


class CpuBoard(BoardRunner):
    kind = "cpu"
    default_target = "llvm"

    def describe(self) -> dict:
        from planner.tvm.host import llvm_host

        info = super().describe()
        # What "llvm" means on this host: results from two CPUs are not comparable.
        info["cpu"] = info["versions"].get("processor", "")
        info.update(llvm_host())
        return info
