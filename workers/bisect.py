"""Find the first commit that changed a model's planned bytes, compiling as little as possible.

Planned bytes need only a compile (no timing, no memory measurement), and they are
deterministic, so a binary search over ``git rev-list GOOD..BAD`` finds the first commit
whose value differs from GOOD's, as ``git bisect`` would: it assumes the change, once made,
stays. Each probe reads the manifest at that commit; commits whose model content is the
same as one already compiled (or one in the compile cache) cost nothing.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dashboard import gitrepo
from planner.shapes import label as shape_label
from workers import compile_cache, manifest

log = logging.getLogger(__name__)


@dataclass
class Probe:
    sha: str
    planned_bytes: int | None
    how: str  # "compiled", "same content", "cache", "missing"
    detail: str = ""


@dataclass
class Bisection:
    model: str
    strategy: str
    good: str
    bad: str
    commits: int
    first_changed: str | None = None
    before: int | None = None
    after: int | None = None
    probes: list[Probe] = field(default_factory=list)

    @property
    def compiles(self) -> int:
        return sum(p.how == "compiled" for p in self.probes)


def first_change(count: int, differs: Callable[[int], bool]) -> int | None:
    """The smallest ``i`` in ``1..count-1`` with ``differs(i)``, by binary search.

    Index 0 is GOOD and ``count - 1`` is BAD; None when BAD does not differ at all.
    """
    if count < 2 or not differs(count - 1):
        return None
    low, high = 0, count - 1  # differs(low) is False, differs(high) is True
    while high - low > 1:
        middle = (low + high) // 2
        if differs(middle):
            high = middle
        else:
            low = middle
    return high


def compile_planned_bytes(
    entry: manifest.ModelEntry, strategy: str, target: str, *, mirror: Path, sha: str,
    suite: manifest.Suite, point: dict[str, int] | None = None,
) -> int | None:
    """Compile only, in the sandbox, with the commit's tree (the repository's code runs);
    at shape ``point`` for a model with a shape axis."""
    from django.conf import settings

    from workers import sandbox
    from workers.boards.base import BoardRunner
    from workers.boards.config import BoardConfig
    from workers.sandboxed_compile import CompileJob

    # The worker's own sandbox settings: its limits, its user, whether reduced is allowed.
    runner = BoardRunner(
        BoardConfig(name="bisect", kind="cpu", target=target),
        limits=sandbox.Limits.from_settings(settings.PEAKWATCH.get("SANDBOX")),
    )
    with tempfile.TemporaryDirectory(prefix="peakwatch-bisect-") as scratch:
        tree = None
        if suite.reads_repository:
            tree = gitrepo.checkout(mirror, sha, Path(scratch) / "tree")
        artifacts = Path(scratch) / "out"
        artifacts.mkdir()
        [report] = runner.compile(CompileJob(
            model_name=entry.name, source=entry.source, params=entry.params, moe=entry.moe,
            strategies=[strategy], artifacts_dir=artifacts, repeat=0, tree=tree,
            pipeline=suite.pipeline, memory_configs=(),
            shapes=entry.shapes.at([point]).to_json() if point else None,
        ))
    if report.error:
        raise RuntimeError(report.error)
    return report.planned_bytes


def bisect(
    mirror: Path,
    model: str,
    good: str,
    bad: str,
    *,
    strategy: str = "greedy-by-size",
    target: str = "llvm",
    cached: Callable[[str], int | None] = lambda key: None,
    compile: Callable[..., int | None] = compile_planned_bytes,
    check: Callable[[list[str]], None] = lambda shas: None,
    repository: int,
    point: str = "",
) -> Bisection:
    """``point`` (a label, ``h=256,w=256``) is the shape point to follow in a model with a
    shape axis; ValueError when such a model is bisected without one of its points.

    ``check`` sees every commit the search may compile before any is: it raises to
    refuse the bisection (the command refuses code from outside that no one approved).
    ``repository`` is the tracked repository's id: cached figures are its own only."""
    good_sha, bad_sha = gitrepo.resolve(mirror, good), gitrepo.resolve(mirror, bad)
    shas = [good_sha, *gitrepo.rev_list(mirror, good_sha, bad_sha)]
    check(shas)
    outcome = Bisection(model, strategy, good_sha, bad_sha, commits=len(shas) - 1)
    by_content: dict[str, int | None] = {}
    values: dict[int, int | None] = {}
    version = compile_cache.tvm_version()

    def value(index: int) -> int | None:
        if index in values:
            return values[index]
        sha = shas[index]
        try:
            text = gitrepo.read_file(mirror, sha, manifest.MANIFEST_PATH)
            suite = manifest.parse(text)
            entry = next(m for m in suite.models if m.name == model)
        except (gitrepo.GitError, manifest.ManifestError, StopIteration) as exc:
            detail = str(exc) or f"{model} is not in the manifest"
            outcome.probes.append(Probe(sha, None, "missing", detail))
            values[index] = None
            return None
        chosen = _point(entry, point)
        content = compile_cache.model_content_hash(entry, suite, mirror, sha)
        if content is not None and content in by_content:
            planned, how = by_content[content], "same content"
        else:
            key = compile_cache.cache_key(
                content, strategy, version, target, repository=repository,
                shape=shape_label(chosen) if chosen else "",
            ) if content else ""
            planned = cached(key) if key else None
            how = "cache"
            if planned is None:
                planned = compile(
                    entry, strategy, target, mirror=mirror, sha=sha, suite=suite, point=chosen
                )
                how = "compiled"
            if content is not None:
                by_content[content] = planned
        outcome.probes.append(Probe(sha, planned, how))
        values[index] = planned
        return planned

    reference = value(0)
    index = first_change(len(shas), lambda i: value(i) != reference)
    if index is not None:
        outcome.first_changed = shas[index]
        outcome.before, outcome.after = values[index - 1], values[index]
    return outcome


def _point(entry: manifest.ModelEntry, wanted: str) -> dict[str, int] | None:
    """The point of ``entry``'s shape axis labelled ``wanted``; None for a model without one."""
    if entry.shapes is None:
        if wanted:
            raise ValueError(f"{entry.name} has no shape axis, so no point {wanted!r}")
        return None
    labels = {shape_label(p): p for p in entry.shapes.points}
    if wanted not in labels:
        raise ValueError(
            f"{entry.name} is measured at several shapes: name one with --point "
            f"({', '.join(labels)})"
        )
    return labels[wanted]
