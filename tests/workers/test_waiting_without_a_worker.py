"""A run whose queue no worker consumes does not wait in silence: the API names the queue,
and ``run --wait`` and the CI client say so within a poll and give up after the grace
period they were given, naming it. Tasks go through Redis; no worker is started."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command

from dashboard import actions, ci_client, queue
from dashboard.demo import create_demo_repository
from dashboard.models import Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


@pytest.fixture
def repository(tmp_path, broker):
    cache.delete(queue.CONSUMERS_KEY)
    path = tmp_path / "repo"
    create_demo_repository(path, [("Track a tiny model", {"small-cnn": {"channels": 4}})])
    return actions.track_repository("lonely", str(path))


def _head(repository) -> str:
    from dashboard import tracking

    mirror = tracking.mirror_of(repository)
    return tracking.resolve_revision(mirror, repository.default_branch,
                                     branch=repository.default_branch)


def test_run_wait_names_the_queue_no_worker_consumes_and_gives_up(repository, capsys):
    with pytest.raises(CommandError) as gave_up:
        call_command("run", "lonely", "--wait", "--worker-grace", "1")

    printed = capsys.readouterr().out
    assert "waiting: no worker consumes peakwatch" in printed
    assert "worker -Q peakwatch" in printed
    assert gave_up.value.returncode == 1
    assert "waited 1 s with no worker on peakwatch" in str(gave_up.value)
    # The API says the same of the run, which is still queued.
    run = Run.objects.get()
    assert run.status == Run.Status.QUEUED


def test_the_api_and_the_ci_client_name_it_too(repository, client, live_server, monkeypatch,
                                                capsys):
    token = actions.create_api_token("ci", repository)[1]
    monkeypatch.setenv("PEAKWATCH_TOKEN", token)

    code = ci_client.main(
        ["--url", live_server.url, "--repository", "lonely", "--branch", "main",
         "--interval", "0.2", "--worker-grace", "1"],
    )

    printed = capsys.readouterr()
    # The branch is looked up by the planning queue's worker: there is none.
    assert "no worker consumes queue peakwatch, which looks revisions up" in printed.out
    assert code == ci_client.EXIT_RUN
    assert "no worker on queue peakwatch for 1 s" in printed.err

    # A revision already recorded gets its run at once; the run then waits on the same queue.
    run = actions.start_run(actions.record_commit(
        repository, sha=_head(repository), branch="main", committed_at="2026-11-01T00:00Z",
    ))
    answer = client.get(f"/api/runs/{run.pk}/").json()
    assert answer["waiting_on"] == ["peakwatch"]
