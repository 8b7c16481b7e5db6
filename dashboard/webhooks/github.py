"""GitHub webhooks: ``POST /webhooks/github/<repository>`` (or ``/webhooks/github``).

Which secret verifies a delivery? The repository must be known before the body may be
trusted, and the body must not be read for its repository name before it is trusted. So:

- ``/webhooks/github/<name>`` (recommended): the URL names the Peakwatch repository; its
  ``webhook_secret`` must verify ``X-Hub-Signature-256``. Unknown name: 404; wrong signature:
  401.
- ``/webhooks/github``: the signature is checked against the secret of every repository that
  has one (constant-time each); the repositories it verifies for are the candidates, and
  only then is the payload parsed to pick the one whose ``github_repository`` or clone URL
  matches ``repository.full_name``. No repository with a secret: 404; no secret verifies: 401.

Either way the payload must name the repository exactly (``github_repository`` equal to
``repository.full_name``, or the clone URL equal to one of the payload's URLs): one that
names another repository, or none, is 404, never taken for the verified one.

Only after verification is the body parsed (JSON, or GitHub's form encoding with a
``payload`` field): a malformed one is 400, and so is one nested deeper than
:data:`dashboard.json_bodies.MAX_DEPTH` (measured before parsing, which recurses). A
delivery already accepted (same ``X-GitHub-Delivery``) is answered 200 and changes
nothing. Accepted ``push`` and ``pull_request`` deliveries are queued (202) for the
tracking service, which does the git work in a Celery task
(:func:`dashboard.tracking.process_delivery`). Every verified request is logged as a
:class:`WebhookDelivery` with its outcome; requests refused before verification (anyone
can send them) are logged once a minute per kind and repository, and counted in between.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qs

from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard import actions, json_bodies, queue
from dashboard.models import Repository, WebhookDelivery

log = logging.getLogger(__name__)

Outcome = WebhookDelivery.Outcome
SHA = re.compile(r"^[0-9a-f]{40}$")
ZERO_SHA = "0" * 40
PULL_REQUEST_ACTIONS = ("opened", "synchronize", "reopened")


class Malformed(ValueError):
    """The verified body is not a payload we understand."""


def _answer(delivery: WebhookDelivery) -> JsonResponse:
    return JsonResponse(
        {"delivery": delivery.pk, "outcome": delivery.outcome, "detail": delivery.detail},
        status=delivery.status_code,
    )


@csrf_exempt
@require_POST
def receive(request, repository: str | None = None):
    guid = request.headers.get("X-GitHub-Delivery", "")[:100]
    event = request.headers.get("X-GitHub-Event", "")[:100]
    signature = request.headers.get("X-Hub-Signature-256", "")

    def reject(outcome, status, detail, repo=None):
        log.info("github delivery %s (%s) rejected: %s", guid, event, detail)
        return _answer(actions.log_delivery(
            outcome=outcome, status_code=status, guid=guid, event=event, repository=repo,
            detail=detail,
        ))

    def refuse_unverified(outcome, status, detail, repo=None):
        # Anyone can send these: logged at most once a window, the rest counted.
        log.info("github delivery %s (%s) refused: %s", guid, event, detail)
        return _answer(actions.log_rejected_delivery(
            outcome=outcome, status_code=status, guid=guid, event=event, repository=repo,
            detail=detail,
        ))

    try:
        body = request.body
    except RequestDataTooBig:
        return refuse_unverified(
            Outcome.MALFORMED, 413, "the payload is larger than this server accepts"
        )

    if repository is not None:
        repo = Repository.objects.filter(name=repository).first()
        if repo is None:
            return refuse_unverified(
                Outcome.UNKNOWN_REPOSITORY, 404, f"no repository named {repository[:100]!r}"
            )
        if not repo.verifies_signature(body, signature):
            return refuse_unverified(
                Outcome.BAD_SIGNATURE, 401, _why_unverified(repo, signature), repo
            )
        candidates = [repo]
    else:
        with_secret = list(Repository.objects.exclude(webhook_secret=""))
        if not with_secret:
            return refuse_unverified(
                Outcome.UNKNOWN_REPOSITORY, 404, "no repository accepts webhooks"
            )
        candidates = [r for r in with_secret if r.verifies_signature(body, signature)]
        if not candidates:
            return refuse_unverified(
                Outcome.BAD_SIGNATURE, 401, "no repository's secret verifies it"
            )

    # Verified: from here on the body may be read.
    try:
        payload = _parse_body(body, request.content_type)
        outcome, status, action, detail = _triage(event, payload)
    except Malformed as exc:
        return reject(Outcome.MALFORMED, 400, str(exc), candidates[0])
    repo = _pick_repository(candidates, payload)
    if repo is None:
        return reject(Outcome.UNKNOWN_REPOSITORY, 404,
                      "the payload does not name a repository tracked here", candidates[0])

    if not guid:
        return reject(Outcome.MALFORMED, 400, "the X-GitHub-Delivery header is missing", repo)
    delivery = actions.accept_delivery(
        guid=guid, event=event, action=action, repository=repo,
        payload=payload if outcome == Outcome.QUEUED else None,
        outcome=outcome, status_code=status, detail=detail,
    )
    if delivery is None:
        return _answer(actions.log_delivery(
            outcome=Outcome.DUPLICATE, status_code=200, guid=guid, event=event, action=action,
            repository=repo, detail="already accepted; nothing new was recorded",
        ))
    if outcome == Outcome.QUEUED:
        transaction.on_commit(
            lambda: queue.send(queue.PROCESS_GITHUB_DELIVERY, delivery.pk)
        )
    return _answer(delivery)


def _why_unverified(repo: Repository, signature: str) -> str:
    if not repo.webhook_secret:
        return "this repository has no webhook secret: set one before sending webhooks"
    if not signature:
        return "the X-Hub-Signature-256 header is missing"
    return "X-Hub-Signature-256 does not match the body"


def _parse_body(body: bytes, content_type: str) -> dict:
    try:
        text = body.decode()
        if content_type == "application/x-www-form-urlencoded":
            text = parse_qs(text).get("payload", [""])[0]
        payload = json_bodies.loads(text)
    except json_bodies.TooDeep as exc:
        raise Malformed(str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise Malformed(f"the body is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise Malformed("the payload is not a JSON object")
    if _holds_nul(payload):
        # PostgreSQL's jsonb cannot store \u0000: refused here rather than failing later.
        raise Malformed("the payload contains a NUL character")
    return payload


def _holds_nul(value) -> bool:
    # A loop over a stack, not recursion: however deep a payload, this never overflows.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _pick_repository(candidates: list[Repository], payload: dict):
    """The candidate the verified payload names exactly, or None.

    Whichever secret verified it, a delivery is taken only for a repository it names: a
    payload about another repository (or about none) is never run against this one.
    """
    about = payload.get("repository")
    if not isinstance(about, dict):
        return None
    return next((r for r in candidates if _names(r, about)), None)


def _names(repo: Repository, about: dict) -> bool:
    """Whether the payload's ``repository`` object is ``repo``: its GitHub name when set,
    else its clone URL, equal (not merely a suffix) to one of the payload's URLs."""
    full_name = about.get("full_name")
    if not isinstance(full_name, str) or not full_name:
        return False
    if repo.github_repository:
        return repo.github_repository.lower() == full_name.lower()
    ours = _url_place(repo.clone_url)
    urls = [about.get(key) for key in ("clone_url", "ssh_url", "git_url", "html_url", "svn_url")]
    theirs = {_url_place(url) for url in urls if isinstance(url, str) and url}
    theirs.add(f"github.com/{full_name.lower()}")
    return bool(ours) and ours in theirs


