"""Built-in networks written in code with random weights.

A model source is named ``zoo:NAME`` with keyword parameters, e.g. ``zoo:small_cnn`` with
``{"channels": 16}``; the tracked repository's manifest changes those parameters from commit
to commit, which is what moves its memory up and down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planner.zoo import cnn

ZOO: dict[str, Callable[..., Any]] = {
    "small_cnn": cnn.small_cnn,
    "residual_cnn": cnn.residual_cnn,
}


class ModelSourceError(ValueError):
    """A model source that cannot be built: unknown name, bad parameters."""


@dataclass(frozen=True)
class ModelSource:
    """Where a network comes from, in the words a manifest uses."""

    source: str
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.source}({args})" if args else self.source


def zoo_names() -> list[str]:
    return sorted(ZOO)


def build_network(source: ModelSource):
    """Return a :class:`planner.zoo.cnn.Network` for ``source``."""
    if not source.source.startswith("zoo:"):
        raise ModelSourceError(
            f"unsupported model source {source.source!r}: expected zoo:NAME "
            f"with NAME one of {', '.join(zoo_names())}"
        )
    name = source.source.removeprefix("zoo:")
    try:
        factory = ZOO[name]
    except KeyError:
        raise ModelSourceError(
            f"unknown zoo model {name!r}; known: {', '.join(zoo_names())}"
        ) from None
    try:
        return factory(**source.params)
    except TypeError as exc:
        raise ModelSourceError(f"bad parameters for zoo:{name}: {exc}") from None
