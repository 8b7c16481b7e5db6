"""The few git operations Peakwatch needs, on a bare mirror of each tracked repository.

The tracking service records history from the mirror; a worker materialises the tree of the
exact commit it runs (:func:`checkout`) and removes it afterwards.

Git runs outside the sandbox, on whatever a tracked repository holds, so every command here
is bounded (:class:`GitLimits`, ``PEAKWATCH["GIT"]``): a wall clock per command, a low-speed
limit on HTTP transfers, the protocols git may fetch over, and the size of a checkout.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

from dashboard.redaction import redact


class GitError(RuntimeError):
    pass


#: The protocols a setting may allow, as ``GIT_ALLOW_PROTOCOL`` names them: ``file`` is a
#: local path or a ``file://`` URL. Remote helpers (``ext::``, which runs a command, and
#: ``fd::``) are never allowed.
PROTOCOLS = ("https", "http", "ssh", "git", "file")


@dataclass(frozen=True)
class GitLimits:
    """What git, outside the sandbox, may spend on a tracked repository
    (``PEAKWATCH["GIT"]``, each field under its upper-case name, set by
    ``PEAKWATCH_GIT_<NAME>``)."""

    #: What a clone URL may be; ``file`` (local paths) only where the host's files are the
    #: operator's to offer.
    protocols: tuple[str, ...] = ("https", "ssh", "git")
    #: Wall clock of each git command: a clone, a fetch, a checkout.
    seconds: float = 600.0
    #: An HTTP transfer slower than this many bytes a second for ``low_speed_seconds`` ends.
    low_speed_bytes: int = 1000
    low_speed_seconds: int = 60
    #: A checkout's files together, any one file, and its names (files, links and folders).
    checkout_bytes: int = 4 << 30
    checkout_file_bytes: int = 2 << 30
    checkout_files: int = 100_000
    #: A file read whole from the mirror (the manifest), and what of a commit's message is
    #: read (what a page keeps of it is less: ``dashboard.actions.runs.kept_message``).
    file_bytes: int = 1 << 20
    message_bytes: int = 256 << 10

    @classmethod
    def from_settings(cls, values: dict | None = None) -> GitLimits:
        """Limits from the settings' ``GIT`` table (the project's settings when not given);
        a name the table leaves out keeps its default."""
        if values is None:
            from django.conf import settings

            values = settings.PEAKWATCH.get("GIT", {})
        convert = {"int": int, "float": float, "tuple[str, ...]": tuple}
        return cls(**{
            f.name: convert[f.type](values[f.name.upper()])
            for f in fields(cls) if f.name.upper() in values
        })

    def setting(self, name: str) -> str:
        """``PEAKWATCH_GIT_NAME=value``, as a refusal names the limit it met."""
        value = getattr(self, name)
        if isinstance(value, tuple):
            shown = ",".join(value)
        else:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
        return f"PEAKWATCH_GIT_{name.upper()}={shown}"

    def environment(self) -> dict[str, str]:
        # Git enforces GIT_ALLOW_PROTOCOL itself, on redirects and submodules too.
        return {
            **os.environ, "GIT_ALLOW_PROTOCOL": ":".join(self.protocols),
            "GIT_TERMINAL_PROMPT": "0",
        }

    def transfer_options(self) -> list[str]:
        return [
            "-c", f"http.lowSpeedLimit={self.low_speed_bytes}",
            "-c", f"http.lowSpeedTime={self.low_speed_seconds}",
        ]


def _size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def url_protocol(url: str) -> str:
    """The protocol git uses for ``url``, as ``GIT_ALLOW_PROTOCOL`` names it (git's own
    reading: transport.c and connect.c)."""
    helper = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)::", url)
    if helper:
        return helper[1]
    colon, slash = url.find(":"), url.find("/")
    if colon < 0 or (0 <= slash < colon):
        return "file"
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if not scheme:
        return "ssh"  # host:path, git's scp-like syntax
    name = scheme[1].lower()
    return "ssh" if name in ("git+ssh", "ssh+git") else name


def url_refusal(url: str, limits: GitLimits) -> str:
    """Why git may not clone ``url`` under ``limits``, or an empty string."""
    protocol = url_protocol(url)
    if protocol in limits.protocols:
        return ""
    shown = redact(url[:200])
    if protocol == "file":
        what = "a local repository"
    elif protocol in PROTOCOLS:
        what = f"a {protocol} URL"
    else:
        what = f"git's {protocol!r} remote helper, which is never allowed"
    return (
        f"{shown!r} is {what}: this host clones only over "
        f"{', '.join(limits.protocols) or 'nothing'} ({limits.setting('protocols')}; it may "
        f"name {', '.join(PROTOCOLS)})"
    )


def _stop(proc: subprocess.Popen) -> None:
    """End ``proc`` and whatever it started (git's helpers, ssh, index-pack): SIGTERM first,
    so that git removes its lock files, then SIGKILL to what is left of its group."""
    if proc.returncode is not None:
        return  # reaped already, and its group with it
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            continue


def _spawn(args: list[str], cwd, limits: GitLimits, **options) -> subprocess.Popen:
    # A session of its own: on a time limit the whole group ends, not only git, whose
    # children would otherwise hold its pipes open.
    return subprocess.Popen(
        ["git", *args], cwd=cwd, env=limits.environment(), start_new_session=True, **options
    )


def _run(args: tuple[str, ...], cwd, limits: GitLimits | None) -> bytes:
    limits = limits or GitLimits.from_settings()
    proc = _spawn(
        list(args), cwd, limits, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    command = " ".join(arg for arg in args if not arg.startswith(("http.lowSpeed", "-c")))
    try:
        out, err = proc.communicate(timeout=limits.seconds)
    except subprocess.TimeoutExpired:
        _stop(proc)
        proc.communicate()
        raise GitError(redact(
            f"git {command} took more than {limits.seconds:g} s, its time limit "
            f"({limits.setting('seconds')})"
        )) from None
    except BaseException:  # e.g. Celery's soft time limit: git must not outlive the task
        _stop(proc)
        raise
    if proc.returncode != 0:
        # The command line holds the clone URL, and git may echo it: never its credentials.
        stderr = err.decode(errors="replace").strip()[-4000:]
        if "Operation too slow" in stderr or "curl 28" in stderr:
            stderr += (
                f" (the low-speed limit: {limits.setting('low_speed_bytes')} for "
                f"{limits.setting('low_speed_seconds')})"
            )
        raise GitError(redact(f"git {command} failed: {stderr}"))
    return out


def _git(*args: str, cwd: Path | None = None, limits: GitLimits | None = None) -> str:
    # Newlines as text mode reads them, so a message or manifest written on Windows reads
    # the same.
    text = _run(args, cwd, limits).decode(errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _git_bytes(*args: str, cwd: Path | str | None = None) -> bytes:
    """``git`` whose output is names (bytes, NUL-separated), not text."""
    return _run(args, cwd, None)


def mirror(clone_url: str, work_dir: Path, limits: GitLimits | None = None) -> Path:
    """A bare mirror of ``clone_url`` under ``work_dir``, fetched up to date."""
    limits = limits or GitLimits.from_settings()
    refusal = url_refusal(clone_url, limits)
    if refusal:
        raise GitError(refusal)
    key = hashlib.sha1(clone_url.encode()).hexdigest()[:16]
    path = work_dir / "repos" / f"{key}.git"
    if path.exists():
        _git(*limits.transfer_options(), "fetch", "--quiet", "--prune", "origin", cwd=path,
             limits=limits)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Cloned beside it and renamed into place: a clone ended by a limit (or a killed
    # worker) leaves no half mirror that later fetches would take for a whole one.
    partial = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".partial", dir=path.parent))
    try:
        # "--": a URL starting with "-" must never be read as an option.
        _git(*limits.transfer_options(), "clone", "--quiet", "--mirror", "--", clone_url,
             str(partial), limits=limits)
        try:
            partial.rename(path)
        except OSError:
            if not path.exists():
                raise
            # Another process cloned it meanwhile: theirs is as good.
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return path


def read_file(repo: Path, sha: str, path: str, limits: GitLimits | None = None) -> str:
    """The file ``path`` at ``sha``, refused past ``file_bytes`` before it is read."""
    limits = limits or GitLimits.from_settings()
    try:
        size = int(_git("cat-file", "-s", f"{sha}:{path}", cwd=repo, limits=limits))
    except GitError as exc:
        raise GitError(f"{path} not found at {sha[:10]}: {exc}") from None
    if size > limits.file_bytes:
        raise GitError(
            f"{path} at {sha[:10]} has {size:,} bytes, more than the {limits.file_bytes:,} a "
            f"file read from the repository may have ({limits.setting('file_bytes')})"
        )
    return _git("cat-file", "blob", f"{sha}:{path}", cwd=repo, limits=limits)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parent_sha: str
    author: str
    message: str
    committed_at: datetime


def commit_info(repo: Path, rev: str, limits: GitLimits | None = None) -> CommitInfo:
    """``rev``'s commit, its message read up to ``message_bytes`` (a repository's message is
    anyone's text: a 64 MiB one was read, stored and served whole)."""
    limits = limits or GitLimits.from_settings()
    size = int(_git("cat-file", "-s", f"{rev}^{{commit}}", cwd=repo, limits=limits))
    whole = size <= limits.message_bytes
    out = _git("show", "-s", "--format=%H%x00%P%x00%an%x00%ct%x00" + ("%B" if whole else ""),
               rev, cwd=repo, limits=limits)
    sha, parents, author, stamp, message = out.split("\x00", 4)
    return CommitInfo(
        sha=sha,
        parent_sha=parents.split()[0] if parents.strip() else "",
        author=author,
        message=message.strip() if whole else _message_start(repo, sha, size, limits),
        committed_at=datetime.fromtimestamp(int(stamp), tz=UTC),
    )


def _message_start(repo: Path, sha: str, size: int, limits: GitLimits) -> str:
    """The first ``message_bytes`` of commit ``sha`` (``size`` bytes), read from the raw
    object (its headers, a blank line, the message), and a line saying it was cut."""
    proc = _spawn(["cat-file", "commit", sha], repo, limits, stdin=subprocess.DEVNULL,
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        head = proc.stdout.read(limits.message_bytes)
    finally:
        _stop(proc)
        proc.stdout.close()
    _, _, body = head.partition(b"\n\n")
    text = body.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return (
        f"{text.strip()}\n\n[read in part: the commit is {size:,} bytes, of which the first "
        f"{limits.message_bytes:,} were read ({limits.setting('message_bytes')})]"
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


def fetch(repo: Path, refspec: str, limits: GitLimits | None = None) -> None:
    """Fetch one more ref, e.g. ``pull/7/head`` of a fork's pull request."""
    limits = limits or GitLimits.from_settings()
    _git(*limits.transfer_options(), "fetch", "--quiet", "origin", refspec, cwd=repo,
         limits=limits)


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


#: Bytes read from git at a time when a file is written: the checkout's memory, whatever
#: the file's size.
CHUNK = 1 << 20
#: A link's target is a path: anything longer is no link a file system would hold.
LINK_BYTES = 4096


@dataclass(frozen=True)
class _Member:
    path: str
    mode: str
    type: str
    oid: str
    size: int


def _records(stream, limit: int):
    """NUL-separated records from ``stream``, read a block at a time; stops after ``limit +
    1``, so a tree of millions of names is never held to be counted."""
    pending, count = b"", 0
    while block := stream.read(CHUNK):
        *records, pending = (pending + block).split(b"\0")
        for record in records:
            yield record
            count += 1
            if count > limit:
                return
    if pending:
        yield pending


def _members(
    repo: Path, sha: str, limits: GitLimits, running: list[subprocess.Popen]
) -> list[_Member]:
    """Every name in the tree of ``sha`` with its size, refused as a whole when the tree is
    over a checkout limit: nothing is written first. The git that lists them is added to
    ``running`` while it runs."""
    proc = _spawn(
        ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", sha], repo, limits,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    running.append(proc)
    members, total = [], 0
    try:
        for record in _records(proc.stdout, limits.checkout_files):
            if len(members) == limits.checkout_files:
                raise GitError(
                    f"the tree of {sha[:10]} holds more than {limits.checkout_files} files, "
                    f"links and folders, over the checkout's limit "
                    f"({limits.setting('checkout_files')})"
                )
            info, _, name = record.partition(b"\t")
            mode, kind, oid, size = info.decode().split()
            member = _Member(os.fsdecode(name), mode, kind, oid, int(size) if kind == "blob" else 0)
            if member.size > limits.checkout_file_bytes:
                raise GitError(
                    f"the tree of {sha[:10]} holds {member.path} of {_size(member.size)}, over "
                    f"the checkout's limit of {_size(limits.checkout_file_bytes)} for one file "
                    f"({limits.setting('checkout_file_bytes')})"
                )
            total += member.size
            if total > limits.checkout_bytes:
                raise GitError(
                    f"the tree of {sha[:10]} holds at least {_size(total)} of files, over the "
                    f"checkout's limit of {_size(limits.checkout_bytes)} "
                    f"({limits.setting('checkout_bytes')})"
                )
            members.append(member)
        proc.wait()
        if proc.returncode != 0:
            stderr = proc.stderr.read().decode(errors="replace").strip()
            raise GitError(redact(f"git ls-tree {sha[:10]} failed: {stderr}"))
    finally:
        _stop(proc)
        proc.stdout.close()
        proc.stderr.close()
    return members


class _Blobs:
    """``git cat-file --batch``, one object at a time: each blob is streamed from git's
    pipe, never held whole. git flushes after each object, so a request is answered
    before the next is written."""

    def __init__(self, repo: Path, limits: GitLimits):
        self.proc = _spawn(
            ["cat-file", "--batch"], repo, limits, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )

    def open(self, member: _Member) -> int:
        """Ask for ``member``'s blob; its size, whose bytes :meth:`read` then gives."""
        self.proc.stdin.write(f"{member.oid}\n".encode())
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob" or int(header[2]) != member.size:
            raise GitError(f"git cat-file gave no blob of {member.size} bytes for {member.path}")
        return member.size

    def read(self, size: int):
        """The next ``size`` bytes, a chunk at a time, then the newline after them."""
        while size:
            chunk = self.proc.stdout.read(min(size, CHUNK))
            if not chunk:
                raise GitError("git cat-file ended in the middle of a blob")
            size -= len(chunk)
            yield chunk
        self.proc.stdout.read(1)

    def close(self) -> None:
        _stop(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:  # a broken pipe to a git ended by a limit
                pass


def _target(dest: Path, sha: str, path: str) -> Path:
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise GitError(f"the tree of {sha[:10]} has an unsafe entry: {path!r}")
    return dest.joinpath(*parts)


def checkout(repo: Path, sha: str, dest: Path, limits: GitLimits | None = None) -> Path:
    """Write the tree of ``sha`` into ``dest`` (files only, no .git) and return it.

    The tree is written from git's objects, byte for byte: no attribute (``export-ignore``,
    ``export-subst``, an eol filter) changes what is extracted, so the checkout is the tree
    whose blob ids the compile cache's keys name. Files keep their executable bit;
    submodules are empty folders, as ``git archive`` leaves them. Names that would land
    outside ``dest`` (``..``, links pointing out) are refused: the tree is the tracked
    repository's, not ours. So is a tree over a checkout limit, before anything is written;
    blobs are streamed to disk, so a large file costs no memory.
    """
    limits = limits or GitLimits.from_settings()
    # A wall clock for the whole checkout: the git it stops makes the read in progress end.
    running: list[subprocess.Popen] = []
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        for proc in running:
            _stop(proc)

    timer = threading.Timer(limits.seconds, expire)
    timer.daemon = True
    timer.start()
    blobs = None
    links: list[tuple[Path, str]] = []
    try:
        members = _members(repo, sha, limits, running)
        dest.mkdir(parents=True, exist_ok=True)
        blobs = _Blobs(repo, limits)
        running.append(blobs.proc)
        for member in members:
            target = _target(dest, sha, member.path)
            if member.type in ("tree", "commit"):
                target.mkdir(parents=True, exist_ok=True)
            elif member.mode == "120000":
                if member.size > LINK_BYTES:
                    raise GitError(
                        f"the tree of {sha[:10]} has an unsafe entry: the link {member.path} "
                        f"is {member.size} bytes long"
                    )
                link = b"".join(blobs.read(blobs.open(member)))
                links.append((target, os.fsdecode(link)))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                _write(target, member, blobs)
        # Links last: no file above was written through one.
        for target, link in links:
            target.symlink_to(link)
        root = os.path.realpath(dest)
        for target, link in links:
            # Resolved once all are in place, so that a chain of links is followed too.
            if os.path.isabs(link) or os.path.commonpath(
                [root, os.path.realpath(target)]
            ) != root:
                raise GitError(
                    f"the tree of {sha[:10]} has an unsafe entry: the link "
                    f"{target.relative_to(dest)} points outside the tree ({link!r})"
                )
    except (GitError, OSError) as exc:
        if expired.is_set():
            raise GitError(
                f"the checkout of {sha[:10]} took more than {limits.seconds:g} s, its time "
                f"limit ({limits.setting('seconds')})"
            ) from None
        if isinstance(exc, OSError):
            raise GitError(f"the tree of {sha[:10]} could not be written: {exc}") from None
        raise
    finally:
        timer.cancel()
        if blobs is not None:
            blobs.close()
    return dest


def _write(target: Path, member: _Member, blobs: _Blobs) -> None:
    # O_EXCL and O_NOFOLLOW: a tree naming one path twice cannot write through what its
    # first entry made.
    fd = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    with open(fd, "wb", buffering=0) as out:
        for chunk in blobs.read(blobs.open(member)):
            out.write(chunk)
        os.fchmod(out.fileno(), 0o755 if member.mode == "100755" else 0o644)
