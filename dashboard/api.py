"""The read-only JSON API under ``/api/``: serializers, viewsets and the trend payload.

Every list is built from one query per table it shows (``select_related`` for the rows a
result points at, ``prefetch_related`` for its artifacts), so its cost does not grow with
the page size.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import Count, Q
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from dashboard import commit_alerts, queue, series_export
from dashboard.api_find import LatestRunSerializer, WithLatestRuns
from dashboard.api_params import ID_SCHEMA, MAX_BIGINT, enum_param, int_param
from dashboard.compare import Breakdown
from dashboard.models import (
    Alert,
    Artifact,
    Commit,
    Model,
    Repository,
    Result,
    Run,
    RunRequest,
    Toolchain,
)
from dashboard.notifications import absolute
from dashboard.shape_curves import COMMITS, shape_curves
from dashboard.trends import find_toolchain, trend


class RepositorySerializer(serializers.ModelSerializer):
    model_count = serializers.IntegerField(read_only=True)
    open_pull_requests = serializers.IntegerField(
        read_only=True, help_text="pull requests GitHub has not said were closed"
    )
    latest_run = LatestRunSerializer(
        read_only=True, allow_null=True, help_text="its newest run; null while none"
    )

    class Meta:
        model = Repository
        # Not the clone URL (may embed a token) nor the webhook secret.
        fields = [
            "id", "name", "default_branch", "created_at", "model_count", "open_pull_requests",
            "latest_run",
        ]


class ModelSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    page_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Model
        fields = ["id", "repository", "name", "source", "description", "page_url"]


class CommitSerializer(serializers.ModelSerializer):
    class Meta:
        model = Commit
        fields = [
            "sha", "short_sha", "title", "message", "author", "branch", "parent_sha",
            "committed_at",
        ]


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(source="progress_done")
    total = serializers.IntegerField(source="progress_total")
    percent = serializers.IntegerField(source="progress_percent")


class RunSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    commit = CommitSerializer(read_only=True)
    progress = ProgressSerializer(source="*", read_only=True)
    is_finished = serializers.BooleanField(read_only=True)
    status_text = serializers.CharField(
        read_only=True,
        help_text="the status with how many results failed, where any did: "
        "'partial: 3 of 12 failed', 'failed: none of 12 succeeded'",
    )
    failed_results = serializers.IntegerField(
        read_only=True, help_text="results that failed, counted when the run finished"
    )
    page_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Run
        fields = [
            "id", "repository", "commit", "status", "status_text", "failed_results",
            "is_finished", "trigger", "progress", "created_at", "started_at", "finished_at",
            "error", "page_url",
        ]


class ArtifactSerializer(serializers.ModelSerializer):
    download_url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = Artifact
        fields = ["id", "name", "size", "content_type", "download_url"]


class ToolchainSerializer(serializers.ModelSerializer):
    class Meta:
        model = Toolchain
        fields = ["id", "spec", "label", "tvm_version", "tvm_git_hash"]
        extra_kwargs = {
            "spec": {"help_text": "a pip requirement, a wheel or a TVM source folder; "
                     "empty: the worker's own environment"},
        }


class ResultSerializer(serializers.ModelSerializer):
    commit_sha = serializers.CharField(source="commit.sha", read_only=True)
    repository = serializers.CharField(source="model.repository.name", read_only=True)
    model = serializers.SlugRelatedField(slug_field="name", read_only=True)
    strategy = serializers.SlugRelatedField(slug_field="name", read_only=True)
    board = serializers.SlugRelatedField(slug_field="name", read_only=True)
    toolchain = ToolchainSerializer(read_only=True)
    kernel_workspace_bytes = serializers.SerializerMethodField(
        help_text="bytes TVM's workspace pool holds for kernel temporaries, outside the plan "
        "and inside planned_bytes; null where the result did not record it"
    )
    kernel_workspace_source = serializers.SerializerMethodField(
        help_text="how kernel_workspace_bytes was had: counted from the built kernels, "
        "measured, or estimated from the kernels before lowering"
    )
    reused_from = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True,
        help_text="the result whose figures these are, copied because nothing the compile "
        "reads changed (the compile cache); null when compiled and measured for this run",
    )
    cache_key = serializers.SerializerMethodField(
        help_text="what a later commit's compile cache compares to reuse this result: "
        "\"read\" (the files and folders its import looked at, as the worker's view of the "
        "checkout saw them), \"whole tree\" (every file, with why in cache_key_reason: no "
        "view on that worker, or a record past its limits), or \"manifest entry\" (a zoo "
        "model of a suite with no code of its own reads nothing of the repository)"
    )
    cache_key_reason = serializers.SerializerMethodField(
        help_text="why a result is keyed by the whole tree; empty otherwise"
    )
    board_figures = serializers.SerializerMethodField(
        help_text="what the board itself measured, where it measures (a micro board: "
        "ram_bytes, flash_bytes, stack_bytes, arena_bytes, instructions, over_capacity "
        "against memory_capacity and flash_capacity); null for a host-measured board"
    )
    llm = serializers.SerializerMethodField(
        help_text="an LLM deployment's memory at this point: params_bytes, kv_cache "
        "(formula_bytes from its pages, allocated_bytes as measured), temporary_bytes (the "
        "worst function's planned bytes, which this result's figures are), worst_function, "
        "total_bytes, tvm_estimate_bytes and functions (each function's planned_bytes, "
        "lower_bound_bytes, measured_peak_bytes, latency_ms); null for any other model"
    )
    artifacts = ArtifactSerializer(many=True, read_only=True)
    shape_point = serializers.DictField(
        child=serializers.IntegerField(), read_only=True,
        help_text="the input shape measured, by symbol ({\"h\": 256}); {} for a model "
        "without a shape axis",
    )
    peak_formula = serializers.DictField(
        read_only=True,
        help_text="the strategy's peak as a formula of the symbols and where it was checked; "
        "{\"missing\": why} where the planner gave none; {} for results older than that "
        "reason, or without a shape axis",
    )

    class Meta:
        model = Result
        fields = [
            "id", "run", "commit_sha", "repository", "model", "strategy", "board", "toolchain",
            "shape_point", "shape_label", "reserved_at_bound_bytes", "peak_formula",
            "status", "planned_bytes", "intermediate_bytes", "kernel_workspace_bytes",
            "kernel_workspace_source", "output_bytes", "measured_peak_bytes",
            "board_ram_bytes", "lower_bound_bytes", "latency_median_ms", "latency_p90_ms",
            "outputs_match", "max_abs_diff", "compile_seconds", "proven_optimal",
            "tvm_version", "target", "reused_from", "cache_key", "cache_key_reason",
            "board_figures", "llm", "error", "created_at", "artifacts",
        ]
        extra_kwargs = {
            "shape_label": {"help_text": "the shape point as pages name it (\"h=256,w=256\"); "
                            "empty for a model without a shape axis"},
            "board_ram_bytes": {
                "help_text": "the RAM a micro board's image uses (static RAM and the stack's "
                "measured high-water mark), the figure its trend and \"ram\" alerts follow; "
                "null on a board that does not measure it"
            },
            "reserved_at_bound_bytes": {
                "help_text": "what TVM's planner reserves when the model is built once for "
                "the whole range (symbols at their bound); null where not measured"
            },
        }

    @extend_schema_field({"type": "integer", "minimum": 0, "nullable": True})
    def get_kernel_workspace_bytes(self, result) -> int | None:
        return Breakdown.of(result).workspace

    @extend_schema_field(
        {"type": "string", "enum": ["measured", "estimate"], "nullable": True}
    )
    def get_kernel_workspace_source(self, result) -> str | None:
        return Breakdown.of(result).workspace_source or None

    @extend_schema_field({"type": "string", "enum": ["read", "whole tree", "manifest entry"]})
    def get_cache_key(self, result) -> str:
        reads = result.reads or {}
        if reads.get("observed_by"):
            return "read"
        zoo = str((result.details or {}).get("model_source", "")).startswith("zoo:")
        return "manifest entry" if zoo and not reads else "whole tree"

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_board_figures(self, result) -> dict | None:
        return (result.details or {}).get("board") or None

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_llm(self, result) -> dict | None:
        return (result.details or {}).get("llm") or None

    def get_cache_key_reason(self, result) -> str:
        reads = result.reads or {}
        if "whole_tree" in reads:
            return str(reads["whole_tree"])
        if reads and not reads.get("observed_by"):
            # Kept by the job's own process, before the worker observed reads itself.
            return "its record of what it read was the repository's process's own"
        return ""


class RepositoryViewSet(WithLatestRuns, viewsets.ReadOnlyModelViewSet):
    """Tracked repositories, each with its newest run and how many pull requests are open
    (``/api/pull-requests/?repository=NAME`` lists them)."""

    serializer_class = RepositorySerializer
    queryset = (
        Repository.objects.with_latest_run()
        .annotate(
            model_count=Count("models", distinct=True),
            open_pull_requests=Count(
                "pull_requests", filter=Q(pull_requests__closed_at__isnull=True), distinct=True
            ),
        )
        .order_by("name")
    )


class ModelViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = ModelSerializer

    def get_queryset(self):
        models = Model.objects.select_related("repository").order_by("repository__name", "name")
        repository = self.request.query_params.get("repository")
        if repository:
            models = models.filter(repository__name=repository)
        return models

    @extend_schema(
        parameters=[
            OpenApiParameter("board", str, description="only results on this board"),
            OpenApiParameter("branch", str, description="only commits on this branch"),
            OpenApiParameter(
                "toolchain", str,
                description="only results compiled with this toolchain (its id or spec);"
                " default: every toolchain the model has results for",
            ),
        ],
        responses=inline_serializer(
            "Trend",
            fields={
                "model": serializers.DictField(),
                "board": serializers.CharField(allow_null=True),
                "branch": serializers.CharField(allow_null=True),
                "toolchain": serializers.DictField(allow_null=True),
                "max_points": serializers.IntegerField(),
                "point_fields": serializers.ListField(child=serializers.CharField()),
                "commits": serializers.ListField(child=serializers.DictField()),
                "series": serializers.ListField(child=serializers.DictField()),
                "alerts": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    @action(detail=True)
    def trend(self, request, pk=None):
        """Planned bytes, measured peak and latency over commits, one series per strategy
        (and board), at most ``max_points`` points each. ``commits`` lists each commit drawn
        once, oldest first (sha, short, title, author, committed_at, run_url); a point is an
        array of ``point_fields`` whose first item indexes ``commits``, with a seventh item,
        the point's run page, where it is not its commit's ``run_url``."""
        model = self.get_object()
        try:
            toolchain = find_toolchain(request.query_params.get("toolchain", ""))
        except LookupError as unknown:
            # A toolchain is a resource the filter names: one that does not exist is not found.
            raise NotFound({"toolchain": str(unknown)}) from unknown
        payload = trend(
            model,
            board=request.query_params.get("board", ""),
            branch=request.query_params.get("branch", ""),
            toolchain=toolchain,
        )
        # The cached bytes as they are: no parsing or re-serialising per request.
        return HttpResponse(payload.json, content_type="application/json")

    @extend_schema(
        parameters=[
            OpenApiParameter("strategy", str, description="the series' strategy"),
            OpenApiParameter("board", str, description="the series' board"),
            OpenApiParameter("toolchain", str, description="the series' toolchain (its id or "
                             "spec)"),
            OpenApiParameter("point", str, description="the series' shape point "
                             "(\"seq=64\"; empty: the model has no shape axis)"),
            OpenApiParameter("branch", str, description="only commits on this branch"),
        ],
        responses=inline_serializer(
            "SeriesExport",
            fields={
                "model": serializers.DictField(),
                "strategy": serializers.CharField(),
                "board": serializers.CharField(),
                "toolchain": serializers.DictField(),
                "shape_label": serializers.CharField(allow_blank=True),
                "branch": serializers.CharField(allow_null=True),
                "columns": serializers.ListField(child=serializers.CharField()),
                "rows": serializers.ListField(child=serializers.DictField()),
                "csv_url": serializers.CharField(),
            },
        ),
    )
    @action(detail=True)
    def series(self, request, pk=None):
        """One series of the model (a strategy on a board with a toolchain at a shape
        point) at every commit, oldest first: each row has ``columns`` in their order, the
        figures the trend charts draw (of a commit measured twice, the newest successful
        result) and a commit whose results all failed with its status and error. A name
        may be left out where only one series fits; where several do, 404 says which
        names tell them apart. ``csv_url`` is the same export as CSV."""
        model = self.get_object()
        params = request.query_params
        try:
            line = series_export.find_series_named(model, params)
        except (series_export.UnknownSeries, series_export.AmbiguousSeries) as none:
            # Several series fitting is no one series found: the answer names what tells
            # them apart.
            raise NotFound({"series": str(none)}) from none
        branch = params.get("branch", "")
        query = series_export.query_of(line)
        if branch:
            query += "&" + urlencode({"branch": branch})
        csv_url = reverse("series-csv", args=[model.repository.name, model.name])
        return Response({
            **series_export.describe(line),
            "branch": branch or None,
            "columns": list(series_export.COLUMNS),
            "rows": list(series_export.rows(line.key, branch=branch)),
            "csv_url": f"{csv_url}?{query}",
        })

    @extend_schema(
        parameters=[
            OpenApiParameter("board", str, description="only results on this board; default: "
                             "the board most measured at the newest commit"),
            OpenApiParameter("branch", str, description="only commits on this branch"),
            OpenApiParameter("toolchain", str, description="only results compiled with this "
                             "toolchain (its id or spec)"),
            OpenApiParameter("commits", {"type": "integer", "minimum": 1,
                                         "maximum": COMMITS * 4},
                             description=f"how many of the newest commits "
                             f"to draw one curve each for (1 to {COMMITS * 4}; "
                             f"default {COMMITS})"),
        ],
        responses=inline_serializer(
            "ShapeCurves",
            fields={
                "model": serializers.DictField(),
                "board": serializers.CharField(),
                "boards": serializers.ListField(child=serializers.CharField()),
                "toolchain": serializers.CharField(),
                "measures": serializers.ListField(child=serializers.CharField()),
                "points": serializers.ListField(child=serializers.DictField()),
                "commits": serializers.ListField(child=serializers.DictField()),
                "strategies": serializers.ListField(child=serializers.CharField()),
                "best_strategy": serializers.CharField(allow_null=True),
                "curves": serializers.ListField(child=serializers.DictField()),
                "commit_curves": serializers.DictField(),
                "reserved_at_bound": serializers.ListField(
                    child=serializers.IntegerField(allow_null=True)
                ),
                "overallocation": serializers.ListField(child=serializers.DictField()),
                "formulas": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    @action(detail=True)
    def shapes(self, request, pk=None):
        """Memory against input shape, for a model with a shape axis: per point (ordered by
        its values) each strategy's planned intermediates and total at the newest commit,
        each commit's curve per strategy, TVM's reservation at the bound and the
        over-allocation it makes against the best plan, and the peak formulas. 404 for a
        model never measured at a shape point."""
        model = self.get_object()
        params = request.query_params
        try:
            toolchain = find_toolchain(params.get("toolchain", ""))
        except LookupError as unknown:
            # A toolchain is a resource the filter names: one that does not exist is not found.
            raise NotFound({"toolchain": str(unknown)}) from unknown
        commits = int_param(params, "commits", minimum=1, maximum=COMMITS * 4)
        payload = shape_curves(
            model, board=params.get("board", ""), branch=params.get("branch", ""),
            toolchain=toolchain, commits=commits or COMMITS,
        )
        if payload is None:
            raise NotFound("no results of this model at a shape point")
        return Response(payload)


@extend_schema(
    parameters=[
        OpenApiParameter("repository", str, description="repository name"),
        OpenApiParameter("status", str, enum=Run.Status.values),
    ]
)
class RunViewSet(viewsets.ReadOnlyModelViewSet):
    def get_queryset(self):
        runs = Run.objects.with_commit().newest_first()
        repository = self.request.query_params.get("repository")
        if repository:
            runs = runs.filter(repository__name=repository)
        status = enum_param(self.request.query_params, "status", Run.Status.values)
        if status:
            runs = runs.filter(status=status)
        return runs

    def get_serializer_class(self):
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer


@extend_schema(
    parameters=[
        OpenApiParameter("model", str, description="model id, or name (with repository)"),
        OpenApiParameter("repository", str, description="repository name"),
        OpenApiParameter("strategy", str, description="strategy name"),
        OpenApiParameter("board", str, description="board name"),
        OpenApiParameter("commit", str, description="commit sha or a prefix of it"),
        OpenApiParameter(
            "shape", str,
            description="only results at this shape point (\"h=256,w=256\"); empty: only "
            "results of models without a shape axis",
        ),
        OpenApiParameter("run", ID_SCHEMA, description="run id"),
        OpenApiParameter("status", str, enum=Result.Status.values),
    ]
)
class ResultViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = ResultSerializer

    def get_queryset(self):
        params = self.request.query_params
        results = Result.objects.with_related().select_related("toolchain").chronological()
        if params.get("repository"):
            results = results.in_repository_named(params["repository"])
        if params.get("model"):
            model = params["model"]
            if model.isascii() and model.isdigit() and int(model) <= MAX_BIGINT:
                results = results.for_model(int(model))
            else:
                results = results.for_model_named(model)
        if params.get("strategy"):
            results = results.for_strategy_named(params["strategy"])
        if params.get("board"):
            results = results.on_board_named(params["board"])
        if params.get("commit"):
            results = results.for_commit_sha(params["commit"])
        if "shape" in params:
            results = results.at_shape(params["shape"])
        run = int_param(params, "run", minimum=1, maximum=MAX_BIGINT)
        if run is not None:
            results = results.for_run(run)
        status = enum_param(params, "status", Result.Status.values)
        if status:
            results = results.filter(status=status)
        return results




class AlertSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    commit_sha = serializers.CharField(source="commit.sha", read_only=True)
    model = serializers.SlugRelatedField(slug_field="name", read_only=True)
    strategy = serializers.SlugRelatedField(slug_field="name", read_only=True)
    board = serializers.SlugRelatedField(slug_field="name", read_only=True)
    toolchain = ToolchainSerializer(read_only=True)
    result = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="the result that got worse"
    )
    baseline = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="the result it is compared with"
    )
    baseline_commit_sha = serializers.CharField(source="baseline.commit.sha", read_only=True)
    change = serializers.FloatField(read_only=True, help_text="value - baseline_value")
    relative_change = serializers.FloatField(
        read_only=True, allow_null=True, help_text="change / baseline_value"
    )
    is_open = serializers.BooleanField(read_only=True)
    is_toolchain_change = serializers.BooleanField(
        read_only=True,
        help_text="the baseline is another toolchain at the same commit: a new TVM made "
        "this series worse, not a commit",
    )
    compare_url = serializers.CharField(read_only=True)
    plan_diff_url = serializers.CharField(read_only=True)

    class Meta:
        model = Alert
        fields = [
            "id", "repository", "commit_sha", "run", "result", "baseline",
            "baseline_commit_sha", "model", "strategy", "board", "toolchain", "shape_label",
            "kind",
            "baseline_value", "value", "change", "relative_change", "p_value", "tolerance",
            "state", "is_open", "is_toolchain_change", "created_at", "updated_at",
            "compare_url", "plan_diff_url",
        ]
        extra_kwargs = {
            "baseline_value": {"help_text": "planned bytes, or median latency in ms"},
            "tolerance": {"help_text": "the tolerance the change went past and where it was "
                          "set: peakwatch.toml at the commit (its [suite], the model, the "
                          "point), a series' admin row, or the repository's settings; empty "
                          "for alerts raised before tolerances were recorded"},
            "p_value": {"help_text": "Mann-Whitney U p-value of a latency alert"},
            "shape_label": {"help_text": "the shape point that got worse (\"h=256,w=256\"); "
                            "empty for a model without a shape axis"},
        }


class CommitAlertSerializer(AlertSerializer):
    """An alert as a run's answer carries it, with what CI prints and links to."""

    series = serializers.SerializerMethodField(
        help_text="model / strategy / board / toolchain, and ' at <point>' where the alert "
        "is at a shape point, as `run --wait` prints it"
    )
    change_text = serializers.SerializerMethodField(
        help_text="before → after, the exact change and the percent: "
        "\"781.2 KiB → 789.2 KiB (+8,192 B, +1.0%)\""
    )
    links = serializers.SerializerMethodField(
        help_text="the comparison and the plan diff, absolute from PEAKWATCH_BASE_URL"
    )

    class Meta(AlertSerializer.Meta):
        fields = [*AlertSerializer.Meta.fields, "series", "change_text", "links"]

    def get_series(self, alert) -> str:
        return commit_alerts.series_name(alert)

    def get_change_text(self, alert) -> str:
        return commit_alerts.movement(alert)

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_links(self, alert) -> dict:
        return {
            "compare": absolute(alert.compare_url()),
            "plan_diff": absolute(alert.plan_diff_url()),
        }


