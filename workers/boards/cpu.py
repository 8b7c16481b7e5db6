"""The local CPU board: LLVM code for the worker's own host."""

from __future__ import annotations

from pathlib import Path

from workers.boards.base import BoardRunner


class CpuBoard(BoardRunner):
    kind = "cpu"
    default_target = "llvm"

    def describe(self) -> dict:
        from tvm.target import codegen

        info = super().describe()
        # What "llvm" means on this host: results from two CPUs are not comparable.
        info["cpu"] = info["versions"].get("processor", "")
        info["llvm_cpu"] = str(codegen.llvm_get_system_cpu())
        info["llvm_triple"] = str(codegen.llvm_get_system_triple())
        return info

    def measure(
        self,
        *,
        model_name: str,
        source: str,
        params: dict,
        strategies: list[str],
        artifacts_dir: Path,
        repeat: int,
    ) -> list[dict]:
        return self.compile(
            model_name=model_name, source=source, params=params, strategies=strategies,
            artifacts_dir=artifacts_dir, repeat=repeat,
        )
