"""The local CPU board: LLVM code for the worker's own host."""

from __future__ import annotations

import platform
from pathlib import Path

from workers.boards.base import BoardRunner


class CpuBoard(BoardRunner):
    name = "cpu"
    target = "llvm"

    def describe(self) -> dict:
        from planner.compile import environment

        return {"target": self.target, "host": platform.node(), **environment()}

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
        from planner.compile import compile_model
        from planner.zoo import ModelSource

        reports = compile_model(
            ModelSource(source, params),
            strategies,
            model_name=model_name,
            target=self.target,
            repeat=repeat,
            artifacts_dir=artifacts_dir,
        )
        return [report.to_json() for report in reports]
