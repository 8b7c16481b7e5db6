"""``POST /api/runs``: CI without webhooks triggers a run with an API token.

    curl -X POST https://peakwatch.example/api/runs \\
         -H "Authorization: Bearer pw_..." -H "Content-Type: application/json" \\
         -d '{"repository": "models", "sha": "3f2a...", "branch": "main"}'

``sha`` or ``branch`` (or both) names the commit. A commit Peakwatch already knows starts at
once and the answer names its run (``run``, ``run_url`` to poll in this API). Anything else
is resolved in the repository's mirror by a task on the ``peakwatch`` queue (git can be
slow): the answer is ``resolving`` with a run request (``request``, ``poll_url``, also the
``Location`` header) that CI polls until it is ``resolved`` and names the run, or ``failed``
and says why (an unknown branch or sha). Where tasks run in process (no broker), the request
is resolved before the answer, which then names the run as well. A branch is looked up among
the repository's branches only.

A token lets CI start runs, not approve code: a commit from outside (the head of a pull
request the repository does not trust, or a commit on none of its branches and tags) that
no maintainer approved gets a run that waits for approval, as its pull request's run does,
and the answer says so (``awaiting-approval``). The run is held, not refused, so CI need not
ask again once a maintainer approves; asking again while it waits names the same run.

Tokens are created with ``manage.py create_api_token NAME --repository REPO`` (or, only
when asked for, ``--all-repositories``) and stored as SHA-256 hashes; a token for one
repository cannot start runs of another.
"""

from __future__ import annotations

import re

from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import actions, json_bodies
from dashboard.actions.runs import BRANCH
from dashboard.api import CommitAlertSerializer, run_alerts
from dashboard.models import Commit, Repository, Run, RunRequest

# The same patterns (and BRANCH) are the OpenAPI schema's, so what the schema allows, the
# view accepts.
NAME = r"^[-a-zA-Z0-9_]{1,100}$"
SHA = r"^[0-9a-fA-F]{7,40}$"


class TriggerRunRequest(serializers.Serializer):
    repository = serializers.RegexField(NAME, help_text="the repository's name")
    sha = serializers.RegexField(SHA, required=False, help_text="a commit sha, 7 to 40 hex digits")
    branch = serializers.RegexField(
        BRANCH, required=False,
        help_text="a branch name (no '..'); with no sha, the branch's head is run",
    )
    rerun = serializers.BooleanField(
        required=False, default=False,
        help_text="run the commit again even where a run of it already succeeded or is under "
        "way (by default the answer is that run, with attached true)",
    )


class TriggeredRun(serializers.Serializer):
    status = serializers.CharField(help_text="the run's status, or 'resolving'")
    run = serializers.IntegerField(required=False, help_text="the run, when the commit is known")
    run_url = serializers.CharField(
        required=False, help_text="the run in this API (GET /api/runs/{id}/), to poll"
    )
    url = serializers.CharField(required=False, help_text="the run's page")
    request = serializers.IntegerField(
        required=False, help_text="the run request, while the revision is being resolved"
    )
    poll_url = serializers.CharField(
        required=False,
        help_text="GET /api/run-requests/{id}/: 'resolving' until it names the run "
        "('resolved', with run and run_url) or says why there is none ('failed', with error)",
    )
    detail = serializers.CharField(
        required=False,
        help_text="why the run waits, when it waits for a maintainer; why there is no run, "
        "when the revision could not be resolved",
    )
    attached = serializers.BooleanField(
        required=False,
        help_text="true where the answer is a run of the commit that was already there (it "
        "succeeded or is under way) rather than a new one; ask with rerun for a new one",
    )
    commit = serializers.CharField(required=False)
    progress_url = serializers.CharField(required=False)
    repository = serializers.CharField(required=False)
    rev = serializers.CharField(required=False)
    branch = serializers.CharField(required=False)
    alerts = CommitAlertSerializer(
        many=True, required=False,
        help_text="the alerts already on the commit (an earlier run of it raised them); "
        "GET run_url once the run is finished for its own",
    )
    open_alerts = serializers.DictField(
        child=serializers.IntegerField(), required=False,
        help_text="open alerts (new or acknowledged) on the commit, per kind",
    )
    links = serializers.DictField(
        child=serializers.CharField(), required=False,
        help_text="the run's page, the run in the API and the commit's alerts page, absolute "
        "from PEAKWATCH_BASE_URL",
    )


class ApiError(serializers.Serializer):
    error = serializers.CharField()


def _error(status: int, message: str) -> Response:
    return Response({"error": message}, status=status)


