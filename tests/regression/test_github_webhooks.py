"""GitHub webhooks: verified before parsed, deduplicated, logged, and queued, never a 500."""

from __future__ import annotations

import json

import pytest

from dashboard import actions, tracking
from dashboard.demo import DEMO_COMMITS, git
from dashboard.models import Commit, PullRequest, Run, WebhookDelivery
from tests.helpers import hold_planned_runs
from tests.regression.conftest import SECRET, deliver, pull_request_payload, push_payload

Outcome = WebhookDelivery.Outcome


@pytest.fixture
def tracked(db, demo_repository_path):
    repository = actions.track_repository("tracked", str(demo_repository_path))
    repository.webhook_secret = SECRET
    repository.github_repository = "octo/models"
    repository.save()
    return repository


@pytest.fixture
def head(demo_repository_path):
    return git(demo_repository_path, "rev-parse", "HEAD")


@pytest.fixture
def queued(monkeypatch):
    """The runs handed to the workers (no compile in these tests)."""
    return hold_planned_runs(monkeypatch)


def test_it_rejects_a_bad_signature_and_records_nothing(client, tracked, head):
    response = deliver(client, push_payload(head), event="push", secret="wrong")

    assert response.status_code == 401
    delivery = WebhookDelivery.objects.get()
    assert delivery.outcome == Outcome.BAD_SIGNATURE
    assert delivery.payload is None and not delivery.accepted
    assert not Commit.objects.exists()


def test_it_rejects_a_missing_signature(client, tracked, head):
    response = deliver(client, push_payload(head), event="push", signature="")

    assert response.status_code == 401
    assert "missing" in response.json()["detail"]


def test_it_answers_404_for_an_unknown_repository(client, tracked, head):
    response = deliver(client, push_payload(head), event="push", url="/webhooks/github/nope")

    assert response.status_code == 404
    assert WebhookDelivery.objects.get().outcome == Outcome.UNKNOWN_REPOSITORY


def test_it_rejects_a_payload_for_another_github_repository(client, tracked, head):
    response = deliver(client, push_payload(head, full_name="octo/other"), event="push")

    assert response.status_code == 404


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b"\xff\xfe", json.dumps({"ref": "refs/heads/main"}).encode(),
     json.dumps(push_payload("zz" * 20)).encode()],
    ids=["not-json", "not-an-object", "not-utf8", "no-after", "bad-sha"],
)
def test_it_answers_400_for_a_malformed_signed_payload(client, tracked, body):
    response = deliver(client, None, event="push", body=body)

    assert response.status_code == 400
    assert WebhookDelivery.objects.get().outcome == Outcome.MALFORMED
    assert not Commit.objects.exists()


def test_it_answers_a_ping(client, tracked):
    ping = {"zen": "Keep it logically awesome.", "hook_id": 1,
            "repository": {"full_name": "octo/models"}}
    response = deliver(client, ping, event="ping")

    assert response.status_code == 200
    assert response.json()["outcome"] == Outcome.PING


