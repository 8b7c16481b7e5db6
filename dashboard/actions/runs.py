"""Repositories, commits, pull requests and boards, and the runs of the suite on them:
started, held for approval, approved, begun and logged.

A run is closed by ``results.finish_run``: it is over once its results are in.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from dashboard import gitrepo, queue
from dashboard.models import (
    Board,
    Commit,
    Model,
    PullRequest,
    Repository,
    Run,
    RunRequest,
    Strategy,
)
from dashboard.redaction import redact

REPOSITORY_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
GITHUB_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
#: A branch name as Peakwatch takes one, no ".." anywhere (git refuses it in a ref name);
#: also the API's schema pattern, so what the schema allows is accepted.
BRANCH = r"^(?!.*\.\.)[A-Za-z0-9_.][A-Za-z0-9_./-]{0,199}$"
BRANCH_NAME = re.compile(BRANCH)


def why_not_trackable(
    name: str, clone_url: str, default_branch: str = "main", github_repository: str = ""
) -> str:
    """What is wrong with these settings of a repository to track, or an empty string. The
    command line and the API ask the same questions."""
    if not REPOSITORY_NAME.match(name):
        return f"{name[:100]!r} is not a repository name: use letters, digits, '-' and '_'"
    if not clone_url or clone_url.startswith("-") or "\0" in clone_url or len(clone_url) > 500:
        return f"{redact(clone_url[:200])!r} is not a git URL or path"
    # Refused here, with the setting to change, rather than by git at the first run.
    refusal = gitrepo.url_refusal(clone_url, gitrepo.GitLimits.from_settings())
    if refusal:
        return refusal
    if not BRANCH_NAME.match(default_branch):
        return f"{default_branch[:200]!r} is not a branch name"
    if github_repository and not GITHUB_NAME.match(github_repository):
        return f"{github_repository[:200]!r} is not a GitHub repository: write OWNER/NAME"
    return ""


def track_repository(
    name: str, clone_url: str, default_branch: str = "main", *, trust: str | None = None,
    webhook_secret: str | None = None, github_repository: str | None = None,
) -> Repository:
    """Track ``name``, or change how it is tracked. A repository tracked again keeps its
    webhook secret unless given one; a new one gets a fresh secret."""
    existing = Repository.objects.filter(name=name).first()
    defaults = {"clone_url": clone_url, "default_branch": default_branch}
    if trust is not None:
        defaults["trust"] = trust
    if webhook_secret is None and not (existing and existing.webhook_secret):
        webhook_secret = secrets.token_hex(20)
    if webhook_secret is not None:
        defaults["webhook_secret"] = webhook_secret
    if github_repository is not None:
        defaults["github_repository"] = github_repository
    repository, _ = Repository.objects.update_or_create(name=name, defaults=defaults)
    return repository


def accepts_github_deliveries(repository: Repository) -> bool:
    """Whether a GitHub delivery can name this repository (dashboard/webhooks/github.py): by
    ``github_repository``, or by a clone URL on github.com."""
    return bool(repository.github_repository) or "github.com" in repository.clone_url.lower()


#: What of a commit message is kept: its first lines, up to this many characters. A
#: repository's message is anyone's text, served on every run page and API answer.
MESSAGE_CHARACTERS = 16_384
MESSAGE_LINES = 200


def kept_message(message: str) -> str:
    """``message`` within :data:`MESSAGE_CHARACTERS` and :data:`MESSAGE_LINES`, saying so
    where it was cut, and keeping the line :func:`dashboard.gitrepo.commit_info` adds when
    it read only the start of a longer message."""
    body, sep, note = message.rpartition("\n\n[read in part: ")
    if sep and note.endswith("]") and "\n" not in note:
        message, note = body, f"[read in part: {note}"
    else:
        note = ""
    lines = message.splitlines(keepends=True)
    kept = "".join(lines[:MESSAGE_LINES])[:MESSAGE_CHARACTERS]
    parts = [kept.rstrip("\n")]
    if kept != message:
        parts.append(
            f"[cut by Peakwatch: of the message's {len(message):,} characters in "
            f"{len(lines):,} lines{' read' if note else ''}, the first {MESSAGE_LINES} lines, "
            f"up to {MESSAGE_CHARACTERS:,} characters, are kept]"
        )
    elif not note:
        return message
    if note:
        parts.append(note)
    return "\n\n".join(parts)


def record_commit(
    repository: Repository,
    *,
    sha: str,
    parent_sha: str = "",
    branch: str = "",
    author: str = "",
    message: str = "",
    committed_at: datetime,
    from_outside: bool = False,
) -> Commit:
    """The commit's row, created if new. ``from_outside``: code the repository has not
    vouched for (see ``Commit.from_outside``); set on the row as it is created, so no run
    can find it unmarked in between."""
    commit, created = Commit.objects.get_or_create(
        repository=repository,
        sha=sha,
        defaults={
            "parent_sha": parent_sha,
            "branch": branch,
            "author": author,
            "message": kept_message(message),
            "committed_at": committed_at,
            "from_outside": from_outside,
        },
    )
    if not created and branch and not commit.branch:
        commit.branch = branch
        commit.save(update_fields=["branch"])
    if not created and from_outside and not commit.from_outside:
        mark_from_outside(repository, [sha])
        commit.from_outside = True
    return commit


def mark_from_outside(repository: Repository, shas: Iterable[str]) -> int:
    """Mark the recorded commits among ``shas`` as from outside; an approval they already
    have stands. Returns how many changed."""
    return Commit.objects.for_repository(repository).filter(
        sha__in=list(shas), from_outside=False
    ).update(from_outside=True)


def register_board(name: str, *, kind: str = Board.Kind.CPU, target: str = "llvm") -> Board:
    board, _ = Board.objects.get_or_create(name=name, defaults={"kind": kind, "target": target})
    return board


def mark_board_seen(
    name: str,
    info: dict,
    *,
    kind: str = "",
    target: str = "",
    memory_capacity: int | None = None,
) -> None:
    """Record a worker's view of its board: health, versions, and (when it knows) what the
    board is; the worker's configuration wins over what an admin typed, since it is what
    runs."""
    fields = {"last_seen": timezone.now(), "info": info}
    if kind:
        fields["kind"] = kind
    if target:
        fields["target"] = target
    if memory_capacity:
        fields["memory_capacity"] = memory_capacity
    register_board(name)
    Board.objects.filter(name=name).update(**fields)


def start_run(
    commit: Commit,
    *,
    trigger: str = "manual",
    pull_request: PullRequest | None = None,
    approved: bool = True,
) -> Run:
    """Create a Run for ``commit`` and hand it to the workers, or hold it until a maintainer
    approves: when not ``approved`` (a pull request from outside), and whenever the commit
    awaits approval, whoever asks (webhook, API, command, a retry).

    While a run of such a commit waits, asking again with the same trigger and pull request
    names that run instead of adding one: repeated requests cannot pile up runs for one
    approval to release at once.
    """
    with transaction.atomic():
        # Locked, as approve_commit locks it: an approval at this moment either releases
        # this run or is seen here, never neither.
        commit = Commit.objects.select_for_update().get(pk=commit.pk)
        waits = not approved or commit.awaits_approval
        if waits:
            waiting = (
                Run.objects.for_commit(commit).awaiting_approval()
                .filter(trigger=trigger, pull_request=pull_request).newest_first().first()
            )
            if waiting is not None:
                return waiting
        # A run of approved code from outside says who let it run, as a released run does.
        vouched = commit.from_outside and not waits
        run = Run.objects.create(
            repository_id=commit.repository_id, commit=commit, trigger=trigger,
            pull_request=pull_request,
            status=Run.Status.AWAITING_APPROVAL if waits else Run.Status.QUEUED,
            approved_by=commit.approved_by if vouched else "",
            approved_at=commit.approved_at if vouched else None,
        )
        if waits:
            append_log(run, f"waits for a maintainer's approval of {commit.short_sha}")
        else:
            _queue_run(run)
    return run


def _queue_run(run: Run) -> None:
    # The worker must see the row: queue only once the transaction is committed.
    transaction.on_commit(lambda: queue.send(queue.PLAN_RUN, run.pk))
    if run.repository.notifies_github:
        # A pending commit status, so the pull request shows the check from the start.
        transaction.on_commit(lambda: queue.send(queue.NOTIFY_RUN, run.pk))


def approve_run(run: Run, *, by: str) -> bool:
    """Approve ``run``'s commit, if ``run`` waits for approval: it and every other run of
    that commit waiting go to the workers, and later runs of the commit go at once. False
    when ``run`` was not waiting."""
    if not Run.objects.filter(pk=run.pk).awaiting_approval().exists():
        return False
    released = approve_commit(run.commit, by=by)
    run.refresh_from_db()
    return any(each.pk == run.pk for each in released)


def approve_commit(commit: Commit, *, by: str) -> list[Run]:
    """Let ``commit``'s code run: record who approved it and when (the first approval
    stands), send every run of it waiting for approval to the workers, and let its later
    runs go at once. Returns the runs released."""
    by, now = by[:150], timezone.now()
    with transaction.atomic():
        locked = Commit.objects.select_for_update().get(pk=commit.pk)
        if locked.approved_at is None:
            Commit.objects.filter(pk=commit.pk).update(approved_by=by, approved_at=now)
            commit.approved_by, commit.approved_at = by, now
        waiting = list(
            Run.objects.for_commit(commit).awaiting_approval()
            .select_for_update(of=("self",)).select_related("repository")
        )
        Run.objects.filter(pk__in=[run.pk for run in waiting]).update(
            status=Run.Status.QUEUED, approved_by=by, approved_at=now
        )
        for run in waiting:
            run.status, run.approved_by, run.approved_at = Run.Status.QUEUED, by, now
            append_log(run, f"approved by {by}")
            _queue_run(run)
    return waiting


def ensure_run(
    commit: Commit, *, trigger: str, pull_request: PullRequest | None = None,
    approved: bool = True,
) -> tuple[Run, bool]:
    """The commit's run, started now unless one is waiting, queued, running, succeeded or
    partial.

    A partial run counts, as it did while it was called succeeded: what it measured is
    there to compare with, and its failures are most often the commit's own (a model that
    does not build), which running it again on every push or pull request event would only
    repeat; ``manage.py run`` and ``POST /api/runs`` always start a new run. A failed run
    does not count: the run itself broke, or none of its results succeeded, so the next
    event tries again. For a pull request, only a run of that pull request counts, so its
    summary is posted.
    """
    runs = Run.objects.for_commit(commit).not_failed().newest_first()
    if pull_request is not None:
        runs = runs.filter(pull_request=pull_request)
    existing = runs.first()
    if existing is not None:
        return existing, False
    return start_run(commit, trigger=trigger, pull_request=pull_request, approved=approved), True


def request_run(
    repository: Repository, *, rev: str, branch: str = "", trigger: str = "api"
) -> RunRequest:
    """Ask for a run of ``rev`` (a sha not recorded yet, or ``branch``'s head), to be
    resolved in the repository's mirror by a task: git can be slow, a request must not
    wait. The row is what the asker polls until it names the run."""
    request = RunRequest.objects.create(
        repository=repository, rev=rev, branch=branch, trigger=trigger
    )
    transaction.on_commit(lambda: queue.send(queue.RESOLVE_RUN_REQUEST, request.pk))
    return request


def answer_run_request(request: RunRequest, *, run: Run | None = None, error: str = "") -> None:
    """Record what became of ``request``: the run it started, or why there is none."""
    request.status = RunRequest.Status.RESOLVED if run is not None else RunRequest.Status.FAILED
    request.run = run
    # Git's messages may name the clone URL, which may hold a token.
    request.error = redact(error)[:2000] if run is None else ""
    request.resolved_at = timezone.now()
    request.save(update_fields=["status", "run", "error", "resolved_at"])


def begin_run(run: Run, *, models: Iterable[tuple[str, str]], strategies: Iterable[str],
              boards: Iterable[str], total: int) -> None:
    """Register what the manifest names and mark the run as running."""
    for name, source in models:
        Model.objects.update_or_create(
            repository=run.repository, name=name, defaults={"source": source}
        )
    for name in strategies:
        Strategy.objects.get_or_create(name=name)
    boards = list(boards)
    for name in boards:
        register_board(name)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        started_at=run.started_at or timezone.now(),
        progress_total=total,
        boards=boards,
    )


def append_log(run: Run, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    # Concatenate in the database so concurrent board workers never overwrite each other.
    line = redact(line)
    Run.objects.filter(pk=run.pk).update(log=Concat(F("log"), Value(f"{stamp} {line}\n")))


def record_pull_request(
    repository: Repository,
    *,
    number: int,
    title: str = "",
    url: str = "",
    head_ref: str = "",
    head_sha: str,
    base_ref: str = "",
    base_sha: str = "",
    author: str = "",
    author_association: str = "",
    from_fork: bool = False,
) -> PullRequest:
    pull_request, _ = PullRequest.objects.update_or_create(
        repository=repository,
        number=number,
        defaults={
            "title": title, "url": url, "head_ref": head_ref, "head_sha": head_sha,
            "base_ref": base_ref, "base_sha": base_sha, "author": author,
            "author_association": author_association, "from_fork": from_fork,
            # Opened, pushed to or reopened: open, whatever GitHub said before.
            "closed_at": None, "merged": False,
        },
    )
    return pull_request


def close_pull_request(repository: Repository, *, number: int, merged: bool) -> PullRequest | None:
    """Mark pull request ``number`` closed (``merged`` or not), as GitHub said; None when
    Peakwatch never recorded it. Its runs and comparisons stay."""
    pull_request = PullRequest.objects.filter(repository=repository, number=number).first()
    if pull_request is None:
        return None
    pull_request.closed_at = timezone.now()
    pull_request.merged = merged
    pull_request.save(update_fields=["closed_at", "merged", "updated_at"])
    return pull_request


def remember_pull_request_comment(pull_request: PullRequest, comment_id: int) -> None:
    PullRequest.objects.filter(pk=pull_request.pk).update(comment_id=comment_id)
    pull_request.comment_id = comment_id