def run_alerts(run: Run) -> dict:
    """What a run's answer says about its commit's alerts (``GET /api/runs/<id>/`` and
    ``POST /api/runs``): every alert in series order, the open ones counted per kind (what
    a CI job fails on), and absolute links."""
    alerts = commit_alerts.commit_alerts(run.commit)
    return {
        "alerts": CommitAlertSerializer(alerts, many=True).data,
        "open_alerts": commit_alerts.open_counts(alerts),
        "links": commit_alerts.links(run),
    }


class RunDetailSerializer(RunSerializer):
    alerts = serializers.SerializerMethodField(
        help_text="the alerts on the run's commit, whichever of its runs raised them, "
        "ordered by series and shape point (by value)"
    )
    open_alerts = serializers.SerializerMethodField(
        help_text="open alerts (new or acknowledged) on the commit, per kind: "
        "{\"bytes\": 2, \"ram\": 0, \"latency\": 0}"
    )
    links = serializers.SerializerMethodField(
        help_text="the run's page, this run in the API and the commit's alerts page, "
        "absolute from PEAKWATCH_BASE_URL (paths where it is set empty)"
    )
    waiting_on = serializers.SerializerMethodField(
        help_text="the queues this unfinished run needs that no worker consumes now "
        "(\"peakwatch\" to be planned, \"board.NAME\" to be measured): it waits until a "
        "worker started with -Q on them runs; empty when none is missing or that cannot be "
        "known (tasks in process)"
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields, "log", "alerts", "open_alerts", "links", "waiting_on",
        ]

    def to_representation(self, run):
        # One read of the commit's alerts serves the three fields below.
        self._commit_alerts = run_alerts(run)
        return super().to_representation(run)

    @extend_schema_field(CommitAlertSerializer(many=True))
    def get_alerts(self, run) -> list:
        return self._commit_alerts["alerts"]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
    def get_open_alerts(self, run) -> dict:
        return self._commit_alerts["open_alerts"]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_links(self, run) -> dict:
        return self._commit_alerts["links"]

    def get_waiting_on(self, run) -> list[str]:
        return queue.waiting_on(run)


