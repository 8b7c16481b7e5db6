"""Regression tracking as a service: what webhooks, the API and commands ask for.

Views parse requests and call these; Celery tasks of the ``peakwatch`` queue call them for
the git work a request must not wait for. Everything here changes state through
:mod:`dashboard.actions`.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings

from dashboard import actions, gitrepo
from dashboard.models import Commit, Repository, Run, WebhookDelivery

log = logging.getLogger(__name__)

Outcome = WebhookDelivery.Outcome
#: How many first-parent ancestors of a pushed head are recorded, so it has a baseline.
HISTORY_DEPTH = 20
HEX = re.compile(r"^[0-9a-f]{7,40}$")


def mirror_of(repository: Repository):
    return gitrepo.mirror(repository.clone_url, settings.PEAKWATCH["WORK_DIR"])


def record_history(repository: Repository, mirror, rev: str, branch: str) -> Commit:
    """Record ``rev`` and its recent first parents (so it has a baseline); return ``rev``'s."""
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
        )
    return head


def run_revision(
    repository: Repository, rev: str, *, branch: str = "", trigger: str = "api"
) -> Run | None:
    """Resolve ``rev`` in the mirror, record it (with its recent history) and run it."""
    try:
        mirror = mirror_of(repository)
        sha = gitrepo.resolve(mirror, rev)
        commit = record_history(repository, mirror, sha, branch or ("" if HEX.match(rev) else rev))
    except gitrepo.GitError as exc:
        log.warning("cannot run %s of %s: %s", rev, repository, exc)
        return None
    return actions.start_run(commit, trigger=trigger)


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
    except gitrepo.GitError as exc:
        log.warning("delivery %s failed: %s", delivery.guid, exc)
        actions.close_delivery(delivery, outcome=Outcome.FAILED, detail=str(exc))
        return
    actions.close_delivery(delivery, outcome=Outcome.PROCESSED, detail=detail)


def _process_push(repository: Repository, payload: dict) -> str:
    branch = payload["ref"].removeprefix("refs/heads/")
    mirror = mirror_of(repository)
    for pushed in payload.get("commits", []):
        # Commits of the push that are not first parents of its head are recorded too.
        if gitrepo.has_commit(mirror, pushed["id"]):
            record_history(repository, mirror, pushed["id"], branch)
    head = record_history(repository, mirror, payload["after"], branch)
    run, started = actions.ensure_run(head, trigger="push")
    return f"{'started' if started else 'already had'} run {run.pk} of {head.short_sha}"


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
    mirror = mirror_of(repository)
    head_sha = pull["head"]["sha"]
    if not gitrepo.has_commit(mirror, head_sha):
        # A fork's head is reachable through GitHub's pull/N/head ref.
        gitrepo.fetch(mirror, f"pull/{number}/head")
    base = gitrepo.merge_base(mirror, pull["base"]["sha"], head_sha)
    base_commit = record_history(repository, mirror, base, pull["base"]["ref"])
    head_commit = record_history(repository, mirror, head_sha, pull["head"]["ref"])
    user = pull.get("user") if isinstance(pull.get("user"), dict) else {}
    association = str(pull.get("author_association", ""))[:50]
    from_fork = _from_fork(pull)
    pull_request = actions.record_pull_request(
        repository, number=number, title=str(pull.get("title", ""))[:500],
        url=str(pull.get("html_url", ""))[:500], head_ref=pull["head"]["ref"],
        head_sha=head_sha, base_ref=pull["base"]["ref"], base_sha=base,
        author=str(user.get("login", ""))[:200], author_association=association,
        from_fork=from_fork,
    )
    base_run, _ = actions.ensure_run(base_commit, trigger="pull_request-base")
    trusted = repository.trusts(author_association=association, from_fork=from_fork)
    head_run, started = actions.ensure_run(
        head_commit, trigger="pull_request", pull_request=pull_request, approved=trusted
    )
    waiting = "" if trusted else " (waiting for a maintainer's approval)"
    return (
        f"#{number}: {'started' if started else 'already had'} run {head_run.pk} of "
        f"{head_commit.short_sha}{waiting}; base {base_commit.short_sha} has run {base_run.pk}"
    )
