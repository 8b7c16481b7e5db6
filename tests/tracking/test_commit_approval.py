"""Approval belongs to the commit: code from outside runs by no path before a maintainer
approves it, and once approved, every run of it goes.

The commits from outside here are what a mirror of a GitHub repository holds for a fork's
pull request: reachable from GitHub's ``refs/pull/N/head`` only, on no branch.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard import actions
from dashboard.demo import git
from dashboard.models import Commit, Repository, Run
from tests.helpers import hold_planned_runs
from tests.regression.conftest import SECRET, deliver, pull_request_payload, push_payload

pytestmark = pytest.mark.django_db

STRANGER = {"association": "CONTRIBUTOR", "head_repo": "stranger/models"}


@pytest.fixture
def tracked(demo_repository_path):
    repository = actions.track_repository(
        "tracked", str(demo_repository_path), webhook_secret=SECRET
    )
    repository.github_repository = "octo/models"
    repository.save()
    return repository


@pytest.fixture
def token(tracked):
    return actions.create_api_token("ci", tracked)[1]


@pytest.fixture
def planned(monkeypatch):
    return hold_planned_runs(monkeypatch)


def fork_commit(path, base: str, number: int, text: str) -> str:
    """A stranger's commit on ``base`` that only ``refs/pull/<number>/head`` holds."""
    git(path, "checkout", "-q", "--detach", base)
    (path / "notes.txt").write_text(text)
    git(path, "add", "notes.txt")
    git(path, "commit", "-q", "-m", f"Stranger's change: {text.strip()}")
    sha = git(path, "rev-parse", "HEAD")
    git(path, "update-ref", f"refs/pull/{number}/head", sha)
    git(path, "checkout", "-q", "main")
    return sha


@pytest.fixture
def fork(demo_repository_path):
    main = git(demo_repository_path, "rev-parse", "main")
    return fork_commit(demo_repository_path, main, 5, "from a stranger\n"), main


def open_fork_pull_request(client, capture, head, base, action="opened"):
    with capture(execute=True):
        response = deliver(
            client, pull_request_payload(5, head_sha=head, base_sha=base, action=action,
                                         **STRANGER),
            event="pull_request",
        )
    assert response.status_code == 202
    return Run.objects.filter(commit__sha=head, trigger="pull_request").get()