class TriggerRun(APIView):
    """``POST /api/runs``, authenticated by its own bearer token (no session, no CSRF)."""

    authentication_classes: list = []
    permission_classes: list = []
    # The body is read as JSON whatever its Content-Type; the schema says JSON only.
    parser_classes = [json_bodies.BoundedJSONParser]

    @extend_schema(
        operation_id="runs_trigger",
        summary="Run a commit (CI without webhooks)",
        description=(
            "Send `sha` or `branch` (or both). A commit already recorded starts at once and "
            "the answer names its run (`run`, and `run_url` to poll). Anything else is "
            "resolved in the repository's mirror by a task: the answer says `resolving` and "
            "gives a run request to poll (`request`, `poll_url`, and the `Location` header), "
            "which turns `resolved` with the run's `run` and `run_url`, or `failed` with an "
            "`error`. A commit from outside that no maintainer approved (a pull request the "
            "repository does not trust) gets a run that waits for approval: status "
            "`awaiting-approval`. A commit with a run of its own (no pull request's) that "
            "succeeded or is under way answers with that run (200, `attached`: true) unless "
            "`rerun` is true: CI retries and parallel jobs wait on one run."
        ),
        request=TriggerRunRequest,
        auth=[{"ApiToken": []}],
        responses={
            200: OpenApiResponse(TriggeredRun, description="an earlier run of the commit"),
            202: TriggeredRun,
            400: OpenApiResponse(ApiError, description="malformed body or values"),
            401: OpenApiResponse(ApiError, description="no token, or an unknown one"),
            403: OpenApiResponse(ApiError, description="the token is for another repository"),
            404: OpenApiResponse(ApiError, description="no repository of that name"),
        },
        examples=[
            OpenApiExample(
                "a branch", value={"repository": "models", "branch": "main"}, request_only=True
            )
        ],
    )
    def post(self, request):
        scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token") or not raw.strip():
            return _error(401, "send an API token: Authorization: Bearer <token>")
        token = actions.use_api_token(raw.strip())
        if token is None:
            return _error(401, "unknown API token")
        try:
            body = json_bodies.loads(request.body or b"{}")
        except json_bodies.TooDeep as exc:
            return _error(400, str(exc))
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        problem = _invalid(body)
        if problem:
            return _error(400, problem)
        name, sha, branch = body["repository"], body.get("sha", "").lower(), body.get("branch", "")
        repository = Repository.objects.filter(name=name).first()
        if repository is None:
            return _error(404, f"no repository named {name!r}")
        if not token.allows(repository):
            return _error(403, "this token is for another repository")

        known = (
            list(Commit.objects.for_repository(repository).matching_sha(sha)[:2]) if sha else []
        )
        if len(known) == 1:
            earlier = None if body.get("rerun") else _earlier_run(known[0])
            if earlier is not None:
                # Several CI jobs of one commit (a retry, two workflows) wait on one run.
                return Response({**_described(earlier), "attached": True}, status=200)
            run = actions.start_run(known[0], trigger="api")
            return Response(_described(run), status=202)
        run_request = actions.request_run(repository, rev=sha or branch, branch=branch)
        # Where tasks run in process the request may be resolved already: name its run.
        run_request.refresh_from_db()
        poll = {"request": run_request.pk, "poll_url": run_request.get_absolute_url()}
        if run_request.run is not None:
            answer = {**_described(run_request.run), **poll}
        else:
            answer = {
                "status": RunRequest.Status.RESOLVING, **poll, "repository": repository.name,
                "rev": run_request.rev, "branch": branch,
            }
            if run_request.status == RunRequest.Status.FAILED:
                answer.update(status=RunRequest.Status.FAILED, detail=run_request.error)
        return Response(answer, status=202, headers={"Location": poll["poll_url"]})


trigger_run = TriggerRun.as_view()


def _earlier_run(commit) -> Run | None:
    """The run of ``commit`` a CI call attaches to: its newest run of the commit alone (not a
    pull request's, which compares with another base), where that succeeded or is under way.
    Where it failed or is partial, none: retrying a CI job retries the run."""
    newest = (
        Run.objects.filter(commit=commit, pull_request__isnull=True).order_by("-id").first()
    )
    if newest is None or newest.status in (Run.Status.FAILED, Run.Status.PARTIAL):
        return None
    return newest


def _invalid(body: dict) -> str:
    """Why ``body`` is not a valid request, or an empty string."""
    for key in ("repository", "sha", "branch"):
        if key in body and not isinstance(body[key], str):
            return "repository, sha and branch are strings"
    if "rerun" in body and not isinstance(body["rerun"], bool):
        return "rerun is true or false"
    if not body.get("repository"):
        return "name the repository"
    if not re.fullmatch(NAME, body["repository"]):
        return "a repository name is 1 to 100 letters, digits, '-' and '_'"
    if "sha" not in body and "branch" not in body:
        return "give a commit sha or a branch"
    if "sha" in body and not re.fullmatch(SHA, body["sha"]):
        return "sha must be 7 to 40 hex digits"
    if "branch" in body and not re.fullmatch(BRANCH, body["branch"]):
        return "that is not a branch name"
    return ""


def _described(run: Run) -> dict:
    described = {
        "status": run.status,
        "run": run.pk,
        "run_url": reverse("api:run-detail", args=[run.pk]),
        "url": run.get_absolute_url(),
        "commit": run.commit.sha,
        "progress_url": reverse("run-progress", args=[run.pk]),
        **run_alerts(run),
    }
    if run.awaits_approval:
        described["detail"] = (
            f"{run.commit.short_sha} is code from outside the repository (a pull request it "
            f"does not trust) that no maintainer has approved: the run waits for a "
            f"maintainer's approval on its page"
        )
    return described


def require_sha_or_branch(result, generator, request, public):
    """drf-spectacular postprocessing: a serializer cannot say "sha or branch, or both"."""
    schema = result.get("components", {}).get("schemas", {}).get("TriggerRunRequest")
    if schema is not None:
        schema["anyOf"] = [{"required": ["sha"]}, {"required": ["branch"]}]
    return result
