"""The compile cache: a model whose inputs did not change is not compiled again.

A compile is identified by what it reads and how it is built: the manifest's entry for the
model (source and parameters), the pipeline, the repository's content that the suite reads
(the whole tree but the manifest by default, only ``[suite] inputs`` when listed; nothing
for a suite of zoo models), the strategy, the TVM version and toolchain (spec, version and
git hash: two builds of one release differ), the target, and the planner code that builds
and plans it. Two Results with the same key on the same board would measure the same thing,
so the later one copies the earlier one's figures and artifacts (``Result.reused_from``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from dashboard import gitrepo
from workers.manifest import MANIFEST_PATH, ModelEntry, Suite

PLANNER_DIR = Path(__file__).resolve().parent.parent / "planner"


@functools.cache
def planner_fingerprint() -> str:
    """A hash of the planner's own code: a new zoo or planner version invalidates the cache."""
    digest = hashlib.sha256()
    for path in sorted(PLANNER_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PLANNER_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def model_content_hash(
    entry: ModelEntry, suite: Suite | None = None, repo: Path | None = None, sha: str = ""
) -> str | None:
    """What the model's compile reads, as a hash; None when it cannot be known (no caching)."""
    digest = hashlib.sha256()
    pipeline = suite.pipeline if suite else ""
    digest.update(json.dumps({"source": entry.source, "params": entry.params,
                              "pipeline": pipeline}, sort_keys=True, default=str).encode())
    reads_repository = not entry.is_zoo or (suite is not None and suite.reads_repository)
    if not reads_repository:
        return digest.hexdigest()
    if repo is None or not sha:
        return None
    inputs = list(suite.inputs) if suite else []
    if inputs and entry.path is not None and not any(
        entry.path == p.rstrip("/") or entry.path.startswith(p.rstrip("/") + "/") for p in inputs
    ):
        # The model's own file always counts, listed or not.
        inputs.append(entry.path)
    try:
        if not inputs:
            # Everything but the manifest: the model's own entry in it is hashed above, and
            # another model's new parameters must not compile this one again.
            inputs = [name for name in gitrepo.top_level(repo, sha) if name != MANIFEST_PATH]
        digest.update(gitrepo.content_id(repo, sha, inputs or ["-"]).encode())
    except gitrepo.GitError:
        return None
    return digest.hexdigest()


def cache_key(
    content_hash: str, strategy: str, tvm_version: str, target: str, toolchain: str = ""
) -> str:
    """``toolchain`` is a toolchain's identity (``Toolchain.identity``); empty for the
    worker's own environment, whose keys are those recorded before toolchains existed."""
    parts = [content_hash, strategy, tvm_version, target, planner_fingerprint()]
    if toolchain:
        parts.append(toolchain)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def tvm_version() -> str:
    from planner.tvm.host import tvm_version as version

    return version()
