"""The compile cache: a model whose inputs did not change is not compiled again.

A compile is identified by what it reads and how it is built: the repository it belongs to,
the manifest's entry for the model (source, parameters and shape axis), the shape point,
the pipeline, the repository's content that the compile read, the strategy, the TVM version
and toolchain (spec, version and git hash: two builds of one release differ), every
installed package the compile can import and the processor (:func:`environment_fingerprint`),
the target and the board's options, and the planner code that builds and plans it. Two
Results with the same key on the same board would measure the same thing, so the later one
copies the earlier one's figures and artifacts (``Result.reused_from``). Figures are only
ever copied within one repository (``Result.objects.cached`` and ``with_recorded_reads``
are limited to it), so one repository's results never stand for another's, however alike
their files.

The repository's content enters a key in one of two ways:

- **The whole tree** (:func:`model_content_hash`, ``Result.cache_key``): every file but the
  manifest (the model's own entry is hashed instead). The sandbox hands the import the whole
  checkout, so this covers anything it could have read. Any change anywhere compiles every
  model again. Names are read NUL-separated from git, so every name git can store counts,
  unicode, quotes and newlines included.
- **What the compile read** (:func:`reads_content_hash`, ``Result.reads``): the import
  sees the checkout through a view the worker serves (:mod:`workers.sandbox.view`), which
  records every path any process of the job looked up (found or not), opened or listed;
  the key is the hash of exactly those, each as git holds it at the commit (content hash
  and mode, "folder", "missing", or a folder's names), plus everything else above. A change
  to a file the model never looked at leaves it; a change to one it read, a file added
  where it looked or listed, compiles it again.

Why reuse by that record is sound:

1. The record is the worker's, not the job's. The kernel asks the view about every lookup
   of the checkout, whatever makes it (Python, native code, a program the job starts, a
   spawned child), and the view runs outside the sandbox: nothing the job does can leave a
   path out or narrow its own key. Records a job's own process kept (before the view) are
   never used (``Result.reads["observed_by"]``).
2. A Result stores the record *its own* compile made, and the key those paths gave at its
   own commit. A later commit C reuses it only if the same paths give the same key at C:
   every recorded file has the same blob id and mode (or is missing in both), every
   recorded folder the same names, and the manifest entry, pipeline, strategy, TVM,
   toolchain, environment, target and planner match. C's own code never has a say: its
   record is not made yet. Paths and their contents are read from git by the worker.
3. Then reuse is sound for the reason a build system's is: the import is a function of
   what it looked at (the environment is in the key through its packages, TVM, toolchain
   and planner), and at C everything it read, looked for or listed is the same, so it would
   do the same and hand over the same model. A record is still only believed at a commit
   whose history holds the commit that recorded it (``gitrepo.is_ancestor``), and the
   lookup never leaves the repository.
4. Where there is no record (no view on this worker, a view that failed, an import that
   looked at more paths than a record holds) the whole-tree key alone applies, which is
   the key the sandbox's view allows, and the Result says why (``Result.reads["whole_tree"]``).

What a record does not see: files outside the checkout (the environment, keyed by
:func:`environment_fingerprint`, toolchain and planner instead).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from dashboard import gitrepo
from planner.checkout_reads import ROOT, CheckoutReads
from planner.tvm.toolchain import environment_site_packages
from workers.manifest import MANIFEST_PATH, ModelEntry, Suite

PLANNER_DIR = Path(__file__).resolve().parent.parent / "planner"


@functools.cache
def environment_fingerprint(folders: tuple[str, ...] = ()) -> str:
    """What a compile can import from, and the host it measures on, as a hash: every
    installed distribution found in ``folders`` (the worker's own package folders when empty:
    Peakwatch's code is :func:`planner_fingerprint`'s),
    by name, version and its ``RECORD`` (the installed files' own hashes, so two builds of
    one version of TVM, PyTorch or numpy differ), and the processor. Upgrading any package
    on a worker, or moving its queue to another CPU, compiles every model again."""
    found = importlib.metadata.distributions(path=list(folders or _site_packages()))
    lines = set()
    for dist in found:
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        record = dist.read_text("RECORD") or ""
        lines.add(f"{name}=={dist.version} {hashlib.sha256(record.encode()).hexdigest()}")
    lines.add(f"machine {platform.machine()} {_processor()}")
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def toolchain_folders(toolchain_folders: tuple[str, ...]) -> tuple[str, ...]:
    """Where a toolchain's compile imports from: its own environment's package folders,
    then this environment's (``planner.tvm.toolchain``)."""
    own = [
        str(path) for folder in toolchain_folders
        for path in sorted(Path(folder).glob("**/site-packages")) if path.is_dir()
    ]
    return tuple(dict.fromkeys([*own, *_site_packages()]))


