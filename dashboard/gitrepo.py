"""The few git operations Peakwatch needs, on a bare mirror of each tracked repository.

The tracking service records history from the mirror; a worker materialises the tree of the
exact commit it runs (:func:`checkout`) and removes it afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dashboard.redaction import redact


class GitError(RuntimeError):
    pass


def _git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        # The command line holds the clone URL, and git may echo it: never its credentials.
        raise GitError(redact(f"git {' '.join(args)} failed: {proc.stderr.strip()}"))
    return proc.stdout


def _git_bytes(*args: str, cwd: Path | str | None = None) -> bytes:
    """``git`` whose output is names (bytes, NUL-separated), not text."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        raise GitError(redact(f"git {' '.join(args)} failed: {stderr}"))
    return proc.stdout


def mirror(clone_url: str, work_dir: Path) -> Path:
    """A bare mirror of ``clone_url`` under ``work_dir``, fetched up to date."""
    key = hashlib.sha1(clone_url.encode()).hexdigest()[:16]
    path = work_dir / "repos" / f"{key}.git"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # "--": a URL starting with "-" must never be read as an option.
        _git("clone", "--quiet", "--mirror", "--", clone_url, str(path))
    else:
        _git("fetch", "--quiet", "--prune", "origin", cwd=path)
    return path


def read_file(repo: Path, sha: str, path: str) -> str:
    try:
        return _git("show", f"{sha}:{path}", cwd=repo)
    except GitError as exc:
        raise GitError(f"{path} not found at {sha[:10]}: {exc}") from None


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parent_sha: str
    author: str
    message: str
    committed_at: datetime


def commit_info(repo: Path, rev: str) -> CommitInfo:
    out = _git("show", "-s", "--format=%H%x00%P%x00%an%x00%ct%x00%B", rev, cwd=repo)
    sha, parents, author, stamp, message = out.split("\x00", 4)
    return CommitInfo(
        sha=sha,
        parent_sha=parents.split()[0] if parents.strip() else "",
        author=author,
        message=message.strip(),
        committed_at=datetime.fromtimestamp(int(stamp), tz=UTC),
    )


def history(repo: Path, rev: str) -> list[CommitInfo]:
    """Commits reachable from ``rev``, oldest first (first parents only)."""
    return [commit_info(repo, sha) for sha in reversed(first_parents(repo, rev))]


def resolve(repo: Path, rev: str) -> str:
    """The full sha ``rev`` (a branch, tag or short sha) names in the mirror."""
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo).strip()
    except GitError:
        # --quiet leaves git's stderr empty: say what was looked for instead.
        what = rev.removeprefix("refs/heads/")
        kind = "branch" if rev.startswith("refs/heads/") else "branch, tag or commit"
        raise GitError(f"{what!r} names no {kind} in the repository") from None


def has_commit(repo: Path, sha: str) -> bool:
    try:
        resolve(repo, sha)
    except GitError:
        return False
    return True


def fetch(repo: Path, refspec: str) -> None:
    """Fetch one more ref, e.g. ``pull/7/head`` of a fork's pull request."""
    _git("fetch", "--quiet", "origin", refspec, cwd=repo)


def merge_base(repo: Path, a: str, b: str) -> str:
    return _git("merge-base", a, b, cwd=repo).strip()


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    """Whether ``ancestor`` is ``descendant`` or one of its ancestors."""
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, descendant], cwd=repo,
        capture_output=True, text=True, check=False,
    )
    if proc.returncode not in (0, 1):
        raise GitError(redact(f"git merge-base --is-ancestor failed: {proc.stderr.strip()}"))
    return proc.returncode == 0


def new_commits(repo: Path, before: str, after: str) -> list[str]:
    """Commits reachable from ``after`` but not from ``before`` (every parent followed):
    what a push from ``before`` to ``after`` brought to its branch."""
    return _git("rev-list", after, "--not", before, cwd=repo).split()


def unmerged(repo: Path, revs: list[str], limit: int | None = None) -> list[str]:
    """``revs`` and their first-parent ancestors (at most ``limit``) that no branch or tag
    holds, newest first.

    In a mirror of a GitHub repository these are the commits only a pull request's ref
    (``refs/pull/N/head``, fetched by ``--mirror``) or a fetch by sha brings: code nobody
    with write access has pushed.
    """
    if not revs:
        return []
    count = [f"--max-count={limit}"] if limit is not None else []
    return _git(
        "rev-list", "--first-parent", *count, *revs, "--not", "--branches", "--tags", cwd=repo
    ).split()


