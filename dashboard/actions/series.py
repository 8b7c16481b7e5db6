"""The summaries pages read instead of a series' history: its row (newest result, commit
count, chart points, overview cell) and its model's trend snapshot, kept up to date as
results are recorded, rerun and removed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from django.db import transaction

from dashboard.models import Model, Result, Series, TrendSnapshot
from dashboard.overview import latest_cell_html
from dashboard.series_key import SeriesKey
from dashboard.trends import series_points, snapshot_of

#: The models whose trend snapshot waits for the end of :func:`snapshots_deferred`.
_deferred: ContextVar[set[int] | None] = ContextVar("deferred_snapshots", default=None)


@contextlib.contextmanager
def snapshots_deferred() -> Iterator[None]:
    """Within it, a summarised series leaves its model's trend snapshot to the end, where
    each model's is stored once: a worker recording a model's results rebuilds it once, not
    once a Result (each rebuild reads every series of the model)."""
    models: set[int] = set()
    token = _deferred.set(models)
    try:
        yield
    finally:
        _deferred.reset(token)
        for model_id in sorted(models):
            materialise_trend(model_id)


def summarise_series(key: SeriesKey, *, snapshot: bool = True) -> Series | None:
    """Store what pages show of the series ``key``: its newest result, its commit count,
    the points its chart draws and its overview cell; then (unless not ``snapshot``) its
    model's trend snapshot. None (and no row) when it has no successful result left."""
    key = SeriesKey(*key)
    ids = key._asdict()
    with transaction.atomic():
        # Taken before reading the results: a worker recording another result of this
        # series waits here, then reads ours too, so the last to write has seen both.
        series = Series.objects.select_for_update().filter(**ids).first()
        if series is None:
            if not Result.objects.succeeded().filter(**ids).exists():
                return None
            # The row must exist to be locked; a concurrent creator makes this a no-op.
            Series.objects.bulk_create([Series(**ids)], ignore_conflicts=True)
            series = Series.objects.select_for_update().get(**ids)
        summary = series_points(key)
        if not summary.commits:
            series.delete()
        else:
            series.points = summary.points
            series.commits = summary.commits
            series.latest_result_id = summary.latest_result_id
            series.latest_html = latest_cell_html(series)
            series.save()
        deferred = _deferred.get()
        if snapshot and deferred is not None:
            deferred.add(key.model_id)
        elif snapshot:
            materialise_trend(key.model_id)
    return series if summary.commits else None


def materialise_trend(model_id: int) -> None:
    """Store the model's unfiltered trend as the API serves it (less its alerts), from its
    series as they are now: an unfiltered trend is then one row to read."""
    model = Model.objects.filter(pk=model_id).select_related("repository").first()
    if model is None:
        return
    TrendSnapshot.objects.update_or_create(model=model, defaults=snapshot_of(model))


def summarise_all_series() -> int:
    """Summarise every series with results (a backfill: results loaded in bulk, or recorded
    before series were summarised); returns how many series there are."""
    keys = {
        SeriesKey(*row)
        for row in Result.objects.succeeded().order_by()
        .values_list(*SeriesKey._fields).distinct()
    }
    for key in sorted(keys):
        summarise_series(key, snapshot=False)
    Series.objects.exclude(
        pk__in=[s.pk for s in Series.objects.with_points(False) if s.key in keys]
    ).delete()
    models = {key.model_id for key in keys}
    for model_id in sorted(models):
        materialise_trend(model_id)
    TrendSnapshot.objects.exclude(model_id__in=models).delete()
    return len(keys)


def forget_result(result: Result) -> None:
    """A Result is being removed (with its run, commit or repository, or in the admin):
    its series is summarised again once the removal is committed, once per transaction
    however many of its results go."""
    key = result.series_key
    connection = transaction.get_connection()
    if any(getattr(hook, "series_key", None) == key for _, hook, _ in connection.run_on_commit):
        return
    transaction.on_commit(_SummariseAgain(key))


class _SummariseAgain:
    """An on-commit hook that says which series it is for, so it is registered once."""

    def __init__(self, key: SeriesKey):
        self.series_key = key

    def __call__(self) -> None:
        summarise_series(self.series_key)
