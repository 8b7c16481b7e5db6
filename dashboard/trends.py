"""A model's history as chart data: one series per strategy and board, at most a few hundred
points each however long the history.

The database does the heavy part in one query: it keeps the newest successful result of
each commit, numbers the commits of each series, and returns only the points worth drawing
(every commit where planned bytes changed, the last commit of each of ``MAX_POINTS // 2``
buckets, the first and the last, the commits with alerts). ``downsample`` then trims a
series whose bytes changed too often to keep them all. The browser never receives more
points than it can draw, and the payload's size does not grow with the history.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import Max

from dashboard.models import Alert, Board, Commit, Model, Result, Run, Strategy

#: Points per series the chart receives at most.
MAX_POINTS = 500
#: Alerts marked on the chart at most, newest first.
MAX_ALERTS = 200
#: How long computed series stay cached (they are keyed by the model's results anyway).
TREND_CACHE_SECONDS = 600

_COLUMNS = (
    "strategy_id", "board_id", "commit_id", "run_id", "planned_bytes", "intermediate_bytes",
    "measured_peak_bytes", "lower_bound_bytes", "latency_median_ms", "position", "total",
    "changed",
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


def _series_rows(model: Model, *, board: str, branch: str, keep_commits: set[int]) -> list:
    """The rows of ``model``'s successful results worth drawing, in series and commit order."""
    result, commit, board_table = (
        Result._meta.db_table, Commit._meta.db_table, Board._meta.db_table
    )
    filters, params = [], [model.pk]
    if board:
        filters.append(f"AND r.board_id IN (SELECT id FROM {board_table} WHERE name = %s)")
        params.append(board)
    if branch:
        filters.append("AND c.branch = %s")
        params.append(branch)
    distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
    buckets = MAX_POINTS // 2
    keep = ",".join(str(int(pk)) for pk in sorted(keep_commits)) or "NULL"
    sql = f"""
        WITH runs AS (
            SELECT r.strategy_id, r.board_id, r.commit_id, r.run_id, r.planned_bytes,
                   r.intermediate_bytes, r.measured_peak_bytes, r.lower_bound_bytes,
                   r.latency_median_ms, c.committed_at,
                   LEAD(r.commit_id) OVER (
                       PARTITION BY r.strategy_id, r.board_id
                       ORDER BY c.committed_at, r.commit_id, r.id
                   ) AS next_commit
            FROM {result} r JOIN {commit} c ON c.id = r.commit_id
            WHERE r.model_id = %s AND r.status = 'ok' {" ".join(filters)}
        ),
        newest AS (
            SELECT *,
                   ROW_NUMBER() OVER w AS position,
                   COUNT(*) OVER (PARTITION BY strategy_id, board_id) AS total,
                   LAG(planned_bytes) OVER w AS previous_bytes
            FROM runs
            -- A commit run more than once counts with its newest result (the highest id).
            WHERE next_commit IS NULL OR next_commit <> commit_id
            WINDOW w AS (PARTITION BY strategy_id, board_id ORDER BY committed_at, commit_id)
        )
        SELECT strategy_id, board_id, commit_id, run_id, planned_bytes, intermediate_bytes,
               measured_peak_bytes, lower_bound_bytes, latency_median_ms, position, total,
               CASE WHEN planned_bytes {distinct} previous_bytes THEN 1 ELSE 0 END
        FROM newest
        WHERE total <= {MAX_POINTS}
           OR position = 1 OR position = total
           OR (position - 1) * {buckets} / total <> position * {buckets} / total
           OR planned_bytes {distinct} previous_bytes
           OR commit_id IN ({keep})
        ORDER BY strategy_id, board_id, committed_at, commit_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _alerts(model: Model, *, board: str, branch: str):
    """The alerts marked on the chart, newest first (a queryset)."""
    alerts = Alert.objects.filter(model=model)
    if board:
        alerts = alerts.filter(board__name=board)
    if branch:
        alerts = alerts.filter(commit__branch=branch)
    return alerts.order_by("-commit__committed_at", "-id")


#: What each array in a series' ``points`` holds; a seventh item, when present, is the
#: point's run page where it is not its commit's.
POINT_FIELDS = (
    "commit", "planned_bytes", "intermediate_bytes", "lower_bound_bytes",
    "latency_median_ms", "measured_peak_bytes",
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
    #: The cache key it is stored under: what derived data (the page's table) can key on.
    key: str = ""

    def data(self) -> dict:
        return json.loads(self.json)


def trend(model: Model, *, board: str = "", branch: str = "") -> Trend:
    """Planned bytes, measured peak and latency of ``model`` over commits, per strategy.

    The payload of ``/api/models/<id>/trend/`` and of the trend page, serialised once and
    cached as bytes (in Redis when configured, so every worker shares it) under what
    identifies it: the model's results and its alerts. A hit costs two small queries; a
    miss a bounded number whatever the history's length.
    """
    alerts = list(
        _alerts(model, board=board, branch=branch).select_related(
            "commit", "strategy", "board"
        )[:MAX_ALERTS]
    )
    alert_versions = [[a.pk, a.state, a.updated_at.isoformat()] for a in alerts]
    # The series only change when a result is recorded: the model's newest result id says
    # so (one step down the primary key; a count of its results costs 20-60 ms at 80k).
    # A redelivered task that rewrites a result in place keeps its id, and results are only
    # removed with their repository: at worst the chart shows the old figures for
    # TREND_CACHE_SECONDS.
    last = Result.objects.for_model(model).aggregate(last=Max("id"))["last"]
    key = "peakwatch:trend:" + hashlib.sha256(
        json.dumps([model.pk, board, branch, MAX_POINTS, last, alert_versions]).encode()
    ).hexdigest()
    cached = cache.get(key)
    if cached is None:
        cached = _build(model, alerts, board=board, branch=branch)
        cache.set(key, cached, TREND_CACHE_SECONDS)
    return Trend(**cached, key=key)


def model_trend(model: Model, *, board: str = "", branch: str = "") -> dict:
    """The trend payload as plain data (what the API serves, parsed)."""
    return trend(model, board=board, branch=branch).data()


def _build(model: Model, alerts: list[Alert], *, board: str, branch: str) -> dict:
    commits, lines = _series(
        model, board=board, branch=branch, keep_commits={a.commit_id for a in alerts}
    )
    payload = {
        "model": {
            "id": model.pk,
            "name": model.name,
            "repository": model.repository.name,
            "url": model.get_absolute_url(),
        },
        "board": board or None,
        "branch": branch or None,
        "max_points": MAX_POINTS,
        "point_fields": list(POINT_FIELDS),
        "commits": commits,
        "series": lines,
        "alerts": [_alert(alert) for alert in alerts],
    }
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return {
        "json": text.translate(_HTML_ESCAPES).encode(),
        "history": _history(commits, lines),
        "empty": not lines,
    }


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
        "columns": [{"strategy": line["strategy"], "board": line["board"]} for line in lines],
        "rows": [
            {"commit": commits[index], "cells": rows[index]}
            for index in newest[:HISTORY_ROWS]
        ],
        "more": len(newest) > HISTORY_ROWS,
    }


def _series(
    model: Model, *, board: str, branch: str, keep_commits: set[int]
) -> tuple[list[dict], list[dict]]:
    """The commits drawn, oldest first, and one line per strategy and board whose points
    are arrays of ``POINT_FIELDS`` referencing those commits by index."""
    rows = _series_rows(model, board=board, branch=branch, keep_commits=keep_commits)
    strategies = dict(Strategy.objects.values_list("id", "name"))
    boards = dict(Board.objects.values_list("id", "name"))
    series: dict[tuple[str, str], dict] = {}
    for row in rows:
        values = dict(zip(_COLUMNS, row, strict=True))
        key = (strategies[values["strategy_id"]], boards[values["board_id"]])
        line = series.setdefault(key, {"total": values["total"], "points": []})
        line["points"].append(values)
    kept = {key: downsample(series[key]["points"], MAX_POINTS) for key in sorted(series)}
    # The newest run behind each commit drawn: the run a click on that commit opens unless
    # the point says otherwise.
    runs: dict[int, int] = {}
    for points in kept.values():
        for point in points:
            runs[point["commit_id"]] = max(runs.get(point["commit_id"], 0), point["run_id"])
    shown = sorted(
        Commit.objects.filter(id__in=runs).values(
            "id", "sha", "message", "author", "committed_at"
        ),
        key=lambda c: (c["committed_at"], c["id"]),
    )
    index = {c["id"]: i for i, c in enumerate(shown)}
    commits = [_commit(c, runs[c["id"]]) for c in shown]
    lines = []
    for (strategy, board_name), points in kept.items():
        lines.append(
            {
                "strategy": strategy,
                "board": board_name,
                "commits": series[(strategy, board_name)]["total"],
                "downsampled": len(points) < series[(strategy, board_name)]["total"],
                "points": [_point(p, index[p["commit_id"]], runs) for p in points],
            }
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
    ]
    if values["run_id"] != runs[values["commit_id"]]:
        point.append(_run_url(values["run_id"]))
    return point


def _run_url(run_id: int) -> str:
    return Run(pk=run_id).get_absolute_url()


def _alert(alert: Alert) -> dict:
    return {
        "id": alert.pk,
        "commit_sha": alert.commit.sha,
        "short_sha": alert.commit.short_sha,
        "strategy": alert.strategy.name,
        "board": alert.board.name,
        "kind": alert.kind,
        "state": alert.state,
        "open": alert.is_open,
        "baseline_value": alert.baseline_value,
        "value": alert.value,
        "run_url": Run(pk=alert.run_id).get_absolute_url(),
    }
