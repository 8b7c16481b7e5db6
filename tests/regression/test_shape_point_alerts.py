"""Change detection per shape point: each point of a model's shape axis is its own series."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard import actions, notifications
from dashboard.models import Alert, Result, Run, Series
from tests.regression.history import START, bytes_only

pytestmark = pytest.mark.django_db

SMALL, LARGE = {"h": 64, "w": 64}, {"h": 256, "w": 256}


@pytest.fixture
def repository():
    return actions.track_repository("tracked", "/nonexistent")


def record_points(repository, index: int, planned: dict[str, int], *, parent: str = "") -> Run:
    """A finished run of commit ``index`` measuring "pool" under greedy-by-size at each
    point of ``planned`` (label -> planned bytes), as a worker records a shape axis."""
    points = {"h=64,w=64": SMALL, "h=256,w=256": LARGE}
    commit = actions.record_commit(
        repository, sha=f"{index:02d}" + "d" * 38, parent_sha=parent, branch="main",
        author="Ada Planner", message=f"Commit {index}",
        committed_at=START + timedelta(hours=index),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(
        run, models=[("pool", "zoo:pool_reuse")], strategies=["greedy-by-size"],
        boards=["cpu"], total=len(planned),
    )
    for at, value in planned.items():
        report = bytes_only(value, shape_point=points[at], reserved_at_bound_bytes=1 << 20)
        actions.record_result(
            run, model="pool", strategy="greedy-by-size", board="cpu", report=report
        )
    actions.finish_run(run)
    run.refresh_from_db()
    return run


def test_a_point_that_grows_alerts_naming_the_point_and_leaves_the_other_alone(repository):
    first = record_points(repository, 0, {"h=64,w=64": 50_000, "h=256,w=256": 800_000})
    second = record_points(
        repository, 1, {"h=64,w=64": 50_000, "h=256,w=256": 808_192}, parent=first.commit.sha
    )

    alert = Alert.objects.get()
    assert alert.shape_label == "h=256,w=256"
    assert alert.result.shape_point == LARGE
    # Compared with the same point at the parent, not with the other point's figures.
    assert alert.baseline.shape_label == "h=256,w=256"
    assert (alert.baseline_value, alert.value) == (800_000, 808_192)
    assert " at h=256,w=256 " in str(alert)
    assert "alert: Planned bytes of pool / greedy-by-size / cpu at h=256,w=256" in second.log
    assert second.status == Run.Status.SUCCEEDED

    small = Series.objects.get(shape_label="h=64,w=64")
    large = Series.objects.get(shape_label="h=256,w=256")
    assert [p[2] for p in small.points] == [50_000, 50_000]
    assert [p[2] for p in large.points] == [800_000, 808_192]
    assert small.commits == large.commits == 2
    assert Result.objects.get(pk=small.latest_result_id).reserved_at_bound_bytes == 1 << 20


def test_two_points_at_very_different_sizes_are_no_regression_of_each_other(repository):
    # Were the points one series, the larger would read as growth over the smaller.
    first = record_points(repository, 0, {"h=64,w=64": 50_000, "h=256,w=256": 800_000})
    record_points(
        repository, 1, {"h=64,w=64": 40_000, "h=256,w=256": 700_000}, parent=first.commit.sha
    )

    assert not Alert.objects.exists()
    assert Series.objects.count() == 2


def test_the_slack_message_names_the_point(repository):
    first = record_points(repository, 0, {"h=64,w=64": 50_000, "h=256,w=256": 800_000})
    second = record_points(
        repository, 1, {"h=64,w=64": 60_000, "h=256,w=256": 800_000}, parent=first.commit.sha
    )

    text = notifications.slack_message(second, list(Alert.objects.all()))["text"]

    assert "• pool / greedy-by-size / cpu at h=64,w=64: planned bytes" in text
