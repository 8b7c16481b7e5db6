"""Regression tracking as a service: what webhooks, the API and commands ask for.

Views parse requests and call these; Celery tasks of the ``peakwatch`` queue call them for
the git work a request must not wait for. Everything here changes state through
:mod:`dashboard.actions`.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import tomllib
from collections.abc import Collection

from django.conf import settings
from django.urls import reverse

from dashboard import actions, gitrepo
from dashboard.models import Commit, Repository, Run, RunRequest, WebhookDelivery

log = logging.getLogger(__name__)

Outcome = WebhookDelivery.Outcome
#: How many first-parent ancestors of a pushed head are recorded, so it has a baseline.
HISTORY_DEPTH = 20
HEX = re.compile(r"^[0-9a-f]{7,40}$")


def webhook_url(repository: Repository) -> str:
    """Where GitHub delivers this repository's events: absolute from PEAKWATCH_BASE_URL, the
    address the dashboard is reached at from outside."""
    return settings.PEAKWATCH_BASE_URL.rstrip("/") + reverse(
        "github-webhook-repository", args=[repository.name]
    )


def mirror_of(repository: Repository):
    return gitrepo.mirror(repository.clone_url, settings.PEAKWATCH["WORK_DIR"])


def record_history(
    repository: Repository, mirror, rev: str, branch: str, *, outside: Collection[str] = ()
) -> Commit:
    """Record ``rev`` and its recent first parents (so it has a baseline); return ``rev``'s.

    Those in ``outside`` are recorded as from outside (and marked so if known already).
    """
    shas = gitrepo.first_parents(mirror, rev, HISTORY_DEPTH)
    known = set(
        Commit.objects.for_repository(repository).filter(sha__in=shas).values_list("sha", flat=True)
    )
    # The head always (its branch may be new), then ancestors down to the first known one.
    new = [shas[0]]
    for sha in shas[1:]:
        if sha in known:
            break
        new.append(sha)
    head = None
    for sha in reversed(new):
        info = gitrepo.commit_info(mirror, sha)
        head = actions.record_commit(
            repository, sha=info.sha, parent_sha=info.parent_sha, branch=branch,
            author=info.author, message=info.message, committed_at=info.committed_at,
            from_outside=sha in outside,
        )
    if outside:
        actions.mark_from_outside(repository, outside)
    return head


def resolve_revision(mirror, rev: str, *, branch: str = "") -> str:
    """The sha to run for ``rev``: a branch (``rev == branch``) is looked up among branches
    only, so ``pull/7/head`` names no pull request's ref; anything else is any revision."""
    return gitrepo.resolve(mirror, f"refs/heads/{rev}" if branch and rev == branch else rev)


def unmerged_commits(repository: Repository, mirror, sha: str) -> set[str]:
    """``sha`` and its recent first parents that are on no branch or tag of the repository,
    unless it trusts everyone: code only a pull request brought (GitHub's ``refs/pull/*``,
    which a mirror holds too), so from outside until a maintainer approves it."""
    if repository.trust == Repository.Trust.EVERYONE:
        return set()
    return set(gitrepo.unmerged(mirror, [sha], HISTORY_DEPTH))


def unapproved(repository: Repository, mirror, shas: list[str]) -> list[str]:
    """Those of ``shas`` that may not run before a maintainer approves them: recorded as
    from outside and not approved, or never recorded and on no branch or tag."""
    rows = Commit.objects.for_repository(repository).filter(sha__in=shas)
    held = set(rows.awaiting_approval().values_list("sha", flat=True))
    known = set(rows.values_list("sha", flat=True))
    unknown = [sha for sha in shas if sha not in known]
    if unknown and repository.trust != Repository.Trust.EVERYONE:
        held |= set(gitrepo.unmerged(mirror, unknown)) & set(unknown)
    return [sha for sha in shas if sha in held]


def run_revision(
    repository: Repository, rev: str, *, branch: str = "", trigger: str = "api"
) -> Run | None:
    """Resolve ``rev`` in the mirror, record it (with its recent history) and run it; a
    commit from outside waits for a maintainer's approval (``actions.start_run``). None
    when git cannot find it."""
    try:
        return _start_revision(repository, rev, branch=branch, trigger=trigger)
    except gitrepo.GitError as exc:
        log.warning("cannot run %s of %s: %s", rev, repository, exc)
        return None


def resolve_run_request(request: RunRequest) -> Run | None:
    """Run what ``POST /api/runs`` asked for by a revision it could not name at once, and
    answer the request with the run, or with why git could not find the revision."""
    try:
        run = _start_revision(
            request.repository, request.rev, branch=request.branch, trigger=request.trigger
        )
    except gitrepo.GitError as exc:
        log.warning("cannot run %s of %s: %s", request.rev, request.repository, exc)
        actions.answer_run_request(request, error=f"cannot run {request.rev!r}: {exc}")
        return None
    actions.answer_run_request(request, run=run)
    return run