def _site_packages() -> list[str]:
    # The folders a toolchain sees after its own TVM: this environment's packages.
    return environment_site_packages()


def _processor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()


@functools.cache
def planner_fingerprint() -> str:
    """A hash of the planner's own code: a new zoo or planner version invalidates the cache."""
    digest = hashlib.sha256()
    for path in sorted(PLANNER_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PLANNER_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _recipe(entry: ModelEntry, suite: Suite | None) -> dict:
    """What the manifest says of the model's compile."""
    pipeline = suite.pipeline if suite else ""
    read = {"source": entry.source, "params": entry.params, "pipeline": pipeline}
    if entry.moe != "dense":  # dense keys stay as they were before forms existed
        read["moe"] = entry.moe
    if entry.shapes is not None:
        # The axis's bounds decide what TVM reserves at the bound, a figure of every point.
        read["shapes"] = entry.shapes.to_json()
    return read


def model_content_hash(
    entry: ModelEntry, suite: Suite | None = None, repo: Path | None = None, sha: str = ""
) -> str | None:
    """What the model's compile can read (the whole tree), as a hash; None when it cannot
    be known (no caching)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(_recipe(entry, suite), sort_keys=True, default=str).encode())
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


def reads_content_hash(
    entry: ModelEntry, suite: Suite | None, reads: CheckoutReads, repo: Path, sha: str
) -> str | None:
    """What the model's compile read of the checkout (``reads``, its import's record), as
    those paths are at ``sha``, as a hash; None when the commit cannot be listed."""
    try:
        entries = gitrepo.tree_entries(repo, sha)
    except gitrepo.GitError:
        return None
    digest = hashlib.sha256()
    # Never equal to a whole-tree hash: the two keys answer different questions.
    digest.update(b"reads-v1\0")
    digest.update(json.dumps(_recipe(entry, suite), sort_keys=True, default=str).encode())
    for path in sorted(set(reads.files)):
        digest.update(_state_line("file", path, _path_state(entries, path)))
    listings = _listings(entries, set(reads.folders))
    for path in sorted(set(reads.folders)):
        state = _path_state(entries, path)
        if state == "folder":
            state = "names " + json.dumps(sorted(listings.get(path, [])))
        digest.update(_state_line("folder", path, state))
    return digest.hexdigest()


def _state_line(kind: str, path: str, state: str) -> bytes:
    # fsencode: a name that is not UTF-8 hashes as the bytes git holds.
    return b"\0".join((kind.encode(), os.fsencode(path), state.encode())) + b"\n"


def _path_state(entries: dict[str, gitrepo.TreeEntry], path: str) -> str:
    """What a process finds at ``path`` of the checkout of that tree."""
    if path == ROOT:
        return "folder"
    parts = path.split("/")
    for end in range(1, len(parts)):
        prefix = "/".join(parts[:end])
        entry = entries.get(prefix)
        if entry is not None and entry.kind == "link":
            # Where it leads was recorded as a path of its own (realpath), if inside.
            return f"through link {prefix} {entry.oid}"
        if entry is None or entry.kind != "folder":
            return "missing"
    entry = entries.get(path)
    if entry is None:
        return "missing"
    if entry.kind == "folder":
        return "folder"
    return f"{entry.kind} {entry.mode} {entry.oid}"


def _listings(entries: dict[str, gitrepo.TreeEntry], folders: set[str]) -> dict[str, list]:
    """The names (and kinds) in each of ``folders``, as listing it shows them."""
    names: dict[str, list] = {}
    for path, entry in entries.items():
        parent, _, name = path.rpartition("/")
        parent = parent or ROOT
        if parent in folders:
            names.setdefault(parent, []).append([name, entry.kind])
    return names


def cache_key(
    content_hash: str, strategy: str, tvm_version: str, target: str, toolchain: str = "", *,
    repository: int, shape: str = "", environment: str = "",
) -> str:
    """``toolchain`` is a toolchain's identity (``Toolchain.identity``); empty for the
    worker's own environment. ``repository`` is the tracked repository's id. ``shape`` is
    the shape point's label, empty for a model without a shape axis. ``environment`` is
    :func:`environment_fingerprint` of what the compile imports from (the worker's own
    environment's when empty)."""
    parts = [content_hash, strategy, tvm_version, target, planner_fingerprint(),
             f"repository:{repository}",
             f"environment:{environment or environment_fingerprint()}"]
    if toolchain:
        parts.append(toolchain)
    if shape:
        # Appended only for a point, so keys of models without an axis stay as they were.
        parts.append(f"shape:{shape}")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def tvm_version() -> str:
    from planner.tvm.host import tvm_version as version

    return version()