def test_it_queues_a_push_and_answers_202(
    client, tracked, head, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = deliver(client, push_payload(head), event="push", guid="guid-1")

    assert response.status_code == 202
    delivery = WebhookDelivery.objects.get(guid="guid-1")
    assert delivery.outcome == Outcome.QUEUED and delivery.accepted
    assert len(callbacks) == 1
    # Nothing slow happened in the request: the commits wait for the task.
    assert not Commit.objects.exists()


def test_a_redelivery_creates_nothing_new(
    client, tracked, head, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = deliver(client, push_payload(head), event="push", guid="guid-2")
    commits, runs = Commit.objects.count(), Run.objects.count()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = deliver(client, push_payload(head), event="push", guid="guid-2")

    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json()["outcome"] == Outcome.DUPLICATE
    assert not callbacks
    counts = (Commit.objects.count(), Run.objects.count())
    assert counts == (commits, runs) == (len(DEMO_COMMITS), 1)
    assert len(queued) == 1


def test_a_delivery_rejected_before_is_accepted_once_the_secret_is_right(client, tracked, head):
    deliver(client, push_payload(head), event="push", guid="guid-3", secret="old")

    response = deliver(client, push_payload(head), event="push", guid="guid-3")

    assert response.status_code == 202
    assert list(WebhookDelivery.objects.order_by("id").values_list("outcome", flat=True)) == [
        Outcome.BAD_SIGNATURE, Outcome.QUEUED,
    ]


def test_a_push_records_its_commits_and_runs_the_head_on_its_branch(
    client, tracked, head, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, push_payload(head, commits=[head]), event="push", guid="guid-4")

    commit = Commit.objects.get(sha=head)
    assert commit.branch == "main"
    assert commit.title == "Go back to 32x32 inputs for the small CNN"
    # Its history is recorded too, so detection finds a baseline through parent_sha.
    assert Commit.objects.filter(repository=tracked).count() == len(DEMO_COMMITS)
    assert commit.parent() is not None
    run = Run.objects.get()
    assert (run.commit, run.trigger) == (commit, "push")
    assert queued == [run.pk]
    delivery = WebhookDelivery.objects.get(guid="guid-4")
    assert delivery.outcome == Outcome.PROCESSED and delivery.processed_at


def test_it_ignores_tag_pushes_and_deleted_branches(client, tracked, head):
    tag = deliver(client, push_payload(head, ref="refs/tags/v1"), event="push")
    deleted = deliver(client, {**push_payload("0" * 40), "deleted": True}, event="push")

    assert (tag.status_code, deleted.status_code) == (200, 200)
    assert set(WebhookDelivery.objects.values_list("outcome", flat=True)) == {Outcome.IGNORED}


def test_a_pull_request_runs_its_head_and_makes_sure_its_merge_base_has_a_run(
    client, tracked, demo_repository_path, queued, django_capture_on_commit_callbacks
):
    base = git(demo_repository_path, "rev-parse", "HEAD~2")
    git(demo_repository_path, "checkout", "-q", "-b", "feature", base)
    (demo_repository_path / "notes.txt").write_text("a change on the branch\n")
    git(demo_repository_path, "add", "notes.txt")
    git(demo_repository_path, "commit", "-q", "-m", "Add notes")
    feature = git(demo_repository_path, "rev-parse", "HEAD")
    main = git(demo_repository_path, "rev-parse", "main")

    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(
            client, pull_request_payload(7, head_sha=feature, base_sha=main), event="pull_request"
        )

    assert response.status_code == 202
    pull_request = PullRequest.objects.get(number=7)
    assert (pull_request.head_sha, pull_request.base_sha) == (feature, base)
    head_run = Run.objects.get(commit__sha=feature)
    assert head_run.pull_request == pull_request
    assert Run.objects.filter(commit__sha=base).exists()
    assert Commit.objects.get(sha=feature).branch == "feature"
    assert len(queued) == 2


def test_it_ignores_pull_request_actions_that_change_no_code(client, tracked, head):
    payload = pull_request_payload(7, head_sha=head, base_sha=head, action="labeled")

    response = deliver(client, payload, event="pull_request")

    assert response.status_code == 200
    assert WebhookDelivery.objects.get().outcome == Outcome.IGNORED


def test_a_closed_pull_request_leaves_the_open_ones_and_runs_nothing(
    client, tracked, head, django_capture_on_commit_callbacks
):
    actions.record_pull_request(tracked, number=7, title="Widen", head_sha=head)
    payload = pull_request_payload(7, head_sha=head, base_sha=head, action="closed")
    payload["pull_request"]["merged"] = True
    unknown = pull_request_payload(9, head_sha=head, base_sha=head, action="closed")

    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(client, payload, event="pull_request", guid="closed-7")
        deliver(client, unknown, event="pull_request", guid="closed-9")

    assert response.status_code == 202
    pull_request = PullRequest.objects.get(number=7)
    assert (pull_request.state, pull_request.closed_at is not None) == ("merged", True)
    assert not PullRequest.objects.open().exists()
    assert not Run.objects.exists()
    assert WebhookDelivery.objects.get(guid="closed-7").outcome == Outcome.PROCESSED
    assert WebhookDelivery.objects.get(guid="closed-9").outcome == Outcome.IGNORED


def test_the_url_without_a_name_finds_the_repository_whose_secret_verifies(
    client, tracked, head, django_capture_on_commit_callbacks
):
    other = actions.track_repository("other", "/nonexistent")
    other.webhook_secret = "another-secret"
    other.save()

    response = deliver(client, push_payload(head), event="push", url="/webhooks/github")

    assert response.status_code == 202
    assert WebhookDelivery.objects.get().repository == tracked


def _process_queued_push(tracked, after: str) -> WebhookDelivery:
    """A push accepted earlier, processed now as the task would."""
    delivery = actions.accept_delivery(
        guid="g", event="push", action="", repository=tracked, outcome=Outcome.QUEUED,
        status_code=202, payload=push_payload(after),
    )
    tracking.process_delivery(delivery)
    delivery.refresh_from_db()
    return delivery


def test_a_delivery_whose_git_work_fails_is_logged_as_failed(tracked, monkeypatch):
    delivery = _process_queued_push(tracked, "ab" * 20)

    assert delivery.outcome == Outcome.FAILED
    assert "ab" * 5 in delivery.detail


def test_deliveries_are_listed_in_the_admin(admin_client, client, tracked, head):
    deliver(client, push_payload(head), event="push", secret="wrong", guid="guid-admin")

    response = admin_client.get("/admin/dashboard/webhookdelivery/")

    assert response.status_code == 200
    assert "guid-admin" in response.content.decode()


def test_unsigned_deliveries_are_logged_once_a_window_and_counted(settings, client, tracked,
                                                                   head):
    from django.core.cache import cache

    from dashboard.actions.deliveries import _rejection_keys

    settings.PEAKWATCH_WEBHOOK_REJECTION_WINDOW = 60
    marker, unlogged = _rejection_keys(Outcome.BAD_SIGNATURE, tracked)
    cache.delete_many([marker, unlogged])

    answers = [deliver(client, push_payload(head), event="push", secret="forged").status_code
               for _ in range(30)]
    rows_in_window = WebhookDelivery.objects.count()
    cache.delete(marker)  # the window is over
    deliver(client, push_payload(head), event="push", secret="forged")

    assert set(answers) == {401}
    assert rows_in_window == 1
    latest = WebhookDelivery.objects.order_by("-id").first()
    assert latest.outcome == Outcome.BAD_SIGNATURE
    assert "29 more like this" in latest.detail


def test_a_signed_payload_holding_a_nul_character_is_malformed(client, tracked, head):
    payload = push_payload(head)
    payload["head_commit"]["message"] = "nul \u0000 inside"

    response = deliver(client, payload, event="push")

    assert response.status_code == 400
    assert WebhookDelivery.objects.get().outcome == Outcome.MALFORMED


def _without_repository(payload: dict) -> dict:
    return {key: value for key, value in payload.items() if key != "repository"}


@pytest.mark.parametrize(
    ("github_repository", "clone_url", "url", "about"),
    [
        ("octo/models", None, "/webhooks/github/tracked", None),
        ("", None, "/webhooks/github/tracked", {"full_name": "octo/models"}),
        ("octo/models", None, "/webhooks/github", {"full_name": "octo/other"}),
        # A clone URL that merely ends like the payload's repository is another one.
        ("", "https://git.example/mirror/octo/models.git", "/webhooks/github/tracked",
         {"full_name": "octo/models", "clone_url": "https://github.com/octo/models.git"}),
    ],
    ids=["names-none", "unmapped-repository", "unnamed-url-other-name", "url-suffix-only"],
)
def test_a_payload_is_never_taken_for_a_repository_it_does_not_name(
    client, tracked, head, github_repository, clone_url, url, about
):
    tracked.github_repository = github_repository
    tracked.clone_url = clone_url or tracked.clone_url
    tracked.save()
    payload = _without_repository(push_payload(head))
    if about is not None:
        payload["repository"] = about

    response = deliver(client, payload, event="push", url=url)

    assert response.status_code == 404
    assert WebhookDelivery.objects.get().outcome == Outcome.UNKNOWN_REPOSITORY
    assert not WebhookDelivery.objects.filter(accepted=True).exists()


def test_a_payload_naming_the_clone_url_exactly_is_taken(client, tracked, head):
    tracked.github_repository = ""
    tracked.clone_url = "git@github.com:Octo/Models.git"
    tracked.save()
    payload = push_payload(head)
    payload["repository"]["clone_url"] = "https://github.com/octo/models.git"

    response = deliver(client, payload, event="push")

    assert response.status_code == 202


@pytest.fixture
def fork_head(demo_repository_path):
    """A commit only a fork's pull request brought: under refs/pull/5/head, on no branch."""
    git(demo_repository_path, "checkout", "-q", "-b", "fork", "HEAD~1")
    (demo_repository_path / "notes.txt").write_text("from a stranger\n")
    git(demo_repository_path, "add", "notes.txt")
    git(demo_repository_path, "commit", "-q", "-m", "Add notes")
    sha = git(demo_repository_path, "rev-parse", "HEAD")
    git(demo_repository_path, "update-ref", "refs/pull/5/head", sha)
    git(demo_repository_path, "checkout", "-q", "main")
    git(demo_repository_path, "branch", "-q", "-D", "fork")
    return sha


def test_a_push_naming_a_commit_not_on_its_branch_runs_nothing(
    client, tracked, head, fork_head, queued, django_capture_on_commit_callbacks
):
    # Given a fork's pull request, waiting for a maintainer
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, pull_request_payload(
            5, head_sha=fork_head, base_sha=head, association="NONE", head_repo="stranger/models"
        ), event="pull_request", guid="pr")
    waiting = Run.objects.get(commit__sha=fork_head)
    assert waiting.awaits_approval

    # When a signed push claims the fork's head was pushed to main
    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(client, push_payload(fork_head, commits=[fork_head]), event="push",
                           guid="forged-push")

    # Then the remote's main does not hold it: nothing is recorded on main, nothing runs,
    # and the fork's commit still waits
    assert response.status_code == 202
    delivery = WebhookDelivery.objects.get(guid="forged-push")
    assert delivery.outcome == Outcome.FAILED
    assert f"names {fork_head[:10]}, which is not on 'main'" in delivery.detail
    commit = Commit.objects.get(sha=fork_head)
    assert commit.branch != "main" and commit.awaits_approval
    assert not Run.objects.filter(trigger="push").exists()
    assert Run.objects.get(pk=waiting.pk).awaits_approval
    assert waiting.pk not in queued


def test_a_push_whose_branch_moved_on_since_still_runs_its_head(
    tracked, demo_repository_path, queued
):
    older = git(demo_repository_path, "rev-parse", "HEAD~1")
    delivery = _process_queued_push(tracked, older)

    assert delivery.outcome == Outcome.PROCESSED, delivery.detail
    assert Run.objects.get().commit.sha == older


def test_a_queued_push_of_a_deleted_branch_is_ignored_with_why(tracked, queued):
    delivery = _process_queued_push(tracked, "0" * 40)

    assert delivery.outcome == Outcome.IGNORED
    assert delivery.detail == "refs/heads/main was deleted: nothing to run"
    assert not Commit.objects.exists() and not Run.objects.exists()


def _branch(path, name: str) -> str:
    """A branch of the tracked repository one commit past main; its head."""
    git(path, "checkout", "-q", "-b", name, "main")
    (path / f"{name.replace('/', '-')}.txt").write_text(f"work on {name}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", f"Work on {name}")
    sha = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "main")
    return sha