def _start_revision(repository: Repository, rev: str, *, branch: str, trigger: str) -> Run:
    mirror = mirror_of(repository)
    sha = resolve_revision(mirror, rev, branch=branch)
    outside = unmerged_commits(repository, mirror, sha)
    commit = record_history(
        repository, mirror, sha, branch or ("" if HEX.match(rev) else rev), outside=outside
    )
    return actions.start_run(commit, trigger=trigger)


class NothingToRun(Exception):
    """The delivery asks for nothing that runs (a deleted branch): ignored, with why."""


def process_delivery(delivery: WebhookDelivery) -> None:
    """Do what an accepted delivery asks: the git work the request did not wait for."""
    if delivery.repository is None or not isinstance(delivery.payload, dict):
        actions.close_delivery(delivery, outcome=Outcome.FAILED, detail="the repository is gone")
        return
    try:
        if delivery.event == "push":
            detail = _process_push(delivery.repository, delivery.payload)
        elif delivery.event == "pull_request":
            detail = _process_pull_request(delivery.repository, delivery.payload)
        else:
            detail = f"nothing to do for {delivery.event}"
    except NothingToRun as exc:
        actions.close_delivery(delivery, outcome=Outcome.IGNORED, detail=str(exc))
        return
    except gitrepo.GitError as exc:
        log.warning("delivery %s failed: %s", delivery.guid, exc)
        actions.close_delivery(delivery, outcome=Outcome.FAILED, detail=str(exc))
        return
    actions.close_delivery(delivery, outcome=Outcome.PROCESSED, detail=detail)


def _process_push(repository: Repository, payload: dict) -> str:
    ref, after = payload["ref"], payload["after"]
    if payload.get("deleted") or not after.strip("0"):
        raise NothingToRun(f"{ref} was deleted: nothing to run")
    branch = ref.removeprefix("refs/heads/")
    mirror = mirror_of(repository)
    _check_pushed_head(mirror, branch, after)
    if not pushes_run(repository, mirror, branch):
        # Still a push by someone with write access: what it vouches for is approved.
        merged = _approve_pushed(repository, mirror, payload, branch)
        detail = (
            f"pushes to {branch!r} do not run: only {repository.default_branch!r} and the "
            "branches the repository's settings (run branches) or peakwatch.toml's [suite] "
            "branches on it name"
        )
        if not merged:
            raise NothingToRun(detail)
        return f"{detail}; approved by the push: {', '.join(c.short_sha for c in merged)}"
    for pushed in payload.get("commits", []):
        # Commits of the push that are not first parents of its head are recorded too;
        # only those the verified head holds, or the payload could name any commit.
        sha = pushed["id"]
        if gitrepo.has_commit(mirror, sha) and gitrepo.is_ancestor(mirror, sha, after):
            record_history(repository, mirror, sha, branch)
    head = record_history(repository, mirror, after, branch)
    merged = _approve_pushed(repository, mirror, payload, branch)
    run, started = actions.ensure_run(head, trigger="push")
    detail = f"{'started' if started else 'already had'} run {run.pk} of {head.short_sha}"
    if merged:
        detail += f"; approved by the push: {', '.join(c.short_sha for c in merged)}"
    return detail


#: Where the tracked repository names the branches whose pushes run (besides its default).
MANIFEST_PATH = "peakwatch.toml"


def pushes_run(repository: Repository, mirror, branch: str) -> bool:
    """Whether a push to ``branch`` starts a run: the default branch's always do; another's
    where the repository's settings or the manifest on the default branch name it (a name,
    or a pattern such as ``release/*``). A push to any other branch is someone's work in
    progress, and would spend the fleet on it."""
    if branch == repository.default_branch:
        return True
    patterns = re.split(r"[\s,]+", repository.run_branches.strip())
    patterns += _manifest_branches(mirror, repository.default_branch)
    return any(fnmatch.fnmatchcase(branch, p) for p in patterns if p)


def _manifest_branches(mirror, default_branch: str) -> list[str]:
    """``[suite] branches`` of the manifest at the default branch's tip; none where it is
    missing or malformed (the run of that commit says what is wrong with it)."""
    try:
        text = gitrepo.read_file(mirror, f"refs/heads/{default_branch}", MANIFEST_PATH)
        branches = tomllib.loads(text).get("suite", {}).get("branches", [])
    except (gitrepo.GitError, tomllib.TOMLDecodeError, AttributeError, ValueError):
        return []
    if not isinstance(branches, list):
        return []
    return [b for b in branches if isinstance(b, str)]


def _check_pushed_head(mirror, branch: str, after: str) -> None:
    """GitError unless ``after`` is on ``branch`` as the repository's own remote has it.

    The mirror was just fetched from the tracked repository's remote, so its branches are
    the remote's. Anyone holding the webhook secret could otherwise name any commit the
    mirror holds (a fork's pull request head, fetched under ``refs/pull/``) as pushed to a
    branch: it would be recorded as the repository's own code, run without approval, and
    approve every commit waiting below it. The branch may have moved on since the push, so
    ``after`` must be its tip or one of the tip's ancestors.
    """
    tip = gitrepo.resolve(mirror, f"refs/heads/{branch}")
    if not gitrepo.has_commit(mirror, after):
        raise gitrepo.GitError(
            f"the push names {after[:10]}, which the repository's remote does not hold"
        )
    if not gitrepo.is_ancestor(mirror, after, tip):
        raise gitrepo.GitError(
            f"the push names {after[:10]}, which is not on {branch!r} in the repository's "
            f"remote (its tip is {tip[:10]}): nothing was run"
        )


