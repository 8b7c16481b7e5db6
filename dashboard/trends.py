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

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max

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


def _alerts(model: Model, *, board: str, branch: str) -> list[Alert]:
    alerts = Alert.objects.filter(model=model).select_related("commit", "strategy", "board")
    if board:
        alerts = alerts.filter(board__name=board)
    if branch:
        alerts = alerts.filter(commit__branch=branch)
    return list(alerts.order_by("-commit__committed_at", "-id")[:MAX_ALERTS])


def model_trend(model: Model, *, board: str = "", branch: str = "") -> dict:
    """Planned bytes, measured peak and latency of ``model`` over commits, per strategy.

    Plain data, shared by ``/api/models/<id>/trend/`` and the trend page, so the chart
    draws exactly what the API serves. A bounded number of queries whatever the history's
    length: the alerts, the version of the model's results, and on a cache miss the points
    and the commits and names they show.
    """
    alerts = _alerts(model, board=board, branch=branch)
    alerted = sorted({a.commit_id for a in alerts})
    # The series only change when a result is recorded or removed; reading them is the
    # expensive part of a long history, so they are cached under what identifies them.
    # A redelivered task that rewrites a result in place keeps its id: at worst the chart
    # shows the old figures for TREND_CACHE_SECONDS.
    version = Result.objects.for_model(model).aggregate(last=Max("id"), count=Count("id"))
    key = hashlib.sha256(
        json.dumps([model.pk, board, branch, version["last"], version["count"], alerted])
        .encode()
    ).hexdigest()
    lines = cache.get(f"peakwatch:trend:{key}")
    if lines is None:
        lines = _series(model, board=board, branch=branch, keep_commits=set(alerted))
        cache.set(f"peakwatch:trend:{key}", lines, TREND_CACHE_SECONDS)
    return {
        "model": {
            "id": model.pk,
            "name": model.name,
            "repository": model.repository.name,
            "url": model.get_absolute_url(),
        },
        "board": board or None,
        "branch": branch or None,
        "max_points": MAX_POINTS,
        "series": lines,
        "alerts": [_alert(alert) for alert in alerts],
    }


def _series(model: Model, *, board: str, branch: str, keep_commits: set[int]) -> list[dict]:
    rows = _series_rows(model, board=board, branch=branch, keep_commits=keep_commits)
    commit_ids = {row[2] for row in rows}
    commits = {
        c["id"]: c
        for c in Commit.objects.filter(id__in=commit_ids).values(
            "id", "sha", "message", "author", "committed_at", "branch"
        )
    }
    strategies = dict(Strategy.objects.values_list("id", "name"))
    boards = dict(Board.objects.values_list("id", "name"))
    series: dict[tuple[str, str], dict] = {}
    for row in rows:
        values = dict(zip(_COLUMNS, row, strict=True))
        key = (strategies[values["strategy_id"]], boards[values["board_id"]])
        line = series.setdefault(
            key, {"strategy": key[0], "board": key[1], "commits": values["total"], "points": []}
        )
        line["points"].append(_point(values, commits[values["commit_id"]]))
    lines = []
    for key in sorted(series):
        line = series[key]
        line["points"] = downsample(line["points"], MAX_POINTS)
        line["downsampled"] = len(line["points"]) < line["commits"]
        lines.append(line)
    return lines


def _point(values: dict, commit: dict) -> dict:
    message = commit["message"].strip()
    return {
        "commit_sha": commit["sha"],
        "short_sha": commit["sha"][:10],
        "title": message.splitlines()[0] if message else "",
        "author": commit["author"],
        "committed_at": commit["committed_at"].isoformat(),
        "position": values["position"],
        "changed": bool(values["changed"]),
        "planned_bytes": values["planned_bytes"],
        "intermediate_bytes": values["intermediate_bytes"],
        "measured_peak_bytes": values["measured_peak_bytes"],
        "lower_bound_bytes": values["lower_bound_bytes"],
        "latency_median_ms": values["latency_median_ms"],
        "run_id": values["run_id"],
        "run_url": Run(pk=values["run_id"]).get_absolute_url(),
    }


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
