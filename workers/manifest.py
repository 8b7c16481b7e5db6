"""The suite manifest a tracked repository commits: ``peakwatch.toml``.

    [suite]
    strategies = ["tvm-stock", "none", "greedy-by-size"]
    boards = ["cpu"]

    [[models]]
    name = "small-cnn"
    source = "zoo:small_cnn"
    params = { channels = 16, resolution = 32 }
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

MANIFEST_PATH = "peakwatch.toml"
DEFAULT_STRATEGIES = ("tvm-stock", "none", "greedy-by-size")
DEFAULT_BOARDS = ("cpu",)


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class ModelEntry:
    name: str
    source: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    models: tuple[ModelEntry, ...]
    strategies: tuple[str, ...]
    boards: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.models) * len(self.strategies) * len(self.boards)


def parse(text: str, known_strategies: list[str] | None = None) -> Suite:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{MANIFEST_PATH} is not valid TOML: {exc}") from None
    suite = data.get("suite", {})
    if not isinstance(suite, dict):
        raise ManifestError("[suite] must be a table")
    strategies = tuple(suite.get("strategies", DEFAULT_STRATEGIES))
    boards = tuple(suite.get("boards", DEFAULT_BOARDS))
    for label, values in (("strategies", strategies), ("boards", boards)):
        if not values or not all(isinstance(v, str) and v for v in values):
            raise ManifestError(f"suite.{label} must be a non-empty list of names")
    if known_strategies is not None:
        unknown = [s for s in strategies if s not in known_strategies]
        if unknown:
            raise ManifestError(
                f"unknown strategy {', '.join(unknown)}; known: {', '.join(known_strategies)}"
            )
    raw_models = data.get("models")
    if not isinstance(raw_models, list) or not raw_models:
        raise ManifestError("the manifest must list at least one [[models]] entry")
    models, names = [], set()
    for index, raw in enumerate(raw_models, start=1):
        if not isinstance(raw, dict):
            raise ManifestError(f"models entry {index} must be a table")
        name, source = raw.get("name"), raw.get("source")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"models entry {index} needs a name")
        if not isinstance(source, str) or not source:
            raise ManifestError(f"model {name!r} needs a source such as zoo:small_cnn")
        if name in names:
            raise ManifestError(f"model {name!r} is listed twice")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            raise ManifestError(f"model {name!r}: params must be a table")
        names.add(name)
        models.append(ModelEntry(name, source, dict(params)))
    return Suite(tuple(models), strategies, boards)
