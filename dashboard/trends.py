"""A model's history as chart data: one series per strategy and board, at most a few hundred
points each however long the history.

The database does the heavy part in one query: it keeps the newest successful result of
each commit, numbers the commits of each series, and returns only the points worth drawing
(every commit where planned bytes changed, the last commit of each of ``MAX_POINTS // 2``
buckets, the first and the last, the commits with alerts). ``downsample`` then trims a
series whose bytes changed too often to keep them all. The browser never receives more
points than it can draw, and the payload's size does not grow with the history.

That query runs when a Result is recorded, once per series (``series_points``), and its
points are stored on the ``Series`` row: a request reads a row per line and the commits
those lines draw, however long the history. Only a branch filter, which the stored points
do not know, runs the query over the model's results at request time.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.template.loader import render_to_string
from django.urls import reverse

from dashboard.models import (
    Alert,
    Board,
    Commit,
    Model,
    Result,
    Series,
    Strategy,
    Toolchain,
    TrendSnapshot,
)
from dashboard.series_key import SeriesKey
from planner.shapes import label_order

#: Points per series the chart receives at most.
MAX_POINTS = 500
#: Alerts marked on the chart at most, newest first.
MAX_ALERTS = 200
#: How long computed series stay cached (they are keyed by the model's results anyway).
TREND_CACHE_SECONDS = 600

_COLUMNS = (
    "strategy_id", "board_id", "toolchain_id", "shape_label", "commit_id", "run_id",
    "planned_bytes",
    "intermediate_bytes", "measured_peak_bytes", "lower_bound_bytes", "latency_median_ms",
    "board_ram_bytes", "position", "total", "changed",
)


def downsample(points: list[dict], limit: int = MAX_POINTS, key: str = "planned_bytes"):
    """At most ``limit`` of ``points`` (one series, in commit order), keeping its shape.

    Points are plain dicts with a ``position`` (the commit's index in the whole series),
    ``key``, and optionally ``changed`` (``key`` differs from the previous commit, which
    may not be among ``points``). A short
    series is returned whole. When the changed points fit, all of them stay, with the
    first and last and evenly spaced others up to ``limit``. Otherwise the series is cut
    into ``limit // 2`` buckets by position, each keeping the first point at its lowest and
    the first at its highest ``key``, so no step or spike disappears.
    """
    if len(points) <= limit:
        return points
    ends = {id(points[0]), id(points[-1])}
    changed = {
        id(point)
        for previous, point in zip(points, points[1:], strict=False)
        if point.get("changed") or point.get(key) != previous.get(key)
    } | ends
    if len(changed) <= limit:
        rest = [p for p in points if id(p) not in changed]
        room = limit - len(changed)
        step = len(rest) / room if room else 0
        chosen = changed | {id(rest[int(i * step)]) for i in range(room)}
        return [p for p in points if id(p) in chosen]
    buckets = max(1, limit // 2)
    first, last = points[0]["position"], points[-1]["position"]
    span = max(1, last - first + 1)
    kept: dict[int, tuple[dict, dict]] = {}
    for point in points:
        bucket = (point["position"] - first) * buckets // span
        value = point.get(key)
        low, high = kept.get(bucket, (point, point))
        if value is not None and (low.get(key) is None or value < low[key]):
            low = point
        if value is not None and (high.get(key) is None or value > high[key]):
            high = point
        kept[bucket] = (low, high)
    chosen = set(ends)
    for low, high in kept.values():
        chosen.update((id(low), id(high)))
    result = [point for point in points if id(point) in chosen]
    # First and last may add two to the bucket extremes: drop from the middle if so.
    while len(result) > limit:
        del result[len(result) // 2]
    return result


def _series_rows(
    model: Model, *, board: str, branch: str, toolchain: Toolchain | None, keep_commits: set[int]
) -> list:
    """The rows of ``model``'s successful results worth drawing, in series and commit order."""
    result, commit, board_table = (
        Result._meta.db_table, Commit._meta.db_table, Board._meta.db_table
    )
    filters, params = [], [model.pk]
    if board:
        filters.append(f"AND r.board_id IN (SELECT id FROM {board_table} WHERE name = %s)")
        params.append(board)
    if toolchain is not None:
        filters.append("AND r.toolchain_id = %s")
        params.append(toolchain.pk)
    if branch:
        filters.append("AND c.branch = %s")
        params.append(branch)
    distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
    buckets = MAX_POINTS // 2
    keep = ",".join(str(int(pk)) for pk in sorted(keep_commits)) or "NULL"
    sql = f"""
        WITH runs AS (
            SELECT r.strategy_id, r.board_id, r.toolchain_id, r.shape_label, r.commit_id,
                   r.run_id,
                   r.planned_bytes, r.intermediate_bytes, r.measured_peak_bytes,
                   r.lower_bound_bytes, r.latency_median_ms, r.board_ram_bytes,
                   c.committed_at,
                   LEAD(r.commit_id) OVER (
                       PARTITION BY r.strategy_id, r.board_id, r.toolchain_id, r.shape_label
                       ORDER BY c.committed_at, r.commit_id, r.id
                   ) AS next_commit
            FROM {result} r JOIN {commit} c ON c.id = r.commit_id
            WHERE r.model_id = %s AND r.status = 'ok' {" ".join(filters)}
        ),
        newest AS (
            SELECT *,
                   ROW_NUMBER() OVER w AS position,
                   COUNT(*) OVER (
                       PARTITION BY strategy_id, board_id, toolchain_id, shape_label
                   ) AS total,
                   LAG(planned_bytes) OVER w AS previous_bytes
            FROM runs
            -- A commit run more than once counts with its newest result (the highest id).
            WHERE next_commit IS NULL OR next_commit <> commit_id
            WINDOW w AS (
                PARTITION BY strategy_id, board_id, toolchain_id, shape_label
                ORDER BY committed_at, commit_id
            )
        )
        SELECT strategy_id, board_id, toolchain_id, shape_label, commit_id, run_id,
               planned_bytes,
               intermediate_bytes, measured_peak_bytes, lower_bound_bytes, latency_median_ms,
               board_ram_bytes, position, total,
               CASE WHEN planned_bytes {distinct} previous_bytes THEN 1 ELSE 0 END
        FROM newest
        WHERE total <= {MAX_POINTS}
           OR position = 1 OR position = total
           OR (position - 1) * {buckets} / total <> position * {buckets} / total
           OR planned_bytes {distinct} previous_bytes
           OR commit_id IN ({keep})
        ORDER BY strategy_id, board_id, toolchain_id, shape_label, committed_at, commit_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


#: The columns that tell one series from another, in the order of ``Series.key``.
SERIES_COLUMNS = SeriesKey._fields

#: What each stored point of a ``Series`` holds (``Series.points``).
STORED_POINT_FIELDS = (
    "commit_id", "run_id", "planned_bytes", "intermediate_bytes", "lower_bound_bytes",
    "latency_median_ms", "measured_peak_bytes", "board_ram_bytes",
)


@dataclass(frozen=True)
class SeriesSummary:
    """What ``series_points`` found of one series: its points worth drawing (arrays of
    ``STORED_POINT_FIELDS``), how many commits it has, and its newest result's id."""

    points: list[list]
    commits: int
    latest_result_id: int | None


def series_points(key: tuple, *, using=None, board_ram: bool = True) -> SeriesSummary:
    """The points of the series ``key`` (model, strategy, board, toolchain ids and the
    shape label) worth drawing, at most ``MAX_POINTS``, chosen like ``_series_rows`` chooses
    them; the commits with alerts on the series are kept too. Plain SQL over the tables, so
    the migration that fills ``Series`` can call it as well (with the four ids it knew, and
    ``board_ram=False``: its tables have no shape label and no board RAM yet)."""
    from django.db import connections

    db = connections[using or "default"]
    result, commit, alert = (
        Result._meta.db_table, Commit._meta.db_table, Alert._meta.db_table
    )
    distinct = "IS DISTINCT FROM" if db.vendor == "postgresql" else "IS NOT"
    buckets = MAX_POINTS // 2
    def in_series(prefix: str = "") -> str:
        return " AND ".join(
            f"{prefix}{column} = %s"
            for column in SERIES_COLUMNS[: len(key)]
        )

    sql = f"""
        WITH runs AS (
            SELECT r.id, r.commit_id, r.run_id, r.planned_bytes, r.intermediate_bytes,
                   r.lower_bound_bytes, r.latency_median_ms, r.measured_peak_bytes,
                   {"r.board_ram_bytes" if board_ram else "NULL AS board_ram_bytes"},
                   c.committed_at,
                   LEAD(r.commit_id) OVER (ORDER BY c.committed_at, r.commit_id, r.id)
                       AS next_commit
            FROM {result} r JOIN {commit} c ON c.id = r.commit_id
            WHERE {in_series("r.")} AND r.status = 'ok'
        ),
        newest AS (
            SELECT *,
                   ROW_NUMBER() OVER w AS position,
                   COUNT(*) OVER () AS total,
                   LAG(planned_bytes) OVER w AS previous_bytes
            FROM runs
            -- A commit run more than once counts with its newest result (the highest id).
            WHERE next_commit IS NULL OR next_commit <> commit_id
            WINDOW w AS (ORDER BY committed_at, commit_id)
        )
        SELECT id, commit_id, run_id, planned_bytes, intermediate_bytes, lower_bound_bytes,
               latency_median_ms, measured_peak_bytes, board_ram_bytes, position, total,
               CASE WHEN planned_bytes {distinct} previous_bytes THEN 1 ELSE 0 END
        FROM newest
        WHERE total <= {MAX_POINTS}
           OR position = 1 OR position = total
           OR (position - 1) * {buckets} / total <> position * {buckets} / total
           OR planned_bytes {distinct} previous_bytes
           OR commit_id IN (SELECT commit_id FROM {alert} WHERE {in_series()})
        ORDER BY position
    """
    with db.cursor() as cursor:
        cursor.execute(sql, [*key, *key])
        rows = cursor.fetchall()
    if not rows:
        return SeriesSummary([], 0, None)
    points = [
        {
            "id": row[0],
            "stored": list(row[1:9]),
            "planned_bytes": row[3],
            "position": row[9],
            "changed": bool(row[11]),
        }
        for row in rows
    ]
    return SeriesSummary(
        [point["stored"] for point in downsample(points, MAX_POINTS)],
        commits=rows[-1][10],
        latest_result_id=rows[-1][0],
    )


def _alerts(model: Model, *, board: str, branch: str, toolchain: Toolchain | None = None):
    """The alerts marked on the chart, newest first (a queryset)."""
    alerts = Alert.objects.filter(model=model)
    if board:
        alerts = alerts.filter(board__name=board)
    if toolchain is not None:
        alerts = alerts.filter(toolchain=toolchain)
    if branch:
        alerts = alerts.filter(commit__branch=branch)
    return alerts.order_by("-commit__committed_at", "-id")


#: What each array in a series' ``points`` holds; one item more, when present, is the
#: point's run page where it is not its commit's.
POINT_FIELDS = (
    "commit", "planned_bytes", "intermediate_bytes", "lower_bound_bytes",
    "latency_median_ms", "measured_peak_bytes", "board_ram_bytes",
)
#: Newest commits the trend page's history table lists at most.
HISTORY_ROWS = 30

# Escaped like Django's json_script, so the same bytes are valid JSON for the API and safe
# inside the page's <script type="application/json">.
_HTML_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


@dataclass(frozen=True)
class Trend:
    """A trend ready to serve: ``json`` is the API's body (bytes), ``history`` the newest
    ``HISTORY_ROWS`` commits as table rows for the page, ``empty`` when no series."""

    json: bytes
    history: dict
    empty: bool
    #: The history table as the unfiltered page shows it, when stored with the snapshot.
    history_html: str = ""
    #: The cache key it is stored under: what derived data (the page's table) can key on.
    key: str = ""
    #: The newest open alert among those the chart marks (None when none is open): where
    #: the model page opens (``opening``).
    open_alert: Alert | None = None

    def data(self) -> dict:
        return json.loads(self.json)


def _news(alerts: list[Alert]) -> Alert | None:
    """The open alert the page opens on: of the newest commit with open alerts (``alerts``
    come newest first), a bytes alert where there is one, since bytes are exact and a
    latency alert of the same commit is often the same change seen through noise."""
    opened = [alert for alert in alerts if alert.is_open]
    if not opened:
        return None
    newest = [alert for alert in opened if alert.commit_id == opened[0].commit_id]
    return min(newest, key=lambda alert: alert.kind_rank)


def trend(
    model: Model, *, board: str = "", branch: str = "", toolchain: Toolchain | None = None,
) -> Trend:
    """Planned bytes, measured peak and latency of ``model`` over commits, per series.

    The payload of ``/api/models/<id>/trend/`` and of the trend page. Unfiltered, it is the
    model's ``TrendSnapshot`` (stored when a result was recorded) with its alerts read
    live: three small queries whatever the history's length. A board or toolchain filter
    reads the lines' stored points and the commits they draw; a branch filter runs the
    selection over the model's results. Filtered payloads are cached (in Redis when
    configured) under what identifies them: the lines' versions and the alerts.
    """
    alerts = list(
        _alerts(model, board=board, branch=branch, toolchain=toolchain).select_related(
            "commit", "strategy", "board", "toolchain"
        )[:MAX_ALERTS]
    )
    alert_versions = [[a.pk, a.state, a.updated_at.isoformat()] for a in alerts]
    snapshot = lines = None
    if board or branch or toolchain is not None:
        lines = Series.objects.for_model(model).with_points()
        if board:
            lines = lines.on_board_named(board)
        if toolchain is not None:
            lines = lines.with_toolchain(toolchain)
        lines = list(lines)
        version = [[line.pk, line.updated_at.isoformat()] for line in lines]
    else:
        snapshot = (
            TrendSnapshot.objects.filter(model=model)
            .values("body", "history", "history_html", "updated_at").first()
        )
        version = snapshot["updated_at"].isoformat() if snapshot else None
    key = "peakwatch:trend:" + hashlib.sha256(
        json.dumps([
            model.pk, board, branch, toolchain.pk if toolchain else None, MAX_POINTS,
            version, alert_versions,
        ]).encode()
    ).hexdigest()
    open_alert = _news(alerts)
    if snapshot is not None:
        # Stored already: joining it to the alerts costs less than a cache round trip with
        # the payload's bytes would.
        return Trend(
            **_assemble(model, snapshot, alerts, board=board, branch=branch, toolchain=toolchain),
            key=key, open_alert=open_alert,
        )
    cached = cache.get(key)
    if cached is None:
        if branch:
            commits, drawn = _series(
                model, board=board, branch=branch, toolchain=toolchain,
                keep_commits={a.commit_id for a in alerts},
            )
            members = _members(commits, drawn)
        elif lines is not None:
            members = _members(*_stored_series(lines))
        else:
            # Not materialised yet (summarised before snapshots existed): built, not stored.
            members = snapshot or snapshot_of(model)
        cached = _assemble(
            model, members, alerts, board=board, branch=branch, toolchain=toolchain
        )
        cache.set(key, cached, TREND_CACHE_SECONDS)
    return Trend(**cached, key=key, open_alert=open_alert)


@dataclass(frozen=True)
class Opening:
    """Where the model page opens: the shape point its trend shows first and the curve it
    brings forward (a strategy on a board with a toolchain); ``alert`` is the open alert
    that chose them, where one did. Empty: the first point, no curve brought forward."""

    point: str = ""
    strategy: str = ""
    board: str = ""
    toolchain_id: int | None = None
    alert: Alert | None = None

    @property
    def line(self) -> tuple[str, int] | None:
        """The (board, toolchain id) of the curve, where there is one."""
        return (self.board, self.toolchain_id) if self.board and self.toolchain_id else None


def opening(data: Trend, *, point: str | None = None, strategy: str | None = None) -> Opening:
    """Where the page of ``data`` opens: at the newest open alert's point and series, where
    the news is, else at the first point. ``point`` and ``strategy`` (a page's query; None
    where it names none) each win over what the alert would choose."""
    alert = data.open_alert
    if alert is None or (point is not None and strategy is not None):
        return Opening(point=point or "", strategy=strategy or "")
    return Opening(
        point=alert.shape_label if point is None else point,
        strategy=alert.strategy.name if strategy is None else strategy,
        board=alert.board.name,
        toolchain_id=alert.toolchain_id,
        alert=alert,
    )


def find_toolchain(value: str) -> Toolchain | None:
    """The toolchain a ``toolchain=`` filter names, by id or by spec; None when empty.
    Raises ``LookupError`` when it names none."""
    if not value:
        return None
    found = None
    if value.isascii() and value.isdigit() and len(value) < 19:
        found = Toolchain.objects.filter(pk=int(value)).first()
    found = found or Toolchain.objects.filter(spec=value).first()
    if found is None:
        raise LookupError(f"no toolchain {value[:80]!r}: give its id or its spec")
    return found


def model_trend(model: Model, **filters) -> dict:
    """The trend payload as plain data (what the API serves, parsed)."""
    return trend(model, **filters).data()


def snapshot_of(model: Model) -> dict:
    """What a ``TrendSnapshot`` of ``model`` holds: the unfiltered payload's members built
    from every series' stored points, and the trend page's history table (rendered too)."""
    lines = list(Series.objects.for_model(model).with_points())
    members = _members(*_stored_series(lines))
    members["history_html"] = history_html(
        members["history"],
        boards=len({line.board_id for line in lines}) > 1,
        toolchains=len({line.toolchain_id for line in lines}) > 1,
    )
    return members


def history_html(history: dict, *, boards: bool, toolchains: bool) -> str:
    """The trend page's history table: most of the page's rendering, so stored with the
    snapshot (or cached with a filtered trend)."""
    return render_to_string(
        "dashboard/_trend_history.html",
        {"history": history, "history_limit": HISTORY_ROWS, "show_boards": boards,
         "show_toolchains": toolchains},
    )


def _members(commits: list[dict], lines: list[dict]) -> dict:
    text = json.dumps(
        {"commits": commits, "series": lines}, separators=(",", ":"), ensure_ascii=False
    )
    # The object's members without its braces, escaped like the rest of the payload.
    return {"body": text[1:-1].translate(_HTML_ESCAPES), "history": _history(commits, lines)}


def _assemble(
    model: Model, members: dict, alerts: list[Alert], *, board: str, branch: str,
    toolchain: Toolchain | None,
) -> dict:
    """The payload's bytes: what identifies it, the stored members, the live alerts."""
    head = {
        "model": {
            "id": model.pk,
            "name": model.name,
            "repository": model.repository.name,
            "url": model.get_absolute_url(),
        },
        "board": board or None,
        "branch": branch or None,
        "toolchain": _toolchain(toolchain) if toolchain else None,
        "max_points": MAX_POINTS,
        "point_fields": list(POINT_FIELDS),
    }
    dump = functools.partial(json.dumps, separators=(",", ":"), ensure_ascii=False)
    text = (
        dump(head)[:-1].translate(_HTML_ESCAPES) + "," + members["body"]
        + ',"alerts":' + dump([_alert(alert) for alert in alerts]).translate(_HTML_ESCAPES)
        + "}"
    )
    return {
        "json": text.encode(),
        "history": members["history"],
        "history_html": members.get("history_html", ""),
        "empty": not members["history"]["columns"],
    }


def _toolchain(toolchain: Toolchain) -> dict:
    return {"id": toolchain.pk, "spec": toolchain.spec, "label": toolchain.label}


def _history(commits: list[dict], lines: list[dict]) -> dict:
    """The newest ``HISTORY_ROWS`` commits drawn, newest first, with each series' planned
    bytes and the change from the previous point drawn (which keeps every change)."""
    rows: dict[int, list] = {}
    for column, line in enumerate(lines):
        previous = None
        for point in line["points"]:
            planned = point[1]
            change = None
            if previous is not None and planned is not None:
                change = planned - previous
            cells = rows.setdefault(point[0], [None] * len(lines))
            cells[column] = {"planned_bytes": planned, "change": change}
            previous = planned
    newest = sorted(rows, reverse=True)
    return {
        "columns": [
            {"strategy": line["strategy"], "board": line["board"],
             "toolchain": line["toolchain"]["label"], "shape_label": line["shape_label"]}
            for line in lines
        ],
        "rows": [
            {"commit": commits[index], "cells": rows[index]}
            for index in newest[:HISTORY_ROWS]
        ],
        "more": len(newest) > HISTORY_ROWS,
    }


def _line_order(line: Series) -> tuple:
    return (line.strategy.name, line.board.name, line.toolchain.spec,
            label_order(line.shape_label))


def _stored_series(lines: list[Series]) -> tuple[list[dict], list[dict]]:
    """``_series`` from the points stored on the ``Series`` rows: one query, the commits."""
    lines = sorted((line for line in lines if line.points), key=_line_order)
    runs: dict[int, int] = {}
    for line in lines:
        for commit_id, run_id, *_ in line.points:
            runs[commit_id] = max(runs.get(commit_id, 0), run_id)
    index, commits = _commits_drawn(runs)
    drawn = []
    for line in lines:
        # A commit removed since the line was summarised is left out until it is again.
        points = [_stored(p) for p in line.points if p[0] in index]
        drawn.append(
            _line(line.strategy.name, line.board.name, line.toolchain, line.shape_label,
                  line.commits, [
                _point(
                    dict(zip(STORED_POINT_FIELDS, p, strict=True)), index[p[0]], runs
                )
                for p in points
            ], downsampled=len(points) < line.commits)
        )
    return commits, drawn


def _stored(point: list) -> list:
    """A stored point with every field of ``STORED_POINT_FIELDS``: one summarised before a
    field was added lacks it (None, as for a result that did not measure it) until its
    series is summarised again."""
    missing = len(STORED_POINT_FIELDS) - len(point)
    return point + [None] * missing if missing > 0 else point


def _commits_drawn(runs: dict[int, int]) -> tuple[dict[int, int], list[dict]]:
    """Each commit drawn (``runs``: commit id -> its newest run drawn), oldest first, and
    its index in that list."""
    shown = sorted(
        Commit.objects.filter(id__in=runs).values(
            "id", "sha", "message", "author", "committed_at"
        ),
        key=lambda c: (c["committed_at"], c["id"]),
    )
    index = {c["id"]: i for i, c in enumerate(shown)}
    return index, [_commit(c, runs[c["id"]]) for c in shown]


def _line(strategy: str, board: str, toolchain: Toolchain, shape_label: str, commits: int,
          points: list, *, downsampled: bool) -> dict:
    return {
        "strategy": strategy,
        "board": board,
        "toolchain": _toolchain(toolchain),
        # Each point of a shape axis is a line of its own; "" for a model without one.
        "shape_label": shape_label,
        "commits": commits,
        "downsampled": downsampled,
        "points": points,
    }


def _series(
    model: Model, *, board: str, branch: str, toolchain: Toolchain | None,
    keep_commits: set[int],
) -> tuple[list[dict], list[dict]]:
    """The commits drawn, oldest first, and one line per strategy, board and toolchain
    whose points are arrays of ``POINT_FIELDS`` referencing those commits by index."""
    rows = _series_rows(
        model, board=board, branch=branch, toolchain=toolchain, keep_commits=keep_commits
    )
    strategies = dict(Strategy.objects.values_list("id", "name"))
    boards = dict(Board.objects.values_list("id", "name"))
    toolchains = {t.pk: t for t in Toolchain.objects.all()}
    series: dict[tuple[str, str, str, str], dict] = {}
    for row in rows:
        values = dict(zip(_COLUMNS, row, strict=True))
        chain = toolchains[values["toolchain_id"]]
        key = (
            strategies[values["strategy_id"]], boards[values["board_id"]], chain.spec,
            values["shape_label"],
        )
        line = series.setdefault(
            key, {"total": values["total"], "toolchain": chain, "points": []}
        )
        line["points"].append(values)
    kept = {
        key: downsample(series[key]["points"], MAX_POINTS)
        for key in sorted(series, key=lambda k: (*k[:3], label_order(k[3])))
    }
    # The newest run behind each commit drawn: the run a click on that commit opens unless
    # the point says otherwise.
    runs: dict[int, int] = {}
    for points in kept.values():
        for point in points:
            runs[point["commit_id"]] = max(runs.get(point["commit_id"], 0), point["run_id"])
    index, commits = _commits_drawn(runs)
    lines = []
    for key, points in kept.items():
        strategy, board_name, _, shape_label = key
        line = series[key]
        lines.append(
            _line(strategy, board_name, line["toolchain"], shape_label, line["total"],
                  [_point(p, index[p["commit_id"]], runs) for p in points],
                  downsampled=len(points) < line["total"])
        )
    return commits, lines


def _commit(commit: dict, run_id: int) -> dict:
    message = commit["message"].strip()
    return {
        "sha": commit["sha"],
        "short": commit["sha"][:10],
        "title": message.splitlines()[0] if message else "",
        "author": commit["author"],
        "committed_at": commit["committed_at"].isoformat(),
        "run_url": _run_url(run_id),
    }


def _point(values: dict, commit_index: int, runs: dict[int, int]) -> list:
    point = [
        commit_index,
        values["planned_bytes"],
        values["intermediate_bytes"],
        values["lower_bound_bytes"],
        values["latency_median_ms"],
        values["measured_peak_bytes"],
        values["board_ram_bytes"],
    ]
    if values["run_id"] != runs[values["commit_id"]]:
        point.append(_run_url(values["run_id"]))
    return point


def _run_url(run_id: int) -> str:
    # Hundreds per payload: a Run instance and a reverse() each cost more than the rest.
    return _run_url_format().format(run_id)


@functools.cache
def _run_url_format() -> str:
    marker = 987654321
    return reverse("run-detail", args=[marker]).replace(str(marker), "{}")


def _alert(alert: Alert) -> dict:
    return {
        "id": alert.pk,
        "commit_sha": alert.commit.sha,
        "short_sha": alert.commit.short_sha,
        "strategy": alert.strategy.name,
        "board": alert.board.name,
        "toolchain": alert.toolchain.label,
        "shape_label": alert.shape_label,
        "kind": alert.kind,
        "state": alert.state,
        "open": alert.is_open,
        "baseline_value": alert.baseline_value,
        "value": alert.value,
        "run_url": _run_url(alert.run_id),
    }
