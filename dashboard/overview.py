"""The overview page's tables: every model's newest figures per strategy and board, with
sparklines of planned bytes over recent commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Subquery
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe

from dashboard import fragments
from dashboard.models import (
    Alert,
    Board,
    Commit,
    Model,
    Repository,
    Result,
    Series,
    Toolchain,
)
from dashboard.sparklines import sparkline
from planner.shapes import label_order

#: Commits a sparkline on the overview spans.
SPARK_COMMITS = 30
#: Commits with open alerts listed on the overview at most; the alerts page has them all.
OPEN_ALERT_COMMITS = 10
#: The overview's parts stored as rendered (``fragments``).
TABLES, ALERTS = "overview:tables", "overview:alerts"


@dataclass
class LatestCell:
    """The overview's cell of one series: its newest figures and sparkline, as HTML
    rendered when the series was summarised (``latest_cell_html``)."""

    strategy: str
    html: str


@dataclass
class LatestRow:
    """One model on one board with one toolchain, with its newest result per strategy."""

    model: Model
    board: Board
    toolchain: Toolchain
    cells: list[LatestCell | None] = field(default_factory=list)
    #: The shape point of the row ("h=256,w=256"); "" for a model without an axis.
    shape_label: str = ""

    @property
    def url(self) -> str:
        """The model's page on this row's board and toolchain, at its shape point."""
        query = {"board": self.board.name, "toolchain": self.toolchain.pk}
        if self.shape_label:
            query["point"] = self.shape_label
        return f"{self.model.get_absolute_url()}?{urlencode(query)}"

    @property
    def point_url(self) -> str:
        """The model's page at this row's shape point (every board and toolchain)."""
        url = self.model.get_absolute_url()
        return f"{url}?{urlencode({'point': self.shape_label})}" if self.shape_label else url


@dataclass
class CommitAlerts:
    """One commit's row among the open alerts: its alerts, and the series they moved."""

    commit: Commit
    alerts: list[Alert]

    @property
    def series(self) -> int:
        """Series moved: a series can have a bytes and a latency alert, and counts once."""
        return len({alert.series_key for alert in self.alerts})

    @property
    def models(self) -> list[tuple[Model, int]]:
        """(model, series of it moved), in the order of the alerts."""
        moved: dict[int, tuple[Model, set]] = {}
        for alert in self.alerts:
            moved.setdefault(alert.model_id, (alert.model, set()))[1].add(alert.series_key)
        return [(model, len(series)) for model, series in moved.values()]


@dataclass
class RepositoryOverview:
    repository: Repository
    strategies: list[str]
    rows: list[LatestRow]
    #: Models with no successful result: never run, or every result of theirs failed.
    untested_models: list[Model]
    #: Whether rows differ by toolchain, so the table names it.
    toolchains: bool = False


def versions() -> tuple[str, str]:
    """The versions of what the tables and the open alerts show, in one query.

    The tables change only when a series is summarised or a model or repository is added
    or removed; the open alerts when one is raised, triaged or removed. The counts by state
    catch alerts whose state was changed in bulk, which leaves ``updated_at`` as it was.
    """
    series, model, alert = (table._meta.db_table for table in (Series, Model, Alert))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT MAX(updated_at) FROM {series}), (SELECT MAX(id) FROM {series}),"
            f" (SELECT COUNT(*) FROM {series}), (SELECT MAX(id) FROM {model}),"
            f" (SELECT MAX(repository_id) FROM {model}), (SELECT COUNT(*) FROM {model}),"
            f" (SELECT COUNT(*) FROM {alert} WHERE state = %s),"
            f" (SELECT COUNT(*) FROM {alert} WHERE state = %s),"
            f" (SELECT MAX(id) FROM {alert}), (SELECT MAX(updated_at) FROM {alert})",
            [Alert.State.NEW, Alert.State.ACKNOWLEDGED],
        )
        row = cursor.fetchone()
    return fragments.version_of(*row[:6]), fragments.version_of(*row[6:])