def _approve_pushed(repository: Repository, mirror, payload: dict, branch: str) -> list[Commit]:
    """Approve the commits waiting for approval that this push put on a branch.

    Only someone with write access pushes to the repository's branches: merging a pull
    request from outside (or pushing its commits) vouches for them as an approval would.
    """
    pusher = payload.get("pusher")
    name = str(pusher.get("name") or "")[:60] if isinstance(pusher, dict) else ""
    by = f"push to {branch[:80]}" + (f" by {name}" if name else "")
    waiting = (
        set(Commit.objects.for_repository(repository).awaiting_approval())
        | set(Commit.objects.for_repository(repository).with_runs_awaiting_approval())
    )
    if not waiting:
        return []
    after, before = payload["after"], str(payload.get("before") or "")
    if HEX.match(before) and before.strip("0") and gitrepo.has_commit(mirror, before):
        # What the push put on the branch, in one git call however many commits wait
        # (unapproved heads of closed pull requests pile up over the years).
        pushed = set(gitrepo.new_commits(mirror, before, after))
        merged = [commit for commit in waiting if commit.sha in pushed]
    else:
        # A new branch: everything it holds is new to it.
        merged = [commit for commit in waiting if gitrepo.is_ancestor(mirror, commit.sha, after)]
    merged.sort(key=lambda commit: commit.pk)
    for commit in merged:
        actions.approve_commit(commit, by=by)
    return merged


def _from_fork(pull: dict) -> bool:
    head_repo = (pull.get("head") or {}).get("repo")
    base_repo = (pull.get("base") or {}).get("repo")
    if not isinstance(head_repo, dict) or not isinstance(base_repo, dict):
        # GitHub sends null for a deleted fork: nothing says it is ours.
        return head_repo is None or base_repo is None
    return head_repo.get("full_name") != base_repo.get("full_name")


def _process_pull_request(repository: Repository, payload: dict) -> str:
    pull = payload["pull_request"]
    number = payload["number"]
    if payload.get("action") == "closed":
        merged = pull.get("merged") is True
        if actions.close_pull_request(repository, number=number, merged=merged) is None:
            raise NothingToRun(f"#{number} was closed; it was never run here")
        return f"#{number} {'merged' if merged else 'closed'}"
    mirror = mirror_of(repository)
    head_sha = pull["head"]["sha"]
    if not gitrepo.has_commit(mirror, head_sha):
        # A fork's head is reachable through GitHub's pull/N/head ref.
        gitrepo.fetch(mirror, f"pull/{number}/head")
    base = gitrepo.merge_base(mirror, pull["base"]["sha"], head_sha)
    user = pull.get("user") if isinstance(pull.get("user"), dict) else {}
    association = str(pull.get("author_association", ""))[:50]
    from_fork = _from_fork(pull)
    trusted = repository.trusts(author_association=association, from_fork=from_fork)
    outside = set() if trusted else _outside_of_pull_request(repository, mirror, head_sha)
    base_commit = record_history(repository, mirror, base, pull["base"]["ref"])
    head_commit = record_history(
        repository, mirror, head_sha, pull["head"]["ref"], outside=outside
    )
    pull_request = actions.record_pull_request(
        repository, number=number, title=str(pull.get("title", ""))[:500],
        url=str(pull.get("html_url", ""))[:500], head_ref=pull["head"]["ref"],
        head_sha=head_sha, base_ref=pull["base"]["ref"], base_sha=base,
        author=str(user.get("login", ""))[:200], author_association=association,
        from_fork=from_fork,
    )
    base_run, _ = actions.ensure_run(base_commit, trigger="pull_request-base")
    # The commit decides: from outside and not approved, its run waits (as any other run
    # of it does); approved once, or the repository's own, it goes.
    head_run, started = actions.ensure_run(
        head_commit, trigger="pull_request", pull_request=pull_request
    )
    waiting = " (waiting for a maintainer's approval)" if head_run.awaits_approval else ""
    return (
        f"#{number}: {'started' if started else 'already had'} run {head_run.pk} of "
        f"{head_commit.short_sha}{waiting}; base {base_commit.short_sha} has run {base_run.pk}"
    )


def _outside_of_pull_request(repository: Repository, mirror, head_sha: str) -> set[str]:
    """What an untrusted pull request brings: its head, and the head's recent first parents
    on no branch or tag (the commits of a fork). A head the repository itself pushed before
    (a run triggered by that push) is its own code: a pull request naming it from outside
    cannot make its runs wait."""
    outside = set(gitrepo.unmerged(mirror, [head_sha], HISTORY_DEPTH))
    pushed = Run.objects.filter(
        repository=repository, commit__sha=head_sha, trigger="push"
    ).exists()
    if not pushed:
        outside.add(head_sha)
    return outside
