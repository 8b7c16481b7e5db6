"""A run is seen finished only together with its alerts.

A CI job polls ``/api/runs/<id>/`` from another process and stops at the first finished
status: if the run's status committed before detection wrote its alerts, that job would read
"no alerts" and pass a regression. So another database connection, looking while detection
runs, must still see the run unfinished.
"""

from __future__ import annotations

import pytest
from django.db import connections

from dashboard import actions
from dashboard.actions import results
from dashboard.models import Alert, Run
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db(transaction=True)


def status_seen_elsewhere(run: Run) -> str:
    """The run's status as a second connection (another process: the API) reads it."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT status FROM dashboard_run WHERE id = %s", [run.pk])
            return cursor.fetchone()[0]
    finally:
        other.close()


def test_another_connection_never_sees_the_run_finished_before_its_alerts(monkeypatch):
    repository = actions.track_repository("demo", "/nonexistent/demo.git")
    base = record_run(repository, 0, {("small-cnn", "none"): bytes_only(50_000)})
    commit = actions.record_commit(
        repository, sha="01" + "d" * 38, parent_sha=base.commit.sha, branch="main",
        author="Ada Planner", message="Grow the small CNN", committed_at=base.commit.committed_at,
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(run, models=[("small-cnn", "zoo:small_cnn")], strategies=["none"],
                      boards=["cpu"], total=1)
    actions.record_result(run, model="small-cnn", strategy="none", board="cpu",
                          report=bytes_only(90_000))
    seen = []
    detect = results.detect_regressions

    def detect_and_look(each):
        seen.append(status_seen_elsewhere(each))
        return detect(each)

    monkeypatch.setattr(results, "detect_regressions", detect_and_look)

    actions.finish_run(run)

    assert seen and all(status not in Run.FINISHED for status in seen)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert Alert.objects.filter(commit=commit, kind=Alert.Kind.BYTES).count() == 1