def repository_overviews() -> list[RepositoryOverview]:
    """Every repository's models with the newest figures per strategy and board.

    Each line's cell was rendered when it was summarised: one query for the lines, one for
    the repositories and models, whatever the history's length.
    """
    by_repository: dict[int, dict[tuple[int, int, int, str], list[Series]]] = {}
    lines = Series.objects.with_points(False).filter(latest_result__isnull=False).select_related(
        "model"
    )
    for line in lines:
        by_repository.setdefault(line.model.repository_id, {}).setdefault(
            (line.model_id, line.board_id, line.toolchain_id, line.shape_label), []
        ).append(line)
    overviews = []
    for repository in Repository.objects.prefetch_related("models"):
        series = by_repository.get(repository.pk, {})
        strategies = sorted({line.strategy.name for row in series.values() for line in row})
        models = {model.pk: model for model in repository.models.all()}
        rows = []
        for (model_id, _, _, shape_label), row_lines in series.items():
            cells = {line.strategy.name: _cell(line) for line in row_lines}
            first = row_lines[0]
            rows.append(
                LatestRow(
                    models[model_id], first.board, first.toolchain,
                    [cells.get(name) for name in strategies], shape_label,
                )
            )
        rows.sort(key=lambda row: (
            row.model.name, row.board.name, row.toolchain.spec, label_order(row.shape_label)
        ))
        tested = {row.model.pk for row in rows}
        overviews.append(
            RepositoryOverview(
                repository,
                strategies,
                rows,
                [model for model in models.values() if model.pk not in tested],
                toolchains=len({row.toolchain.pk for row in rows}) > 1,
            )
        )
    return overviews


def _cell(line: Series) -> LatestCell:
    html = line.latest_html or latest_cell_html(line)  # summarised before cells existed
    return LatestCell(line.strategy.name, mark_safe(html))  # rendered by our own template


def latest_cell_html(line: Series) -> str:
    """The overview's cell of ``line``: its newest result's planned bytes, measured peak,
    latency and commit, and a sparkline of its planned bytes over its last
    ``SPARK_COMMITS`` commits on the repository's default branch."""
    if line.latest_result_id is None:
        return ""
    result = Result.objects.select_related("commit", "run").get(pk=line.latest_result_id)
    values = recent_planned_bytes(line)
    return render_to_string(
        "dashboard/_latest_cell.html",
        {"result": result, "sparkline": sparkline(values) if values else None},
    )


def recent_planned_bytes(line: Series) -> list[int | None]:
    """Planned bytes of ``line`` at its last ``SPARK_COMMITS`` commits on the default
    branch, oldest first; of a commit run twice, the newest result's."""
    branch = Repository.objects.filter(models__pk=line.model_id).values_list(
        "default_branch", flat=True
    )[:1]
    rows = (
        Result.objects.succeeded()
        .filter(
            model_id=line.model_id, strategy_id=line.strategy_id, board_id=line.board_id,
            toolchain_id=line.toolchain_id, shape_label=line.shape_label,
            commit__branch=Subquery(branch),
        )
        .order_by("-commit__committed_at", "-commit_id", "-id")
        .values_list("commit_id", "planned_bytes")
    )
    newest: dict[int, int | None] = {}
    # Reruns repeat a commit: a few more rows than commits are read, in slices.
    for commit_id, planned in rows.iterator(chunk_size=4 * SPARK_COMMITS):
        newest.setdefault(commit_id, planned)
        if len(newest) == SPARK_COMMITS:
            break
    return list(reversed(newest.values()))


def tables_html() -> str:
    return render_to_string(
        "dashboard/_overviews.html",
        {"overviews": repository_overviews(), "spark_commits": SPARK_COMMITS},
    )


def open_alerts_html(request, *, maintainer: bool, here: str) -> str:
    """The overview's open alerts, one row per commit: a commit usually moves many series
    at once, and is triaged once."""
    commits = list(Alert.objects.open().newest_commits()[: OPEN_ALERT_COMMITS + 1])
    shown = (
        Alert.objects.open().filter(commit_id__in=commits[:OPEN_ALERT_COMMITS])
        # A row shows what the alerted result's planned bytes are made of.
        .select_related("result")
    )
    groups = [CommitAlerts(commit, alerts) for commit, alerts in shown.grouped_by_commit()]
    return render_to_string(
        "dashboard/_open_alerts.html",
        {
            "alert_groups": groups,
            "more_alerts": len(commits) > OPEN_ALERT_COMMITS,
            "is_maintainer": maintainer,
            "here": here,
            # An intended change first: what a commit with many open alerts usually is.
            "alert_states": sorted(
                (c for c in Alert.State.choices if c[0] != Alert.State.NEW),
                key=lambda choice: choice[0] != Alert.State.INTENDED,
            ),
        },
        request=request,
    )


def stored_parts(*, alerts: bool = True) -> dict[str, str]:
    """The tables and (unless not ``alerts``) the open alerts as a visitor who may not
    triage sees them, as last rendered for the data as it is now (``fragments``): two
    queries when nothing changed since."""
    tables_version, alerts_version = versions()
    parts = {TABLES: (tables_version, tables_html)}
    if alerts:
        parts[ALERTS] = (
            alerts_version,
            lambda: open_alerts_html(None, maintainer=False, here=reverse("home")),
        )
    return fragments.get_many(parts)


def refresh() -> None:
    """Render the overview's stored parts for the data as it is now (after a run), so the
    first visitor does not wait for them."""
    stored_parts()
