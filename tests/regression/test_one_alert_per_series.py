"""One alert per series, commit and kind, however many runs measure the commit.

Given a pull request whose head grows two series, GitHub's signed webhook runs the head and
its merge base; then CI asks ``POST /api/runs`` for the same commit, and the worker reuses
every figure from the compile cache. Retries, redeliveries and ``manage.py run`` measure it
again. Whatever the path, the commit keeps one alert per series and kind: a re-run with the
same figure changes nothing, a re-run with another figure updates the alert and says so,
and a maintainer's triage stays.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from dashboard import actions
from dashboard.demo import commit_file, git
from dashboard.models import Alert, Result, Run
from tests.helpers import hold_planned_runs
from tests.regression.conftest import SECRET, deliver, pull_request_payload
from tests.regression.history import bytes_only, record_run

GREEDY, NONE = ("small-cnn", "greedy-by-size"), ("small-cnn", "none")
BASE = {GREEDY: 50_000, NONE: 80_000}
#: The pull request grows both series by far more than the 4 KiB threshold.
HEAD = {GREEDY: 58_192, NONE: 96_384}


@pytest.fixture
def tracked(db, demo_repository_path, github_api):
    repository = actions.track_repository("tracked", str(demo_repository_path))
    repository.webhook_secret = SECRET
    repository.github_repository = "octo/models"
    repository.github_token = "ghp_test"
    repository.slack_webhook_url = github_api.url + "/services/T0/B0/X"
    repository.save()
    return repository


@pytest.fixture
def queued(monkeypatch):
    """Runs handed to the workers; each test measures them as a worker would."""
    return hold_planned_runs(monkeypatch)


@pytest.fixture
def token(tracked):
    return actions.create_api_token("ci", tracked)[1]


@pytest.fixture
def branches(demo_repository_path):
    """(main, feature): the feature branch adds one commit on main's head."""
    main = git(demo_repository_path, "rev-parse", "HEAD")
    git(demo_repository_path, "checkout", "-q", "-b", "feature")
    feature = commit_file(
        demo_repository_path, "notes.txt", "wider layers\n", "Widen the small CNN",
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    return main, feature


def measure(run: Run, figures: dict) -> Run:
    """What a worker does with ``run``: each (model, strategy) compiled to the planned bytes
    given, or reused from the Result given (the compile cache), then the run closed."""
    actions.begin_run(
        run, models=[(model, "zoo:small_cnn") for model, _ in figures],
        strategies=sorted({strategy for _, strategy in figures}), boards=["cpu"],
        total=len(figures),
    )
    for (model, strategy), figure in figures.items():
        if isinstance(figure, Result):
            actions.reuse_result(run, model=model, strategy=strategy, board="cpu", source=figure)
        else:
            actions.record_result(
                run, model=model, strategy=strategy, board="cpu", report=bytes_only(figure)
            )
    actions.finish_run(run)
    run.refresh_from_db()
    return run


@pytest.fixture
def pull_request_run(client, tracked, branches, queued, django_capture_on_commit_callbacks):
    """The pull request's run of its head, measured after its merge base's, as GitHub's
    signed delivery started them: two bytes alerts."""
    main, feature = branches
    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(
            client, pull_request_payload(3, head_sha=feature, base_sha=main),
            event="pull_request", guid="pr-opened",
        )
    assert response.status_code == 202
    with django_capture_on_commit_callbacks(execute=True):
        measure(Run.objects.get(commit__sha=main), BASE)
        run = measure(Run.objects.get(commit__sha=feature, pull_request__number=3), HEAD)
    assert run.trigger == "pull_request" and run.status == Run.Status.SUCCEEDED
    assert Alert.objects.filter(run=run).count() == 2
    return run


def api_run(client, token, sha: str, django_capture_on_commit_callbacks) -> Run:
    """CI's ``POST /api/runs --rerun`` for ``sha``: the run it started, not measured yet (a
    run again, not the earlier run a plain call would attach to)."""
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/runs", data={"repository": "tracked", "sha": sha, "rerun": True},
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}",
        )
    assert response.status_code == 202
    return Run.objects.get(pk=response.json()["run"])


