"""What the API answers to find things: pull requests with their latest status, and search
(``/api/pull-requests/``, ``/api/search/?q=``), as the repositories and search pages show
them."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import search
from dashboard.api_params import enum_param
from dashboard.models import Commit, Model, PullRequest, Run

#: What ``state=`` keeps of the pull requests.
PULL_REQUEST_STATES = ("open", "closed", "all")


class LatestRunSerializer(serializers.ModelSerializer):
    commit_sha = serializers.CharField(source="commit.sha", read_only=True)
    status_text = serializers.CharField(read_only=True)
    page_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Run
        fields = ["id", "status", "status_text", "commit_sha", "created_at", "page_url"]


class WithLatestRuns:
    """A viewset whose rows are annotated with ``latest_run_id``: each page of them (or the
    one row) gets its ``latest_run`` from one query."""

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:
            search.attach_latest_runs(page)
        return page

    def get_object(self):
        row = super().get_object()
        search.attach_latest_runs([row])
        return row


class PullRequestSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    state = serializers.ChoiceField(
        choices=["open", "merged", "closed"], read_only=True,
        help_text="as GitHub's last delivery said; open until one says it was closed",
    )
    latest_run = LatestRunSerializer(
        read_only=True, allow_null=True, help_text="the newest run of its head; null while none"
    )
    page_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = PullRequest
        fields = [
            "id", "repository", "number", "title", "state", "author", "head_ref", "head_sha",
            "base_ref", "base_sha", "url", "updated_at", "closed_at", "latest_run", "page_url",
        ]
        extra_kwargs = {"url": {"help_text": "the pull request on GitHub"}}


@extend_schema_view(list=extend_schema(
    parameters=[
        OpenApiParameter("repository", str, description="repository name"),
        OpenApiParameter("state", str, enum=list(PULL_REQUEST_STATES),
                         description="default: open"),
    ]
))
class PullRequestViewSet(WithLatestRuns, viewsets.ReadOnlyModelViewSet):
    """Pull requests, open ones first (newest number first), each with its latest run."""

    serializer_class = PullRequestSerializer

    def get_queryset(self):
        params = self.request.query_params
        pulls = PullRequest.objects.select_related("repository").with_latest_run()
        if self.action == "list":
            state = enum_param(params, "state", PULL_REQUEST_STATES) or "open"
            if state == "open":
                pulls = pulls.open()
            elif state == "closed":
                pulls = pulls.filter(closed_at__isnull=False)
            if params.get("repository"):
                pulls = pulls.filter(repository__name=params["repository"])
        return pulls.order_by("repository__name", "-number")


class _FoundModelSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    page_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Model
        fields = ["id", "repository", "name", "page_url"]


class _FoundCommitSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    title = serializers.CharField(source="search_title", read_only=True)
    latest_run = LatestRunSerializer(read_only=True, allow_null=True)

    class Meta:
        model = Commit
        fields = ["repository", "sha", "short_sha", "title", "branch", "committed_at",
                  "latest_run"]


def _found(name: str, serializer) -> serializers.Serializer:
    return inline_serializer(name, fields={
        "items": serializer(many=True),
        "more": serializers.BooleanField(help_text=f"more than {search.LIMIT} matched"),
    })


class SearchView(APIView):
    """Models (by name or repository name), commits (a SHA prefix of 4 or more hex digits,
    or words of their message) and pull requests (a number, ``#12``, words of the title or
    branch, a SHA prefix of the head), each at most ``LIMIT`` best first."""

    @extend_schema(
        parameters=[OpenApiParameter(
            "q", str, description=f"what to find; read up to {search.MAX_QUERY} characters "
            f"and {search.MAX_WORDS} words, control characters as spaces"
        )],
        responses=inline_serializer("Search", fields={
            "query": serializers.CharField(help_text="the query as read"),
            "truncated": serializers.BooleanField(help_text="the query was cut"),
            "models": _found("FoundModels", _FoundModelSerializer),
            "commits": _found("FoundCommits", _FoundCommitSerializer),
            "pull_requests": _found("FoundPullRequests", PullRequestSerializer),
        }),
    )
    def get(self, request):
        found = search.search(request.query_params.get("q", ""))
        return Response({
            "query": found.query.text,
            "truncated": found.query.truncated,
            "models": _page(found.models, _FoundModelSerializer),
            "commits": _page(found.commits, _FoundCommitSerializer),
            "pull_requests": _page(found.pull_requests, PullRequestSerializer),
        })


def _page(found: search.Found, serializer) -> dict:
    return {"items": serializer(found.items, many=True).data, "more": found.more}