def _url_place(url: str) -> str:
    """``host/owner/name`` of a git URL (https, ssh, scp-like ``git@host:owner/name``,
    git), lowercased, without credentials, port or ``.git``; "" for a local path."""
    url = url.strip().lower()
    if "://" in url:
        rest = url.split("://", 1)[1]
    elif re.match(r"^[^/@:]+@[^/:]+:", url):
        rest = url.split("@", 1)[1].replace(":", "/", 1)
    else:
        return ""
    host, _, path = rest.partition("/")
    host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    path = path.strip("/").removesuffix(".git")
    return f"{host}/{path}" if host and path else ""


def _triage(event: str, payload: dict) -> tuple[str, int, str, str]:
    """(outcome, HTTP status, action, detail) for a verified payload; Malformed if bad."""
    if event == "ping":
        return Outcome.PING, 200, "", f"pong: {payload.get('zen', '')}"[:200]
    if event == "push":
        ref = _string(payload, "ref")
        after = _sha(payload, "after", allow_zero=True)
        commits = payload.get("commits", [])
        if not isinstance(commits, list) or not all(
            isinstance(c, dict) and SHA.match(str(c.get("id", ""))) for c in commits
        ):
            raise Malformed("push.commits must be a list of commits with 40-hex ids")
        if payload.get("deleted") or after == ZERO_SHA:
            return Outcome.IGNORED, 200, "", f"{ref} was deleted"
        if not ref.startswith("refs/heads/"):
            return Outcome.IGNORED, 200, "", f"{ref} is not a branch"
        return Outcome.QUEUED, 202, "", f"run {after[:10]} on {ref.removeprefix('refs/heads/')}"
    if event == "pull_request":
        action = _string(payload, "action")
        number = payload.get("number")
        if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
            raise Malformed("pull_request.number must be a positive integer")
        pull = payload.get("pull_request")
        if not isinstance(pull, dict):
            raise Malformed("pull_request must be an object")
        for side in ("head", "base"):
            if not isinstance(pull.get(side), dict):
                raise Malformed(f"pull_request.{side} must be an object")
            _sha(pull[side], "sha", label=f"pull_request.{side}.sha")
            _string(pull[side], "ref", label=f"pull_request.{side}.ref")
        if action == "closed":
            # Nothing runs; the pull request leaves the list of open ones.
            return Outcome.QUEUED, 202, action, f"close #{number}"
        if action not in PULL_REQUEST_ACTIONS:
            return Outcome.IGNORED, 200, action, f"pull request action {action!r} is not run"
        return Outcome.QUEUED, 202, action, f"run #{number} at {pull['head']['sha'][:10]}"
    return Outcome.IGNORED, 200, "", f"event {event or '(none)'!r} is not handled"


def _string(data: dict, key: str, label: str | None = None) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{label or key} must be a non-empty string")
    return value


def _sha(data: dict, key: str, *, allow_zero: bool = False, label: str | None = None) -> str:
    value = _string(data, key, label)
    if not SHA.match(value) or (value == ZERO_SHA and not allow_zero):
        raise Malformed(f"{label or key} must be a 40-hex commit sha")
    return value
