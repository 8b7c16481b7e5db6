from __future__ import annotations

from pathlib import Path


class UnknownBoard(LookupError):
    pass


class BoardRunner:
    """Compiles and measures models for one board; subclasses say how."""

    name = ""
    target = "llvm"

    def describe(self) -> dict:
        """What the dashboard shows about this board's worker."""
        return {}

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