def reused(run: Run) -> dict:
    """Every figure of ``run``, as the compile cache hands them to a later run."""
    return {
        (result.model.name, result.strategy.name): result
        for result in Result.objects.for_run(run).select_related("model", "strategy")
    }


def snapshot(**which) -> list[tuple]:
    """The alerts (``which``: filters) as stored, to tell whether anything was written."""
    return list(Alert.objects.filter(**which).order_by("id").values_list(
        "id", "kind", "state", "value", "baseline_value", "run_id", "result_id", "updated_at",
        "previous_value",
    ))


def test_ci_running_a_pull_requests_commit_again_raises_no_second_alert(
    client, token, pull_request_run, django_capture_on_commit_callbacks
):
    before = snapshot()

    # When CI asks for the same commit and every figure comes from the cache
    run = api_run(client, token, pull_request_run.commit.sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(run, reused(pull_request_run))

    # Then the commit still has one alert per series, untouched
    assert run.trigger == "api" and run.status == Run.Status.SUCCEEDED
    assert snapshot() == before
    assert "alert" not in run.log
    alerts_page = client.get(reverse("alerts")).content.decode()
    assert alerts_page.count("<tr data-alert=") == 2
    overview = client.get(reverse("home")).content.decode()
    assert overview.count(f'data-alert-commit="{run.commit.sha}"') == 1
    assert 'data-moved="2"' in overview and overview.count("<tr data-alert=") == 2


def test_retries_and_redeliveries_of_the_same_commit_change_nothing(
    client, tracked, token, pull_request_run, queued, django_capture_on_commit_callbacks
):
    feature, main = pull_request_run.commit.sha, pull_request_run.pull_request.base_sha
    before = snapshot()

    # GitHub redelivers the event, then sends a new one for the same head
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, pull_request_payload(3, head_sha=feature, base_sha=main),
                event="pull_request", guid="pr-opened")
        deliver(client, pull_request_payload(3, head_sha=feature, base_sha=main,
                                              action="synchronize"),
                event="pull_request", guid="pr-synchronize")
    # A worker's task is redelivered after the run closed: its result is stored again; and
    # detection runs again, as when a late merge base arrives
    with django_capture_on_commit_callbacks(execute=True):
        actions.record_result(pull_request_run, model="small-cnn", strategy="none",
                              board="cpu", report=bytes_only(HEAD[NONE]))
        actions.finish_run(pull_request_run)
        actions.detect_regressions(pull_request_run)
    # CI retries twice: the cache answers once, a cold worker compiles the other
    first = api_run(client, token, feature, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(first, reused(pull_request_run))
    second = api_run(client, token, feature, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(second, HEAD)
    # And a maintainer runs it by hand
    with django_capture_on_commit_callbacks(execute=True):
        by_hand = measure(actions.start_run(pull_request_run.commit, trigger="manual"), HEAD)

    assert Run.objects.filter(commit__sha=feature).count() == 4
    assert by_hand.status == Run.Status.SUCCEEDED
    assert snapshot() == before


def test_a_maintainers_triage_stays_when_the_commit_runs_again(
    maintainer_client, token, pull_request_run, django_capture_on_commit_callbacks
):
    client, commit = maintainer_client, pull_request_run.commit
    # Given the commit triaged as intended from the overview
    response = client.post(
        reverse("commit-alerts-triage", args=[commit.pk]), {"state": "intended", "next": "/"}
    )
    assert response.status_code == 302

    # When CI runs it again, and the figures come from the cache
    run = api_run(client, token, commit.sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(run, reused(pull_request_run))

    # Then it stays intended, and does not come back on the overview
    assert set(Alert.objects.values_list("state", flat=True)) == {"intended"}
    assert Alert.objects.count() == 2
    assert f'data-alert-commit="{commit.sha}"' not in client.get(reverse("home")).content.decode()

    # And a triage made after a re-run stays through the next one too
    alert = Alert.objects.get(strategy__name="none")
    client.post(reverse("alert-triage", args=[alert.pk]), {"state": "acknowledged"})
    again = api_run(client, token, commit.sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(again, HEAD)
    assert dict(Alert.objects.values_list("strategy__name", "state")) == {
        "none": "acknowledged", "greedy-by-size": "intended",
    }


def test_a_re_run_measuring_another_figure_updates_the_alert_and_says_so(
    client, maintainer, token, pull_request_run, django_capture_on_commit_callbacks
):
    grown = Alert.objects.get(strategy__name="none")
    actions.triage_alert(grown, Alert.State.ACKNOWLEDGED)
    untouched = snapshot(strategy__name="greedy-by-size")

    # When CI's run compiles the commit again and plans more for one series
    run = api_run(client, token, pull_request_run.commit.sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(run, {GREEDY: reused(pull_request_run)[GREEDY], NONE: 100_000})

    # Then that series' alert takes the new figure, keeps the old one, and its triage
    grown.refresh_from_db()
    assert Alert.objects.count() == 2
    assert (grown.value, grown.previous_value, grown.baseline_value) == (100_000, 96_384, 80_000)
    assert (grown.run, grown.result.run, grown.state) == (run, run, Alert.State.ACKNOWLEDGED)
    assert grown.remeasured_at is not None
    assert grown.remeasured_note == "re-measured: 96,384 B → 100,000 B"
    assert f"{grown}, re-measured: 96,384 B → 100,000 B" in run.log
    # The other series measured the same figure: not a byte of its alert was rewritten
    assert snapshot(strategy__name="greedy-by-size") == untouched
    client.force_login(maintainer)
    page = client.get(reverse("alerts")).content.decode()
    assert page.count("<tr data-alert=") == 2
    assert "re-measured: 96,384 B → 100,000 B" in page
    overview = client.get(reverse("home")).content.decode()
    assert "re-measured: 96,384 B → 100,000 B" in overview


def test_a_re_run_that_no_longer_finds_the_growth_still_says_what_it_measured(
    client, token, pull_request_run, django_capture_on_commit_callbacks
):
    # When CI's run of the commit measures one series back within the threshold
    run = api_run(client, token, pull_request_run.commit.sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(run, {GREEDY: 50_000 + 1024, NONE: reused(pull_request_run)[NONE]})

    # Then its alert shows the new figure (a maintainer closes it), not the stale one
    alert = Alert.objects.get(strategy__name="greedy-by-size")
    assert (alert.value, alert.previous_value, alert.run) == (51_024, 58_192, run)
    assert alert.state == Alert.State.NEW
    assert "re-measured: 58,192 B → 51,024 B" in run.log
    assert Alert.objects.count() == 2


def test_a_re_run_keeps_the_commit_failing_without_telling_slack_again(
    client, token, pull_request_run, github_api, django_capture_on_commit_callbacks
):
    sha = pull_request_run.commit.sha
    slack_before = [r for r in github_api.requests if "/services/" in r["path"]]
    assert len(slack_before) == 1

    run = api_run(client, token, sha, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        measure(run, reused(pull_request_run))

    statuses = [r["json"] for r in github_api.requests if r["path"].endswith(f"/statuses/{sha}")]
    # pending for each run as it starts, then its outcome: the re-run's is still a failure
    assert statuses[-1]["state"] == "failure"
    assert statuses[-1]["description"] == "2 regression(s) in small-cnn"
    assert [r for r in github_api.requests if "/services/" in r["path"]] == slack_before


def test_the_overview_counts_series_moved_not_alerts(client, db):
    repository = actions.track_repository("tracked", "/nonexistent")
    base = record_run(repository, 0, {GREEDY: bytes_only(50_000, samples=[1.0] * 20)})
    # Given a commit that grows one series in bytes and slows it down: two alerts
    record_run(repository, 1, {GREEDY: bytes_only(60_000, samples=[2.0] * 20)},
               parent=base.commit.sha)
    assert sorted(Alert.objects.values_list("kind", flat=True)) == ["bytes", "latency"]

    overview = client.get(reverse("home")).content.decode()

    assert 'data-moved="1"' in overview and "moved 1 series of" in overview
    assert "×2" not in overview
    assert overview.count("<tr data-alert=") == 2


@pytest.mark.django_db(transaction=True)
def test_upgrading_merges_each_series_duplicate_alerts_into_one():
    before = [("dashboard", "0015_shape_axis")]
    after = [("dashboard", "0017_unique_alert_per_series")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps

    def model(name):
        return old.get_model("dashboard", name).objects

    repository = model("Repository").create(name="tracked", clone_url="/nonexistent")
    when = datetime(2026, 11, 1, tzinfo=UTC)
    parent, commit = (
        model("Commit").create(repository=repository, sha=c * 40, committed_at=when)
        for c in "ab"
    )
    series = {
        "model": model("Model").create(repository=repository, name="small-cnn"),
        "strategy": model("Strategy").create(name="none"),
        "board": model("Board").create(name="cpu"),
        "toolchain": model("Toolchain").get_or_create(spec="")[0],
    }

    def result(commit, planned):
        run = model("Run").create(repository=repository, commit=commit, status="succeeded")
        return model("Result").create(run=run, commit=commit, planned_bytes=planned, **series)

    baseline = result(parent, 80_000)
    pull_request, api, retry = (result(commit, planned) for planned in (96_384, 96_384, 100_000))

    def alert(result, state="new", kind="bytes", value=None):
        return model("Alert").create(
            repository=repository, commit=commit, run_id=result.run_id, result=result,
            baseline=baseline, kind=kind, baseline_value=80_000,
            value=value or result.planned_bytes, state=state, **series,
        )

    # The pull request's alert was triaged; CI's run and a retry raised two more
    triaged = alert(pull_request, state="intended")
    alert(api)
    alert(retry)
    # A latency alert of the same series is another kind: it stays on its own
    latency = alert(pull_request, kind="latency", value=2.0)

    MigrationExecutor(connection).migrate(after)
    new = MigrationExecutor(connection).loader.project_state(after).apps
    alerts = list(new.get_model("dashboard", "Alert").objects.order_by("id"))
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert [a.pk for a in alerts] == [triaged.pk, latency.pk]
    kept = alerts[0]
    assert kept.state == "intended"
    assert (kept.value, kept.previous_value, kept.result_id) == (100_000, 96_384, retry.pk)
    assert kept.run_id == retry.run_id and kept.remeasured_at is not None
    assert (alerts[1].kind, alerts[1].value, alerts[1].previous_value) == ("latency", 2.0, None)


def test_the_model_page_opens_on_the_bytes_alert_of_a_series_also_slower(client, db):
    repository = actions.track_repository("tracked", "/nonexistent")
    base = record_run(repository, 0, {GREEDY: bytes_only(50_000, samples=[1.0] * 20)})
    record_run(repository, 1, {GREEDY: bytes_only(60_000, samples=[2.0] * 20)},
               parent=base.commit.sha)
    alerts = {alert.kind: alert for alert in Alert.objects.all()}
    # The latency alert is the newer row: the page must not open on it for that.
    assert alerts["latency"].pk > alerts["bytes"].pk

    model = alerts["bytes"].model
    html = client.get(model.get_absolute_url()).content.decode()

    assert f'data-opening-alert="{alerts["bytes"].pk}"' in html
