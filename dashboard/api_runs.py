"""``POST /api/runs``: CI without webhooks triggers a run with an API token.

    curl -X POST https://peakwatch.example/api/runs \\
         -H "Authorization: Bearer pw_..." -H "Content-Type: application/json" \\
         -d '{"repository": "models", "sha": "3f2a...", "branch": "main"}'

``sha`` or ``branch`` (or both) names the commit. A commit Peakwatch already knows starts at
once and the answer names its run; anything else is resolved in the repository's mirror by
a task on the ``peakwatch`` queue (git can be slow), and the answer says it was queued.
Tokens are created with ``manage.py create_api_token`` and stored as SHA-256 hashes.
"""

from __future__ import annotations

import json
import re

from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard import actions, queue
from dashboard.models import Commit, Repository, Run

HEX = re.compile(r"^[0-9a-f]{7,40}$")
BRANCH = re.compile(r"^[\w./-]{1,200}$")


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@csrf_exempt
@require_POST
def trigger_run(request):
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() not in ("bearer", "token") or not raw.strip():
        return _error(401, "send an API token: Authorization: Bearer <token>")
    token = actions.use_api_token(raw.strip())
    if token is None:
        return _error(401, "unknown API token")
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return _error(400, "the body is not JSON")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    name, sha, branch = (body.get(k, "") for k in ("repository", "sha", "branch"))
    if not all(isinstance(v, str) for v in (name, sha, branch)):
        return _error(400, "repository, sha and branch are strings")
    sha = sha.lower()
    if not name:
        return _error(400, "name the repository")
    if not sha and not branch:
        return _error(400, "give a commit sha or a branch")
    if sha and not HEX.match(sha):
        return _error(400, "sha must be 7 to 40 hex digits")
    if branch and (not BRANCH.match(branch) or branch.startswith("-") or ".." in branch):
        return _error(400, "that is not a branch name")
    repository = Repository.objects.filter(name=name).first()
    if repository is None:
        return _error(404, f"no repository named {name!r}")
    if not token.allows(repository):
        return _error(403, "this token is for another repository")

    known = list(Commit.objects.for_repository(repository).matching_sha(sha)[:2]) if sha else []
    if len(known) == 1:
        run = actions.start_run(known[0], trigger="api")
        return JsonResponse(_described(run), status=202)
    rev = sha or branch
    transaction.on_commit(lambda: queue.send(queue.TRIGGER_RUN, repository.pk, rev, branch, "api"))
    return JsonResponse(
        {"status": "resolving", "repository": repository.name, "rev": rev, "branch": branch},
        status=202,
    )


def _described(run: Run) -> dict:
    return {
        "status": run.status,
        "run": run.pk,
        "url": run.get_absolute_url(),
        "commit": run.commit.sha,
        "progress_url": f"/runs/{run.pk}/progress.json",
    }
