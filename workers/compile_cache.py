"""The compile cache: a model whose inputs did not change is not compiled again.

A compile is identified by what it reads and how it is built: the repository it belongs to,
the manifest's entry for the model (source, parameters and shape axis), the shape point,
the pipeline, the repository's
content that the compile can read (the whole tree but the manifest; nothing for a suite of
zoo models), the strategy, the TVM version and toolchain (spec, version and git hash: two
builds of one release differ), the target, and the planner code that builds and plans it.
Two Results with the same key on the same board would measure the same thing, so the later
one copies the earlier one's figures and artifacts (``Result.reused_from``).

The repository is part of the key, and the lookup (``Result.objects.cached``) is limited to
it too: figures are only ever copied within one repository, so one repository's results can
never stand for another's, however alike their files. The content is the whole tree because
the sandbox hands the compile the whole tree: a model file may import any module or read any
file in it, so ``[suite] inputs`` (what a repository says its models read) cannot narrow it.
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
    read = {"source": entry.source, "params": entry.params, "pipeline": pipeline}
    if entry.shapes is not None:
        # The axis's bounds decide what TVM reserves at the bound, a figure of every point.
        read["shapes"] = entry.shapes.to_json()
    digest.update(json.dumps(read, sort_keys=True, default=str).encode())
    reads_repository = not entry.is_zoo or (suite is not None and suite.reads_repository)
    if not reads_repository:
        return digest.hexdigest()
    if repo is None or not sha:
        return None
    try:
        # Everything but the manifest: the model's own entry in it is hashed above, and
        # another model's new parameters must not compile this one again.
        tree = [name for name in gitrepo.top_level(repo, sha) if name != MANIFEST_PATH]
        digest.update(gitrepo.content_id(repo, sha, tree or ["-"]).encode())
    except gitrepo.GitError:
        return None
    return digest.hexdigest()


def cache_key(
    content_hash: str, strategy: str, tvm_version: str, target: str, toolchain: str = "", *,
    repository: int, shape: str = "",
) -> str:
    """``toolchain`` is a toolchain's identity (``Toolchain.identity``); empty for the
    worker's own environment. ``repository`` is the tracked repository's id. ``shape`` is
    the shape point's label, empty for a model without a shape axis."""
    parts = [content_hash, strategy, tvm_version, target, planner_fingerprint(),
             f"repository:{repository}"]
    if toolchain:
        parts.append(toolchain)
    if shape:
        # Appended only for a point, so keys of models without an axis stay as they were.
        parts.append(f"shape:{shape}")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def tvm_version() -> str:
    from planner.tvm.host import tvm_version as version

    return version()
