"""The overview page's tables: every model's newest figures per strategy and board, with
sparklines of planned bytes over recent commits."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Subquery

from dashboard.models import Board, Commit, Model, Repository, Result
from dashboard.sparklines import Sparkline, sparkline

#: Commits a sparkline on the overview spans.
SPARK_COMMITS = 30


@dataclass
class LatestCell:
    """The newest result of one series, and its planned bytes over the last commits."""

    result: Result
    sparkline: Sparkline | None = None


@dataclass
class LatestRow:
    """One model on one board, with its newest result under each strategy."""

    model: Model
    board: Board
    cells: list[LatestCell | None] = field(default_factory=list)


@dataclass
class RepositoryOverview:
    repository: Repository
    strategies: list[str]
    rows: list[LatestRow]
    untested_models: list[Model]


def repository_overviews() -> list[RepositoryOverview]:
    """Every repository's models with the newest figures per strategy and board."""
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
        lines = _recent_planned_bytes(repository) if series else {}
        strategies = sorted({name for cells in series.values() for name in cells})
        models = {model.pk: model for model in repository.models.all()}
        rows = []
        for (model_id, _), cells in series.items():
            board = next(iter(cells.values())).board
            row = LatestRow(models[model_id], board)
            for name in strategies:
                result = cells.get(name)
                if result is None:
                    row.cells.append(None)
                    continue
                values = lines.get((result.model_id, result.strategy_id, result.board_id))
                row.cells.append(LatestCell(result, sparkline(values) if values else None))
            rows.append(row)
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
    return overviews


def _recent_planned_bytes(repository: Repository) -> dict[tuple[int, int, int], list]:
    """Planned bytes of every series over the repository's last commits on its default
    branch, oldest first, None where a series has no result; one query."""
    recent = (
        Commit.objects.for_repository(repository)
        .on_branch(repository.default_branch)
        .order_by("-committed_at", "-id")
        .values("id")[:SPARK_COMMITS]
    )
    rows = (
        Result.objects.succeeded()
        .filter(commit_id__in=Subquery(recent))
        .order_by("commit__committed_at", "commit_id", "id")
        .values_list("model_id", "strategy_id", "board_id", "commit_id", "planned_bytes")
    )
    by_series: dict[tuple[int, int, int], dict[int, int | None]] = {}
    order: dict[int, int] = {}
    for model_id, strategy_id, board_id, commit_id, planned in rows:
        order.setdefault(commit_id, len(order))
        # In id order: a commit run twice keeps its newest result.
        by_series.setdefault((model_id, strategy_id, board_id), {})[commit_id] = planned
    return {
        key: [values.get(commit_id) for commit_id in order]
        for key, values in by_series.items()
    }