def post_run(client, token, **body):
    return client.post(
        "/api/runs", data={"repository": "tracked", **body}, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_an_unapproved_fork_head_runs_by_no_path_until_a_maintainer_approves_its_commit(
    client, tracked, token, fork, planned, maintainer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    head, main = fork
    # Given a fork's pull request, whose run waits for a maintainer.
    pull_run = open_fork_pull_request(client, capture, head, main)
    assert pull_run.awaits_approval
    base_runs = list(planned)

    # CI holds the repository's token and is told about the fork's head: it starts the same
    # code. A token lets CI start runs, not vouch for code, so the run waits too rather
    # than being refused: a CI service holds a fork's workflow until approval (as GitHub
    # Actions does), and CI need not ask again once it is approved.
    with capture(execute=True):
        answer = post_run(client, token, sha=head)
        retried = post_run(client, token, sha=head)  # CI retries its step
    assert answer.status_code == 202
    assert answer.json()["status"] == "awaiting-approval"
    assert "approval" in answer.json()["detail"]
    api_run = Run.objects.get(pk=answer.json()["run"])
    assert api_run.awaits_approval
    # Asking again while it waits names the same run: no pile of runs for one approval.
    assert retried.json()["run"] == api_run.pk

    # The command line, with and without --wait.
    out = io.StringIO()
    with capture(execute=True):
        call_command("run", "tracked", "--sha", head, stdout=out)
    assert "waits for a maintainer's approval" in out.getvalue()
    with capture(execute=True), pytest.raises(CommandError, match="approval"):
        call_command("run", "tracked", "--sha", head[:10], "--wait", stdout=io.StringIO())
    command_run = Run.objects.get(commit__sha=head, trigger="command")

    # GitHub redelivers the event as the pull request is reopened; anything else that
    # starts a run (a retry) goes through the same action.
    open_fork_pull_request(client, capture, head, main, action="reopened")
    with capture(execute=True):
        retry = actions.start_run(Commit.objects.get(sha=head), trigger="retry")

    waiting = {pull_run.pk, api_run.pk, command_run.pk, retry.pk}
    assert set(Run.objects.filter(commit__sha=head).values_list("pk", flat=True)) == waiting
    assert all(run.awaits_approval for run in Run.objects.filter(pk__in=waiting))
    assert planned == base_runs, "nothing of the stranger's ran"

    # A maintainer approves the pull request's run: that approves the commit, and every
    # run of it that waited goes.
    client.force_login(maintainer)
    with capture(execute=True):
        response = client.post(f"/runs/{pull_run.pk}/approve")
    assert response.status_code == 302
    commit = Commit.objects.get(sha=head)
    assert commit.approved_by == "maintainer" and commit.approved_at is not None
    released = Run.objects.filter(pk__in=waiting)
    assert {run.status for run in released} == {Run.Status.QUEUED}
    assert {run.approved_by for run in released} == {"maintainer"}
    assert set(planned) - set(base_runs) == waiting

    # Later runs of the approved commit go straight to the queue.
    with capture(execute=True):
        later = post_run(client, token, sha=head)
    assert later.json()["status"] == "queued"
    assert later.json()["run"] in planned
    page = client.get(f"/runs/{later.json()['run']}/").content.decode()
    assert "approved by maintainer" in page
    assert "code from outside, approved by maintainer on" in page


def test_a_new_push_to_the_pull_request_needs_approval_again(
    client, tracked, fork, planned, demo_repository_path, django_capture_on_commit_callbacks
):
    head, main = fork
    first = open_fork_pull_request(client, django_capture_on_commit_callbacks, head, main)
    with django_capture_on_commit_callbacks(execute=True):
        actions.approve_run(first, by="maria")

    newer = fork_commit(demo_repository_path, head, 5, "and more\n")
    second = open_fork_pull_request(
        client, django_capture_on_commit_callbacks, newer, main, action="synchronize"
    )

    assert first.pk in planned and second.awaits_approval and second.pk not in planned
    assert Commit.objects.get(sha=newer).awaits_approval


def test_a_sha_never_seen_that_only_a_pull_request_ref_holds_waits_for_approval(
    client, tracked, token, fork, planned, demo_repository_path,
    django_capture_on_commit_callbacks,
):
    head, main = fork  # no webhook came: Peakwatch meets the commit through the API

    with django_capture_on_commit_callbacks(execute=True):
        answer = post_run(client, token, sha=head)
        on_main = post_run(client, token, sha=main)

    assert answer.json()["status"] == "resolving"
    run = Run.objects.get(commit__sha=head)
    assert run.awaits_approval and run.pk not in planned
    assert Commit.objects.get(sha=head).from_outside
    # The repository's own branch runs at once; so does anything where it trusts everyone.
    assert on_main.json()["status"] == "resolving"
    assert Run.objects.get(commit__sha=main).pk in planned
    Repository.objects.filter(pk=tracked.pk).update(trust=Repository.Trust.EVERYONE)
    other = fork_commit(demo_repository_path, main, 6, "trusted anyway\n")
    with django_capture_on_commit_callbacks(execute=True):
        post_run(client, token, sha=other)
    assert Run.objects.get(commit__sha=other).pk in planned


def test_a_branch_given_to_the_api_never_names_a_pull_requests_ref(
    client, tracked, token, fork, planned, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        answer = post_run(client, token, branch="pull/5/head")

    assert answer.status_code == 202
    assert not Run.objects.exists() and not planned


def test_a_push_that_merges_the_fork_approves_its_commits(
    client, tracked, fork, planned, demo_repository_path, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    head, main = fork
    waiting = open_fork_pull_request(client, capture, head, main)
    # A maintainer merges the pull request (a merge commit: the fork's head is its second
    # parent) and pushes main.
    git(demo_repository_path, "merge", "-q", "--no-ff", "-m", "Merge #5", head)
    merge = git(demo_repository_path, "rev-parse", "main")

    payload = {**push_payload(merge, before=main, commits=[head, merge]),
               "pusher": {"name": "maria"}}
    with capture(execute=True):
        deliver(client, payload, event="push")

    commit = Commit.objects.get(sha=head)
    assert not commit.awaits_approval and commit.approved_by == "push to main by maria"
    waiting.refresh_from_db()
    assert waiting.status == Run.Status.QUEUED and waiting.pk in planned

    # Pushed as a new branch of the repository (no "before"), a fork's commit is vouched
    # for as well.
    other = fork_commit(demo_repository_path, main, 6, "vendored\n")
    with capture(execute=True):
        deliver(client, pull_request_payload(6, head_sha=other, base_sha=main, **STRANGER),
                event="pull_request")
    git(demo_repository_path, "branch", "vendor", other)
    with capture(execute=True):
        deliver(client, push_payload(other, ref="refs/heads/vendor"), event="push")
    assert Commit.objects.get(sha=other).approved_by == "push to vendor"
    assert not Run.objects.filter(commit__sha=other).awaiting_approval().exists()


def test_a_fork_naming_a_commit_the_repository_pushed_cannot_hold_its_runs(
    client, tracked, planned, demo_repository_path, django_capture_on_commit_callbacks
):
    main = git(demo_repository_path, "rev-parse", "main")
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, push_payload(main), event="push")
    older = git(demo_repository_path, "rev-parse", "main~2")

    # A stranger opens a pull request whose head is main's own head (against an older base).
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, pull_request_payload(9, head_sha=main, base_sha=older, **STRANGER),
                event="pull_request")

    assert not Commit.objects.get(sha=main).awaits_approval
    assert not Run.objects.filter(commit__sha=main).awaiting_approval().exists()


def test_bisect_refuses_a_range_holding_unapproved_code_from_outside(
    client, tracked, fork, planned, django_capture_on_commit_callbacks
):
    head, main = fork
    open_fork_pull_request(client, django_capture_on_commit_callbacks, head, main)

    with pytest.raises(CommandError, match="no maintainer approved"):
        call_command("bisect", "tracked", "small-cnn", main, head, stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_upgrading_moves_approval_from_runs_to_their_commits():
    before = [("dashboard", "0010_commit_branch_index")]
    after = [("dashboard", "0011_commit_approval")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    repository = old.get_model("dashboard", "Repository").objects.create(
        name="tracked", clone_url="/nonexistent"
    )
    commits, runs = old.get_model("dashboard", "Commit"), old.get_model("dashboard", "Run")
    pull_requests = old.get_model("dashboard", "PullRequest")
    when = datetime(2026, 11, 1, tzinfo=UTC)
    waiting, approved, pushed, ours = (
        commits.objects.create(repository=repository, sha=c * 40, committed_at=when)
        for c in "abcd"
    )
    runs.objects.create(repository=repository, commit=waiting, status="awaiting-approval")
    runs.objects.create(repository=repository, commit=approved, status="succeeded",
                        approved_by="maria", approved_at=when)
    runs.objects.create(repository=repository, commit=pushed, trigger="push")
    for number, head, fork in ((1, approved, True), (2, pushed, True), (3, ours, False)):
        pull_requests.objects.create(repository=repository, number=number, head_sha=head.sha,
                                    from_fork=fork, author_association="MEMBER")

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = MigrationExecutor(connection).loader.project_state(after).apps
    rows = {c.sha[0]: c for c in new.get_model("dashboard", "Commit").objects.all()}
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert (rows["a"].from_outside, rows["a"].approved_at) == (True, None)
    assert rows["b"].from_outside and (rows["b"].approved_by, rows["b"].approved_at) == (
        "maria", when)
    assert not rows["c"].from_outside, "a head the repository pushed is its own code"
    assert not rows["d"].from_outside, "a member's pull request from a branch is trusted"
