from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from workers.boards.config import BoardConfig


class UnknownBoard(LookupError):
    pass


@dataclass(frozen=True)
class Health:
    """Whether the board can run models now, and if not, why (shown on the boards page)."""

    online: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"status": "online" if self.online else "offline", "reason": self.reason}


class BoardRunner:
    """Compiles and measures models for one board; subclasses say how."""

    kind = "cpu"
    default_target = "llvm"

    def __init__(self, config: BoardConfig | None = None):
        self.config = config or BoardConfig(name=self.kind, kind=self.kind)
        self.name = self.config.name

    @property
    def target(self) -> str:
        """The target string compiled for; part of the compile-cache key."""
        return self.config.target_string or self.default_target

    @property
    def memory_capacity(self) -> int | None:
        return self.config.memory_capacity

    def health(self) -> Health:
        return Health(online=True)

    def describe(self) -> dict:
        """What the dashboard shows about this board's worker."""
        import celery

        from planner.compile import environment

        return {
            "kind": self.kind,
            "target": self.target,
            "host": platform.node(),
            "versions": {**environment(), "celery": celery.__version__},
        }

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
        raise NotImplementedError

    def compile(
        self, *, model_name: str, source: str, params: dict, strategies: list[str],
        artifacts_dir: Path, **options,
    ) -> list[dict]:
        """``planner.compile.compile_model`` for this board's target; ``options`` say what
        this board can check and measure on the worker's host."""
        from planner.compile import compile_model
        from planner.zoo import ModelSource

        reports = compile_model(
            ModelSource(source, params), strategies, model_name=model_name,
            target=self.target, artifacts_dir=artifacts_dir, **options,
        )
        return [report.to_json() for report in reports]
