"""Server-rendered pages: the overview, a model's trend, a run, and artifact downloads."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from dashboard.api import model_trend
from dashboard.models import Artifact, Board, Model, Repository, Result, Run

RECENT_RUNS = 15


@dataclass
class LatestRow:
    """One model on one board, with its newest result under each strategy."""

    model: Model
    board: Board
    results: list[Result | None] = field(default_factory=list)


@dataclass
class RepositoryOverview:
    repository: Repository
    strategies: list[str]
    rows: list[LatestRow]
    untested_models: list[Model]


@require_GET
def home(request):
    latest = Result.objects.latest_per_series().select_related(
        "model", "strategy", "board", "commit", "run"
    )
    by_repository: dict[int, dict[tuple[int, int], dict[str, Result]]] = {}
    for result in latest:
        series = by_repository.setdefault(result.model.repository_id, {})
        series.setdefault((result.model_id, result.board_id), {})[result.strategy.name] = result
    overviews = []
    for repository in Repository.objects.prefetch_related("models"):
        series = by_repository.get(repository.pk, {})
        strategies = sorted({name for cells in series.values() for name in cells})
        models = {model.pk: model for model in repository.models.all()}
        rows = []
        for (model_id, _), cells in series.items():
            board = next(iter(cells.values())).board
            rows.append(
                LatestRow(models[model_id], board, [cells.get(name) for name in strategies])
            )
        rows.sort(key=lambda row: (row.model.name, row.board.name))
        tested = {row.model.pk for row in rows}
        overviews.append(
            RepositoryOverview(
                repository,
                strategies,
                rows,
                [model for model in models.values() if model.pk not in tested],
            )
        )
    runs = Run.objects.with_commit().newest_first()[:RECENT_RUNS]
    return render(request, "dashboard/home.html", {"overviews": overviews, "runs": runs})


@require_GET
def model_trend_page(request, repository: str, model: str):
    model = get_object_or_404(
        Model.objects.select_related("repository"), repository__name=repository, name=model
    )
    board = request.GET.get("board", "")
    trend = model_trend(model, board=board)
    boards = Board.objects.filter(results__model=model).distinct().order_by("name")
    latest = (
        Result.objects.for_model(model)
        .latest_per_series()
        .select_related("strategy", "board", "commit", "run")
        .order_by("board__name", "strategy__name")
    )
    return render(
        request,
        "dashboard/model_trend.html",
        {
            "model": model,
            "repository": model.repository,
            "trend": trend,
            "history": _history_rows(trend),
            "boards": boards,
            "board": board,
            "latest": latest,
            "api_url": reverse("api:model-trend", args=[model.pk]),
        },
    )


def _history_rows(trend: dict) -> dict:
    """The trend as a table, newest commit first: the chart's data without JavaScript."""
    series = trend["series"]
    commits: dict[str, dict] = {}
    for index, line in enumerate(series):
        previous = None
        for point in line["points"]:
            row = commits.setdefault(
                point["commit_sha"], {"point": point, "cells": [None] * len(series)}
            )
            change = None
            if previous is not None and None not in (point["planned_bytes"], previous):
                change = point["planned_bytes"] - previous
            row["cells"][index] = {"planned_bytes": point["planned_bytes"], "change": change}
            previous = point["planned_bytes"]
    rows = sorted(commits.values(), key=lambda row: row["point"]["committed_at"], reverse=True)
    return {"columns": series, "rows": rows}


@require_GET
def run_detail(request, pk: int):
    run = get_object_or_404(Run.objects.with_commit(), pk=pk)
    return render(
        request, "dashboard/run_detail.html", {"run": run, "results": _results_of(run)}
    )


@require_GET
def run_results(request, pk: int):
    """The results table alone, for the run page to refresh while the run goes on."""
    run = get_object_or_404(Run, pk=pk)
    return render(
        request, "dashboard/_run_results.html", {"run": run, "results": _results_of(run)}
    )


def _results_of(run: Run):
    return (
        Result.objects.for_run(run)
        .with_related()
        .order_by("model__name", "strategy__name", "board__name")
    )


@require_GET
def run_progress(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    return JsonResponse(
        {
            "id": run.pk,
            "status": run.status,
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
        handle = artifact.file.open("rb")
    except (FileNotFoundError, ValueError) as missing:
        # The row outlived its file (a wiped artifact directory): nothing to serve.
        raise Http404("artifact file is missing") from missing
    return FileResponse(
        handle, as_attachment=True, filename=artifact.name, content_type=artifact.content_type
    )