def rev_list(repo: Path, good: str, bad: str) -> list[str]:
    """Commits after ``good`` up to and including ``bad``, oldest first (first parents)."""
    return _git("rev-list", "--first-parent", "--reverse", f"{good}..{bad}", cwd=repo).split()


@dataclass(frozen=True)
class TreeEntry:
    """One name in a commit's tree, as ``git ls-tree`` gives it."""

    mode: str
    #: ``blob`` (a file or a symbolic link), ``tree`` (a folder) or ``commit`` (a submodule).
    type: str
    oid: str

    @property
    def kind(self) -> str:
        """What a process that lists the folder sees: ``file``, ``link``, ``folder``, or
        ``submodule``."""
        if self.type == "tree":
            return "folder"
        if self.type == "commit":
            return "submodule"
        return "link" if self.mode == "120000" else "file"


def _names(out: bytes) -> list[str]:
    # NUL-separated, so no name is quoted: git C-quotes names with non-ASCII bytes, quotes,
    # backslashes or control characters in its line-based output. Decoded as the file
    # system decodes them, so a name matches what a process in the checkout sees.
    return [os.fsdecode(name) for name in out.split(b"\0") if name]


def _list_tree(repo: str, sha: str) -> dict[str, TreeEntry]:
    entries = {}
    for record in _names(_git_bytes("ls-tree", "-r", "-t", "-z", "--full-tree", sha, cwd=repo)):
        info, _, path = record.partition("\t")
        mode, kind, oid = info.split()
        entries[path] = TreeEntry(mode, kind, oid)
    return entries


#: A commit's tree never changes: its listing is kept for the few commits a worker is on.
_listed_commit = functools.lru_cache(maxsize=16)(_list_tree)


def tree_entries(repo: Path, sha: str) -> dict[str, TreeEntry]:
    """Every file, link, folder and submodule in the tree of ``sha``, by path from its
    root, from one listing."""
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        return _listed_commit(str(repo), sha)
    # A branch or tag moves: listed afresh each time.
    return _list_tree(str(repo), sha)


def blob_id(repo: Path, sha: str, path: str) -> str | None:
    """Git's content hash of ``path`` at ``sha`` (a folder's tree hash for a folder), or
    None when it is not in the tree. Any name git can store works: read from the listing,
    never parsed out of a ``sha:path`` revision."""
    entry = tree_entries(repo, sha).get(path.rstrip("/"))
    return entry.oid if entry is not None else None


def top_level(repo: Path, sha: str) -> list[str]:
    """The names at the root of the tree of ``sha`` (files and folders), unquoted."""
    return _names(_git_bytes("ls-tree", "-z", "--name-only", "--full-tree", sha, cwd=repo))


def first_parents(repo: Path, rev: str, limit: int | None = None) -> list[str]:
    """``rev`` and up to ``limit - 1`` of its first-parent ancestors (all without a limit),
    newest first."""
    count = [f"--max-count={limit}"] if limit is not None else []
    return _git("rev-list", "--first-parent", *count, rev, cwd=repo).split()


def tree_id(repo: Path, sha: str) -> str:
    """Git's hash of the whole tree at ``sha``: equal trees, equal ids."""
    return _git("rev-parse", "--verify", "--quiet", f"{sha}^{{tree}}", cwd=repo).strip()


def content_id(repo: Path, sha: str, paths: list[str] | None = None) -> str:
    """A hash of what ``paths`` hold at ``sha`` (files or folders), or of the whole tree.

    A path missing at ``sha`` counts as missing, so adding it changes the hash.
    """
    if not paths:
        return tree_id(repo, sha)
    digest = hashlib.sha256()
    for path in sorted(set(paths)):
        digest.update(f"{path}\0{blob_id(repo, sha, path.rstrip('/')) or '-'}\n".encode())
    return digest.hexdigest()


def checkout(repo: Path, sha: str, dest: Path) -> Path:
    """Write the tree of ``sha`` into ``dest`` (files only, no .git) and return it.

    Members that would land outside ``dest`` (absolute names, ``..``, links pointing out)
    are refused: the archive is the tracked repository's, not ours.
    """
    proc = subprocess.run(
        ["git", "archive", "--format=tar", sha], cwd=repo, capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise GitError(redact(f"git archive {sha[:10]} failed: {proc.stderr.decode().strip()}"))
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as archive:
        try:
            archive.extractall(dest, filter="data")
        except tarfile.FilterError as exc:
            raise GitError(f"the tree of {sha[:10]} has an unsafe entry: {exc}") from None
    return dest
