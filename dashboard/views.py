"""Server-rendered pages: the overview, a model's trend, a run, and artifact downloads."""

from __future__ import annotations

import functools
import io
import logging
import zipfile

from django.core.cache import cache
from django.db.models import Count, F, Q
from django.http import (
    FileResponse,
    HttpResponse,
    HttpResponseNotFound,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from dashboard import (
    compare,
    fragments,
    llm_breakdown,
    moe_forms,
    overview,
    queue,
    series_export,
    trends,
)
from dashboard.artifact_storage import ArtifactMissing
from dashboard.auth import is_maintainer
from dashboard.models import Artifact, Commit, Model, Result, Run, Series
from dashboard.served_artifacts import artifacts_of, missing_text, open_served
from dashboard.shape_curves import other_points, shape_curves
from dashboard.trends import TREND_CACHE_SECONDS, find_toolchain, trend
from planner.shapes import label_order

log = logging.getLogger(__name__)

RECENT_RUNS = 15
ZIP_CHUNK = 1 << 16
#: Bumped when a table the model page stores rendered changes its markup, so renderings
#: stored before are not served for the data's current version.
TREND_TABLES_FORMAT = 2
#: The entry of a result's zip that names the artifacts left out of it, and why.
MISSING_LIST = "MISSING.txt"


@require_GET
def home(request):
    """Open alerts first, then every model's newest figures per strategy and board."""
    maintainer = is_maintainer(request.user)
    stored = overview.stored_parts(alerts=not maintainer)
    # A maintainer's triage forms carry their CSRF token and this very address.
    alerts_html = (
        overview.open_alerts_html(request, maintainer=True, here=request.get_full_path())
        if maintainer else stored[overview.ALERTS]
    )
    return render(
        request,
        "dashboard/home.html",
        {
            # Both rendered by our own templates.
            "alerts_html": mark_safe(alerts_html),
            "overviews_html": mark_safe(stored[overview.TABLES]),
            "runs": Run.objects.with_commit().newest_first()[:RECENT_RUNS],
        },
    )


@require_GET
def model_trend_page(request, repository: str, model: str):
    model = get_object_or_404(
        # With how many models of its repository share its source (itself included), in the
        # same query: only a model listed twice has forms to set side by side.
        Model.objects.select_related("repository").annotate(
            same_source=Count(
                "repository__models", filter=Q(repository__models__source=F("source"))
            )
        ),
        repository__name=repository, name=model,
    )
    board = request.GET.get("board", "")
    branch = request.GET.get("branch", "")
    try:
        toolchain = find_toolchain(request.GET.get("toolchain", ""))
    except LookupError as unknown:
        # As the API answers: a toolchain the filter names that does not exist is not found.
        return HttpResponseNotFound(str(unknown))
    data = trend(model, board=board, branch=branch, toolchain=toolchain)
    opens = trends.opening(
        data, point=request.GET.get("point"), strategy=request.GET.get("strategy")
    )
    tables = functools.cache(
        lambda: _trend_tables(model, board=board, branch=branch, toolchain=toolchain)
    )
    if data.history_html and not (board or branch or toolchain):
        # Unfiltered, everything below the charts but the branch menu was stored with the
        # trend (its history) or beside it (these), for the trend's version.
        version = fragments.version_of(data.key, TREND_TABLES_FORMAT)
        parts = fragments.get_many({
            f"trend:{model.pk}:coverage": (version, lambda: tables()["coverage"]),
            f"trend:{model.pk}:latest": (version, lambda: tables()["latest"]),
        })
        coverage_html = parts[f"trend:{model.pk}:coverage"]
        latest_html = parts[f"trend:{model.pk}:latest"]
        history_html = data.history_html
    else:
        coverage_html, latest_html = tables()["coverage"], tables()["latest"]
        # The history table is most of the page's rendering: cached as HTML with the trend.
        flags = tables()["flags"]
        history_key = f"{data.key}:history:{int(flags[0])}{int(flags[1])}"
        history_html = data.history_html or (cache.get(history_key) if data.key else None)
        if history_html is None:
            history_html = trends.history_html(
                data.history, boards=flags[0], toolchains=flags[1]
            )
            if data.key:
                cache.set(history_key, history_html, TREND_CACHE_SECONDS)
    branches = Commit.objects.branch_names(model.repository)
    llm = llm_breakdown.breakdown(model, board=board, branch=branch, toolchain=toolchain)
    moe = moe_forms.forms(model, board=board, branch=branch, toolchain=toolchain)
    shapes = shape_curves(
        model, board=board, branch=branch, toolchain=toolchain, prefer=opens.line
    )
    return render(
        request,
        "dashboard/model_trend.html",
        {
            "shapes": shapes,
            "llm": llm,
            "moe": moe,
            "opening": opens,
            **_shape_chart_choices(shapes, opens, request.GET.get("curves", "")),
            "shapes_api_url": reverse("api:model-shapes", args=[model.pk])
            + (f"?{request.GET.urlencode()}" if request.GET else ""),
            "model": model,
            "repository": model.repository,
            # The API's cached bytes, embedded as they are (already escaped for a <script>).
            "trend_json": mark_safe(data.json.decode()),
            "has_series": not data.empty,
            "history": data.history,
            # Rendered by our own templates.
            "history_html": mark_safe(history_html),
            "coverage_html": mark_safe(coverage_html),
            "latest_html": mark_safe(latest_html),
            "board": board,
            "toolchain": toolchain,
            "branches": list(branches),
            "branch": branch,
            "api_url": reverse("api:model-trend", args=[model.pk])
            + (f"?{request.GET.urlencode()}" if request.GET else ""),
        },
    )


@require_GET
def series_csv(request, repository: str, model: str):
    """One series of the model as CSV, every commit: the rows ``/api/models/<id>/series/``
    serves, named by the same ``strategy``, ``board``, ``toolchain`` and ``point``."""
    model = get_object_or_404(
        Model.objects.select_related("repository"), repository__name=repository, name=model
    )
    params = request.GET
    try:
        line = series_export.find_series_named(model, params)
    except (series_export.UnknownSeries, series_export.AmbiguousSeries) as none:
        # As the API answers: several series fitting is no one series found.
        return HttpResponseNotFound(str(none), content_type="text/plain; charset=utf-8")
    rows = series_export.rows(line.key, branch=params.get("branch", ""))
    response = HttpResponse(
        "".join(series_export.csv_lines(rows)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{series_export.file_name(line)}"'
    return response


def _shape_chart_choices(shapes: dict | None, opens: trends.Opening, curves: str) -> dict:
    """What the "Memory by shape" chart opens on: one curve per commit of the strategy the
    page opens on (so the change the alert is about shows), else one per strategy at the
    newest commit; ``curves`` ("strategy" or "commit"), where the address names it, wins."""
    if shapes is None:
        return {}
    strategy = opens.strategy if opens.strategy in shapes["strategies"] else ""
    if curves not in ("strategy", "commit"):
        curves = "commit" if strategy else "strategy"
    return {"shape_curves": curves, "shape_strategy": strategy or shapes["best_strategy"]}


def _trend_tables(model: Model, *, board: str, branch: str, toolchain) -> dict:
    """The trend page's grid of boards and toolchains and its table of latest results, as
    HTML, and whether the lines shown differ by board and by toolchain (``flags``)."""
    # Every line of the model with its newest result: the table of latest results and the
    # board and toolchain choices come from this one query.
    lines = list(Series.objects.for_model(model).with_latest())
    shown = [
        line for line in lines
        if (not board or line.board.name == board)
        and (toolchain is None or line.toolchain_id == toolchain.pk)
    ]
    show_toolchains = len({line.toolchain_id for line in shown}) > 1
    latest = sorted(
        (line for line in shown if line.latest_result_id),
        key=lambda line: (
            line.board.name, line.toolchain.spec, line.strategy.name,
            label_order(line.shape_label),
        ),
    )
    for line in latest:
        line.export_query = series_export.query_of(line)
    context = {"board": board, "branch": branch, "toolchain": toolchain}
    return {
        "coverage": render_to_string(
            "dashboard/_trend_coverage.html",
            {**context, "coverage": _coverage(lines, board=board, toolchain=toolchain)},
        ),
        "latest": render_to_string(
            "dashboard/_trend_latest.html",
            {
                "latest": latest, "show_toolchains": show_toolchains,
                "csv_url": reverse("series-csv", args=[model.repository.name, model.name]),
                "json_url": reverse("api:model-series", args=[model.pk]),
            },
        ),
        "flags": (len({line.board_id for line in shown}) > 1, show_toolchains),
    }


def _coverage(lines: list[Series], *, board: str, toolchain) -> dict:
    """Which boards and toolchains the model has results for, as a grid the page links
    through: one row per toolchain, one cell per board, with its strategies and commits."""
    boards = sorted({line.board.name for line in lines})
    toolchains = sorted({line.toolchain for line in lines}, key=lambda t: t.spec)
    cells: dict[tuple[int, str], list[Series]] = {}
    for line in lines:
        cells.setdefault((line.toolchain_id, line.board.name), []).append(line)
    return {
        "boards": boards,
        "toolchains": toolchains,
        "rows": [
            {
                "toolchain": chain,
                "selected": toolchain is not None and chain.pk == toolchain.pk,
                "cells": [
                    {
                        "board": name,
                        # A strategy measured at several shape points is one strategy.
                        "strategies": len(
                            {line.strategy_id for line in cells.get((chain.pk, name), [])}
                        ),
                        "commits": max(
                            (line.commits for line in cells.get((chain.pk, name), [])), default=0
                        ),
                        "selected": name == board and toolchain is not None
                        and chain.pk == toolchain.pk,
                    }
                    for name in boards
                ],
            }
            for chain in toolchains
        ],
        # Worth showing once there is a choice to make.
        "choice": len(boards) > 1 or len(toolchains) > 1 or bool(board) or toolchain is not None,
    }


@require_GET
def run_detail(request, pk: int):
    run = get_object_or_404(Run.objects.with_commit().select_related("pull_request"), pk=pk)
    results = _results_of(run)
    sandboxes = _sandboxes_of(results)
    return render(
        request, "dashboard/run_detail.html",
        {
            "run": run, "results": results, "can_approve": is_maintainer(request.user),
            "sandboxes": sandboxes,
            "sandbox_reduced": any("reduced" in box for _, box in sandboxes),
            "waiting_on": queue.waiting_on(run),
        },
    )


@require_GET
def run_results(request, pk: int):
    """The results table alone, for the run page to refresh while the run goes on."""
    run = get_object_or_404(Run.objects.with_commit(), pk=pk)
    return render(
        request, "dashboard/_run_results.html", {"run": run, "results": _results_of(run)}
    )


def _results_of(run: Run) -> list[Result]:
    """The run's results, each with ``parent`` (the same series at the parent commit) set."""
    results = sorted(
        Result.objects.for_run(run)
        .with_related()
        # A run compiled with several toolchains has rows alike but for it: the page names it.
        .select_related("toolchain"),
        # Shape points by their values (seq=64 before seq=512), which their text is not.
        key=lambda result: (
            result.model.name, label_order(result.shape_label), result.strategy.name,
            result.board.name, result.toolchain.spec, result.pk,
        ),
    )
    parents = _parent_results(run.commit)
    for result in results:
        result.parent = parents.get(result.series_key)
    return results


def _sandboxes_of(results: list[Result]) -> list[tuple[str, str]]:
    """Each board of the run, with the sandbox its worker compiled in ("full", "reduced", or
    both where workers differed), as each Result recorded it."""
    modes: dict[str, set[str]] = {}
    for result in results:
        box = (result.environment or {}).get("sandbox")
        if isinstance(box, str) and box:
            modes.setdefault(result.board.name, set()).add(box)
    return [(board, ", ".join(sorted(boxes))) for board, boxes in sorted(modes.items())]


def _parent_results(commit: Commit) -> dict[tuple[int, int, int, int, str], Result]:
    """The newest successful result of every series at ``commit``'s parent; one query."""
    if not commit.parent_sha:
        return {}
    return (
        Result.objects.filter(
            commit__repository_id=commit.repository_id, commit__sha=commit.parent_sha
        )
        .select_related("commit")
        .newest_by_series()
    )


@require_GET
def run_progress(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    return JsonResponse(
        {
            "id": run.pk,
            "status": run.status,
            "status_text": run.status_text,
            "failed_results": run.failed_results,
            "is_finished": run.is_finished,
            "done": run.progress_done,
            "total": run.progress_total,
            "percent": run.progress_percent,
            "error": run.error,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "log": run.log,
            "results_url": reverse("run-results", args=[run.pk]),
        }
    )


@require_GET
def artifact_download(request, pk: int):
    artifact = get_object_or_404(Artifact, pk=pk)
    try:
        handle = open_served(artifact)
    except ArtifactMissing as missing:
        # The row outlived its file, or names one not copied to the bucket yet: the body
        # says which, and what to do, to a visitor and to a script alike.
        return _missing_response([missing_text(artifact, missing)], missing.temporary)
    # Read through the artifact storage and streamed, from a bucket too: access rules
    # apply to every download, and the bucket need not be reachable by visitors.
    response = FileResponse(
        handle, as_attachment=True, filename=artifact.download_name,
        content_type=artifact.content_type
    )
    # A bucket's stream cannot be measured by seeking: its File says its size.
    size = getattr(handle, "size", None)
    if not response.has_header("Content-Length") and size is not None:
        response["Content-Length"] = size
    return response


@require_GET
def result_plan(request, pk: int):
    """One result's plan: buffers as rectangles over time and address, the peak instant,
    the tensors live there, and plan diffs against its neighbours."""
    result = get_object_or_404(Result.objects.with_related(), pk=pk)
    plan, plan_missing = compare.read_plan(result)
    peak = (plan or {}).get("peak") or result.details.get("peak") or {}
    parents = _parent_results(result.commit)
    parent = parents.get(result.series_key)
    siblings = (
        Result.objects.for_run(result.run_id)
        .succeeded()
        # The other strategies at the same shape point: another point is another need.
        .filter(
            model_id=result.model_id, board_id=result.board_id,
            shape_label=result.shape_label,
        )
        .exclude(pk=result.pk)
        .select_related("strategy")
        .order_by("strategy__name")
    )
    tensors = (plan or {}).get("tensors") or []
    return render(
        request,
        "dashboard/result_plan.html",
        {
            "result": result,
            "plan": plan,
            "plan_missing": plan_missing,
            "artifacts": artifacts_of(result),
            "timeline": {
                "tensors": tensors,
                "peak": peak,
                "arena_bytes": (plan or {}).get("arena_bytes"),
            } if plan else None,
            "placed": sum(1 for t in tensors if t.get("offset") is not None),
            "breakdown": compare.Breakdown.of(result),
            "peak": peak,
            "parent": parent,
            "siblings": siblings,
            "points": other_points(result),
        },
    )


class _Chunks(io.RawIOBase):
    """A write-only stream that hands what was written to a generator, chunk by chunk."""

    def __init__(self):
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


def _missing_response(lines: list[str], temporary: bool = False) -> HttpResponse:
    return HttpResponse(
        "\n".join(lines) + "\n", status=503 if temporary else 404,
        content_type="text/plain; charset=utf-8",
    )


def _zipped(opened: list[tuple[Artifact, object]], missing: list[str]):
    stream = _Chunks()
    try:
        with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            if missing:
                archive.writestr(MISSING_LIST, "\n".join(missing) + "\n")
                yield stream.drain()
            for artifact, handle in opened:
                with handle, archive.open(artifact.name, "w", force_zip64=True) as entry:
                    while chunk := handle.read(ZIP_CHUNK):
                        entry.write(chunk)
                        yield stream.drain()
        yield stream.drain()
    finally:
        # A client that leaves mid-zip leaves the files not yet sent open.
        for _, handle in opened:
            handle.close()


@require_GET
def result_artifacts_zip(request, pk: int):
    """Every artifact of one result in one zip, compressed as it is sent."""
    result = get_object_or_404(
        Result.objects.select_related("model", "strategy", "board", "commit"), pk=pk
    )
    artifacts = artifacts_of(result)
    if not artifacts:
        return _missing_response([f"result {result.pk} has no artifacts"])
    # Opened before the first byte is sent: a file that is missing is named in the zip, or
    # answers 404 when none is there, rather than making an empty zip.
    opened, missing, temporary = [], [], False
    for artifact in artifacts:
        try:
            opened.append((artifact, open_served(artifact)))
        except ArtifactMissing as gone:
            log.warning("artifact %s (%s) has no file; left out of the zip: %s",
                        artifact.pk, artifact.name, gone.why)
            missing.append(missing_text(artifact, gone))
            temporary = temporary or gone.temporary
    if not opened:
        return _missing_response(missing, temporary)
    # Named for the shape point too: every point's artifacts would otherwise share a name.
    name = f"{result.file_stem}-artifacts"
    response = StreamingHttpResponse(_zipped(opened, missing), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}.zip"'
    return response
