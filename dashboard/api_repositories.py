"""``POST /api/repositories``: ``manage.py track`` over HTTP, for whoever sets up tracking
from a script.

    curl -u admin -X POST https://peakwatch.example/api/repositories \\
         -H "Content-Type: application/json" \\
         -d '{"name": "models", "url": "https://github.com/acme/models.git",
              "github": "acme/models"}'

Only a user who may add repositories (a superuser, or one given ``dashboard.add_repository``)
may: a clone URL names what every worker fetches and runs, sandboxed. The user signs in with
HTTP Basic (over TLS) or a session; repeated wrong passwords lock the name and the client
address out for a while (``dashboard/sign_in_throttle.py``), in private mode as in public.
API tokens never may: they let CI start runs of code
already tracked, nothing more. The answer carries the webhook URL and secret, as the command
prints them; tracking a name again changes its settings and keeps its secret.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import actions, json_bodies
from dashboard.actions.runs import GITHUB_NAME
from dashboard.api_runs import BRANCH, NAME, ApiError
from dashboard.models import Repository
from dashboard.sign_in_throttle import ThrottledBasicAuthentication
from dashboard.tracking import webhook_url

GITHUB = GITHUB_NAME.pattern


class TrackRepositoryRequest(serializers.Serializer):
    name = serializers.RegexField(NAME, help_text="a short name: letters, digits, '-', '_'")
    url = serializers.CharField(max_length=500, help_text=(
        "what git clones: https://..., ssh://..., git://... or host:path; a local path or "
        "file:// only where PEAKWATCH_GIT_PROTOCOLS names file"
    ))
    branch = serializers.RegexField(BRANCH, required=False, help_text="the default branch (main)")
    trust = serializers.ChoiceField(
        Repository.Trust.values, required=False,
        help_text="whose pull requests run without approval (collaborators)",
    )
    github = serializers.RegexField(
        GITHUB, required=False, help_text="OWNER/NAME on GitHub: webhooks, statuses, comments"
    )


class TrackedRepository(serializers.Serializer):
    name = serializers.CharField()
    default_branch = serializers.CharField()
    trust = serializers.CharField()
    github = serializers.CharField(help_text="OWNER/NAME on GitHub, or empty")
    webhook_url = serializers.CharField()
    webhook_secret = serializers.CharField()
    accepts_github_deliveries = serializers.BooleanField(
        help_text="false until a GitHub delivery can name this repository: give `github`"
    )


class TrackRepository(APIView):
    authentication_classes = [ThrottledBasicAuthentication, SessionAuthentication]
    permission_classes: list = []
    parser_classes = [json_bodies.BoundedJSONParser]

    def handle_exception(self, exc):
        # A wrong password or a missing CSRF token is DRF's {"detail": ...}; this API
        # answers every error as {"error": ...}, as its schema says.
        response = super().handle_exception(exc)
        if isinstance(response.data, dict) and "detail" in response.data:
            response.data = {"error": str(response.data["detail"])}
        return response

    @extend_schema(
        operation_id="repositories_track",
        summary="Track a repository (manage.py track)",
        request=TrackRepositoryRequest,
        auth=[{"basicAuth": []}, {"cookieAuth": []}],
        responses={
            200: TrackedRepository,
            400: OpenApiResponse(ApiError, description="malformed body or values"),
            401: OpenApiResponse(ApiError, description="not signed in"),
            403: OpenApiResponse(ApiError, description="may not add repositories"),
            429: OpenApiResponse(
                ApiError,
                description="too many failed sign-ins for this name or from this address: "
                "wait Retry-After seconds",
            ),
        },
    )
    def post(self, request):
        if not request.user.is_authenticated:
            return Response({"error": "sign in (HTTP Basic) as a maintainer"}, status=401,
                            headers={"WWW-Authenticate": 'Basic realm="peakwatch"'})
        if not request.user.has_perm("dashboard.add_repository"):
            return Response({"error": "you may not add repositories"}, status=403)
        try:
            body = json_bodies.loads(request.body or b"{}")
        except json_bodies.TooDeep as exc:
            return Response({"error": str(exc)}, status=400)
        except ValueError:
            return Response({"error": "the body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return Response({"error": "the body must be a JSON object"}, status=400)
        form = TrackRepositoryRequest(data=body)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            return Response({"error": f"{field}: {errors[0]}"}, status=400)
        data = form.validated_data
        branch = data.get("branch", "main")
        problem = actions.why_not_trackable(
            data["name"], data["url"], branch, data.get("github", "")
        )
        if problem:
            return Response({"error": problem}, status=400)
        repository = actions.track_repository(
            data["name"], data["url"], branch, trust=data.get("trust"),
            github_repository=data.get("github"),
        )
        return Response({
            "name": repository.name,
            "default_branch": repository.default_branch,
            "trust": repository.trust,
            "github": repository.github_repository,
            "webhook_url": webhook_url(repository),
            "webhook_secret": repository.webhook_secret,
            "accepts_github_deliveries": actions.accepts_github_deliveries(repository),
        })


track_repository = TrackRepository.as_view()