@extend_schema(
    parameters=[
        OpenApiParameter("repository", str, description="repository name"),
        OpenApiParameter("commit", str, description="commit sha or a prefix of it"),
        OpenApiParameter("state", str, enum=Alert.State.values),
        OpenApiParameter("kind", str, enum=Alert.Kind.values),
    ]
)
class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """Series that got worse at a commit, newest first, with what they are compared with."""

    serializer_class = AlertSerializer

    def get_queryset(self):
        params = self.request.query_params
        alerts = (
            Alert.objects.with_related().select_related("baseline__toolchain")
            .order_by("-created_at", "-id")
        )
        if params.get("repository"):
            alerts = alerts.in_repository_named(params["repository"])
        if params.get("commit"):
            alerts = alerts.for_commit_sha(params["commit"])
        state = enum_param(params, "state", Alert.State.values)
        if state:
            alerts = alerts.filter(state=state)
        kind = enum_param(params, "kind", Alert.Kind.values)
        if kind:
            alerts = alerts.filter(kind=kind)
        return alerts


class RunRequestSerializer(serializers.ModelSerializer):
    repository = serializers.SlugRelatedField(slug_field="name", read_only=True)
    run = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="the run, once the revision is resolved"
    )
    run_url = serializers.SerializerMethodField(help_text="the run in this API, to poll next")
    page_url = serializers.SerializerMethodField(help_text="the run's page")
    poll_url = serializers.CharField(source="get_absolute_url", read_only=True)
    waiting_on = serializers.SerializerMethodField(
        help_text="while resolving: [\"peakwatch\"] where no worker consumes the queue that "
        "looks revisions up, so none will until one is started; else empty"
    )

    class Meta:
        model = RunRequest
        fields = [
            "id", "status", "repository", "rev", "branch", "run", "run_url", "page_url",
            "error", "created_at", "resolved_at", "poll_url", "waiting_on",
        ]
        extra_kwargs = {
            "status": {"help_text": "resolving; resolved: `run` is its run; failed: `error` "
                       "says why the revision could not be run"},
        }

    @extend_schema_field({"type": "string", "nullable": True})
    def get_run_url(self, request) -> str | None:
        return reverse("api:run-detail", args=[request.run_id]) if request.run_id else None

    def get_waiting_on(self, request) -> list[str]:
        if request.status != RunRequest.Status.RESOLVING or request.run_id:
            return []
        return queue.unconsumed([queue.TRACKING_QUEUE]) or []

    @extend_schema_field({"type": "string", "nullable": True})
    def get_page_url(self, request) -> str | None:
        return reverse("run-detail", args=[request.run_id]) if request.run_id else None


@extend_schema(
    parameters=[OpenApiParameter("repository", str, description="repository name")]
)
class RunRequestViewSet(viewsets.ReadOnlyModelViewSet):
    """What became of each ``POST /api/runs`` that named a revision Peakwatch had to look
    up: CI polls one until it is ``resolved`` (then ``run_url`` is its run) or ``failed``."""

    serializer_class = RunRequestSerializer

    def get_queryset(self):
        requests = RunRequest.objects.select_related("repository").order_by("-created_at", "-id")
        repository = self.request.query_params.get("repository")
        if repository:
            requests = requests.filter(repository__name=repository)
        return requests
