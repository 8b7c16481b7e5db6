"""The compile cache: a model whose content did not change is not compiled again.

A compile is identified by the content of the model (for ``zoo:`` sources the source and its
parameters, for file sources git's hash of the file at the commit), the strategy, the TVM
version, the target, and the planner code that builds and plans it. Two Results with the
same key on the same board would measure the same thing, so the later one copies the
earlier one's figures and artifacts (``Result.reused_from``).

Limits: a Python factory that imports other files of the tracked repository is hashed by its
own file only.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from workers import gitrepo
from workers.manifest import ModelEntry

PLANNER_DIR = Path(__file__).resolve().parent.parent / "planner"


@functools.cache
def planner_fingerprint() -> str:
    """A hash of the planner's own code: a new zoo or planner version invalidates the cache."""
    digest = hashlib.sha256()
    for path in sorted(PLANNER_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PLANNER_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def model_content_hash(entry: ModelEntry, repo: Path | None = None, sha: str = "") -> str | None:
    """What the model is made of, as a hash; None when it cannot be known (no caching)."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"source": entry.source, "params": entry.params},
                             sort_keys=True, default=str).encode())
    if entry.source.startswith("zoo:"):
        return digest.hexdigest()
    path = entry.source
    file_part, sep, factory = path.rpartition(":")
    if sep and file_part.endswith(".py") and factory.isidentifier():
        path = file_part
    blob = gitrepo.blob_id(repo, sha, path) if repo is not None and sha else None
    if blob is not None:
        digest.update(blob.encode())
        return digest.hexdigest()
    local = Path(path).expanduser()
    if local.is_file():
        digest.update(hashlib.sha256(local.read_bytes()).hexdigest().encode())
        return digest.hexdigest()
    return None


def cache_key(content_hash: str, strategy: str, tvm_version: str, target: str) -> str:
    text = json.dumps(
        [content_hash, strategy, tvm_version, target, planner_fingerprint()], sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()


def tvm_version() -> str:
    import tvm

    return tvm.__version__
