"""Alerts: raised when a run's series got worse than its baseline, one per series, commit
and kind however many runs measure the commit, and triaged by maintainers."""

from __future__ import annotations

import enum
import statistics

from django.db import transaction
from django.utils import timezone

from dashboard.actions.runs import append_log
from dashboard.actions.series import materialise_trend, summarise_series
from dashboard.detection import Finding, find_regressions
from dashboard.models import (
    Alert,
    Board,
    Commit,
    Model,
    Result,
    Run,
    SeriesThreshold,
    Strategy,
)
from dashboard.series_key import SeriesKey


class Change(enum.Enum):
    """What a run's measurement did to an alert."""

    RAISED = "raised"
    REMEASURED = "re-measured"
    UNCHANGED = "unchanged"


def detect_regressions(run: Run) -> list[Alert]:
    """The alert of every series of ``run`` that got worse than its baseline, raised or
    brought up to date (``raise_alert``). The commit's alerts that ``run`` measured again
    without finding them worse take its figure too (``remeasure_alert``): an alert shows
    what the commit measures now, whichever run measured it last."""
    findings = find_regressions(run)
    alerts = []
    raised: set[SeriesKey] = set()
    for finding in findings:
        alert, change = raise_alert(run, finding)
        if change is Change.RAISED:
            append_log(run, f"alert: {alert}")
            raised.add(alert.series_key)
        elif change is Change.REMEASURED:
            append_log(run, f"alert: {alert}, {alert.remeasured_note}")
        alerts.append(alert)
    found = {(finding.result.series_key, finding.kind) for finding in findings}
    measured = Result.objects.for_run(run).newest_by_series()
    for alert in Alert.objects.for_commit(run.commit).with_related():
        result = measured.get(alert.series_key)
        if result is None or (alert.series_key, alert.kind) in found:
            continue
        remeasured = remeasure_alert(alert, result)
        if remeasured is not None:
            append_log(run, f"alert: {remeasured}, {remeasured.remeasured_note}")
    # The chart marks each alert at its commit, so its series keeps that point; each model's
    # snapshot is stored once, after its last series.
    for key in sorted(raised):
        summarise_series(key, snapshot=False)
    for model_id in sorted({key.model_id for key in raised}):
        materialise_trend(model_id)
    return alerts


def raise_alert(run: Run, finding: Finding) -> tuple[Alert, Change]:
    """The alert of ``finding``'s series, commit and kind, and what became of it: raised if
    there was none; if another run of the commit raised it, given ``finding``'s figure and
    baseline where that figure is newer and differs. A maintainer's triage stands either
    way."""
    result = finding.result
    with transaction.atomic():
        # Locked: two runs of the commit closing at once each see the other's figure.
        alert, created = Alert.objects.select_for_update().get_or_create(
            commit_id=result.commit_id,
            kind=finding.kind,
            **result.series_key._asdict(),
            defaults={
                "repository_id": run.repository_id,
                "run_id": result.run_id,
                "result": result,
                "baseline": finding.baseline,
                "baseline_value": finding.baseline_value,
                "value": finding.value,
                "p_value": finding.p_value,
                "tolerance": finding.tolerance[:300],
            },
        )
        if created:
            return alert, Change.RAISED
        if not _is_newer_figure(alert, result, finding.value):
            return alert, Change.UNCHANGED
        _take_figure(
            alert, result, finding.value, baseline=finding.baseline,
            baseline_value=finding.baseline_value, p_value=finding.p_value,
        )
    return alert, Change.REMEASURED


def remeasure_alert(alert: Alert, result: Result) -> Alert | None:
    """Give ``alert`` the figure ``result``, a later run of its commit, measured of its
    series, where that run did not find it worse (back under the threshold, or compared
    with another baseline): the figure differs, and the alert says so; its baseline and
    state stand. The alert as updated, or None when nothing changed."""
    value = _measured_figure(result, alert.kind)
    if value is None:
        return None
    with transaction.atomic():
        locked = Alert.objects.select_for_update().get(pk=alert.pk)
        if not _is_newer_figure(locked, result, value):
            return None
        _take_figure(locked, result, value)
    alert.refresh_from_db()
    return alert


def _measured_figure(result: Result, kind: str) -> float | None:
    """What ``result`` measured of what an alert of ``kind`` watches; None where it
    measured nothing of it (a reused result's samples are an older compile's)."""
    if kind == Alert.Kind.BYTES:
        return result.planned_bytes
    if kind == Alert.Kind.RAM:
        return result.board_ram_bytes
    if result.is_reused or not result.latency_samples_ms:
        return None
    return statistics.median(result.latency_samples_ms)


def _is_newer_figure(alert: Alert, result: Result, value: float) -> bool:
    # A run of the commit detected again later (a late merge base) is older than the one
    # whose figure the alert holds: the newest measurement wins, not the latest detection.
    # The same figure again changes nothing, so nothing is written.
    return value != alert.value and result.pk >= alert.result_id


def _take_figure(alert: Alert, result: Result, value: float, **baseline) -> None:
    alert.previous_value, alert.value, alert.remeasured_at = alert.value, value, timezone.now()
    alert.result, alert.run_id = result, result.run_id
    for name, field_value in baseline.items():
        setattr(alert, name, field_value)
    alert.save()


def triage_alert(alert: Alert, state: str) -> Alert:
    if state not in Alert.State.values:
        raise ValueError(f"unknown alert state {state!r}; known: {', '.join(Alert.State.values)}")
    alert.state = state
    alert.save(update_fields=["state", "updated_at"])
    return alert


def triage_commit_alerts(commit: Commit, state: str) -> int:
    """Give every open alert of ``commit`` the state ``state`` at once: a commit that
    meant to change its models is triaged in one step. Returns how many changed."""
    if state not in Alert.State.values:
        raise ValueError(f"unknown alert state {state!r}; known: {', '.join(Alert.State.values)}")
    return (
        Alert.objects.for_commit(commit).open().exclude(state=state)
        .update(state=state, updated_at=timezone.now())
    )


def set_series_threshold(model: Model, strategy: Strategy, board: Board, threshold: int):
    override, _ = SeriesThreshold.objects.update_or_create(
        model=model, strategy=strategy, board=board, defaults={"bytes_threshold": threshold}
    )
    return override