def test_a_push_to_a_branch_nobody_named_runs_nothing(
    client, tracked, demo_repository_path, queued, django_capture_on_commit_callbacks
):
    sha = _branch(demo_repository_path, "feature/wip")
    with django_capture_on_commit_callbacks(execute=True):
        response = deliver(client, push_payload(sha, ref="refs/heads/feature/wip"),
                           event="push", guid="wip")

    assert response.status_code == 202
    delivery = WebhookDelivery.objects.get(guid="wip")
    assert delivery.outcome == Outcome.IGNORED
    assert "pushes to 'feature/wip' do not run: only 'main'" in delivery.detail
    assert not Run.objects.exists() and not Commit.objects.filter(sha=sha).exists()
    assert queued == []


def test_a_push_runs_on_the_branches_the_settings_or_the_manifest_name(
    client, tracked, demo_repository_path, queued, django_capture_on_commit_callbacks
):
    tracked.run_branches = "release/*, hotfix"
    tracked.save()
    release = _branch(demo_repository_path, "release/1.0")
    other = _branch(demo_repository_path, "releases")
    # The manifest on the default branch names one more.
    manifest = demo_repository_path / "peakwatch.toml"
    manifest.write_text(manifest.read_text().replace(
        "[suite]\n", '[suite]\nbranches = ["nightly"]\n', 1))
    git(demo_repository_path, "commit", "-q", "-am", "Run pushes to nightly too")
    nightly = _branch(demo_repository_path, "nightly")

    for sha, ref in ((release, "release/1.0"), (other, "releases"), (nightly, "nightly")):
        with django_capture_on_commit_callbacks(execute=True):
            deliver(client, push_payload(sha, ref=f"refs/heads/{ref}"), event="push", guid=ref)

    ran = {run.commit.sha: run.commit.branch for run in Run.objects.select_related("commit")}
    assert ran == {release: "release/1.0", nightly: "nightly"}
    assert WebhookDelivery.objects.get(guid="releases").outcome == Outcome.IGNORED
    assert len(queued) == 2
