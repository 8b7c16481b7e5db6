"""A commit's alerts as CI reads them: in series order, and whether they should fail it.

``manage.py run --wait``, ``GET /api/runs/<id>/`` and ``POST /api/runs`` all answer with
the alerts of the run's *commit*, whichever of its runs raised them: CI asks "did this
commit make memory worse?", and a re-run of the same commit must neither hide nor repeat
what an earlier run found. An alert is *open* while it is ``new`` or ``acknowledged``
(acknowledged means "seen", not "accepted"); a maintainer closes it as ``intended``,
``invalid`` or ``fixed``, and only then does the same commit pass.
"""

from __future__ import annotations

from django.urls import reverse

from dashboard.ci_client import fails_on
from dashboard.models import Alert, Commit, Run
from dashboard.notifications import absolute, alerts_url
from dashboard.templatetags.peakwatch import human_bytes
from planner.shapes import label_order

#: What ``--fail-on-alert`` can fail on: the open alerts of one kind (bytes counts a micro
#: board's RAM too), or of any.
FAIL_ON = ("bytes", "ram", "latency", "any")

#: ``run --wait`` and the CI client exit with this when the run succeeded but an open alert
#: of the kind asked for is on the commit; a run that did not succeed keeps its own 1.
EXIT_ALERT = 3


def commit_alerts(commit: Commit) -> list[Alert]:
    """``commit``'s alerts, by model, strategy, board, toolchain and then shape point by
    value (seq=32 before seq=128), bytes before board RAM before latency."""
    alerts = (
        Alert.objects.for_commit(commit).with_related()
        .select_related("baseline__toolchain", "baseline__commit")
    )
    return sorted(alerts, key=lambda a: (
        a.model.name, a.strategy.name, a.board.name, a.toolchain.spec,
        label_order(a.shape_label), a.kind_rank, a.pk,
    ))


def failing(alerts: list[Alert], fail_on: str) -> list[Alert]:
    """The open alerts among ``alerts`` that ``fail_on`` (one of :data:`FAIL_ON`) counts."""
    return [a for a in alerts if a.is_open and fails_on(fail_on, a.kind)]


def open_counts(alerts: list[Alert]) -> dict[str, int]:
    return {kind: sum(a.is_open and a.kind == kind for a in alerts) for kind in Alert.Kind.values}


def series_name(alert: Alert) -> str:
    """``model / strategy / board / toolchain``, and the shape point where the alert is at
    one (`` at seq=512``): one series of a model measured at several points is not another."""
    return f"{alert.model.name} / {alert.strategy.name} / {alert.board.name} / " \
        f"{alert.toolchain.label}{alert.at_point}"


def movement(alert: Alert) -> str:
    """``781.2 KiB → 789.2 KiB (+8,192 B, +1.0%)``: both figures, and the exact change, which
    two rounded sizes can hide."""
    if alert.in_bytes:
        before, after = human_bytes(alert.baseline_value), human_bytes(alert.value)
        change = f"{alert.change:+,.0f} B"
    else:
        before, after = f"{alert.baseline_value:.3f} ms", f"{alert.value:.3f} ms"
        change = f"{alert.change:+.3f} ms"
    percent = alert.relative_change
    share = "" if percent is None else f", {percent:+.1%}"
    return f"{before} → {after} ({change}{share})"


def links(run: Run) -> dict[str, str]:
    """The run's page, the run in the API and its commit's alerts: absolute from
    ``PEAKWATCH_BASE_URL`` (what a CI log or a pull request links to), paths where it is
    set empty."""
    return {
        "page": absolute(run.get_absolute_url()),
        "api": absolute(reverse("api:run-detail", args=[run.pk])),
        "alerts": absolute(alerts_url(run)),
    }
