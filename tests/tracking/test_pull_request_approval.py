"""Pull requests from outside wait for a maintainer before anything of theirs runs."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from dashboard import actions
from dashboard.demo import git
from dashboard.models import Repository, Run
from tests.helpers import hold_planned_runs
from tests.regression.conftest import SECRET, deliver, pull_request_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def tracked(demo_repository_path):
    repository = actions.track_repository(
        "tracked", str(demo_repository_path), webhook_secret=SECRET
    )
    repository.github_repository = "octo/models"
    repository.save()
    return repository


@pytest.fixture
def feature(demo_repository_path):
    base = git(demo_repository_path, "rev-parse", "HEAD~1")
    git(demo_repository_path, "checkout", "-q", "-b", "feature", base)
    (demo_repository_path / "notes.txt").write_text("from a stranger\n")
    git(demo_repository_path, "add", "notes.txt")
    git(demo_repository_path, "commit", "-q", "-m", "Add notes")
    return git(demo_repository_path, "rev-parse", "HEAD"), git(
        demo_repository_path, "rev-parse", "main"
    )


def open_pull_request(client, capture, feature, **who):
    head, main = feature
    with capture(execute=True):
        response = deliver(
            client, pull_request_payload(5, head_sha=head, base_sha=main, **who),
            event="pull_request",
        )
    assert response.status_code == 202
    return Run.objects.get(commit__sha=head)


@pytest.mark.parametrize(
    ("trust", "who", "waits"),
    [
        ("collaborators", {"association": "MEMBER"}, False),
        ("collaborators", {"association": "CONTRIBUTOR"}, True),
        ("collaborators", {"association": "OWNER", "head_repo": "stranger/models"}, True),
        ("everyone", {"association": "NONE", "head_repo": "stranger/models"}, False),
        ("nobody", {"association": "OWNER"}, True),
    ],
)
def test_who_runs_without_approval_follows_the_repository_setting(
    client, tracked, feature, monkeypatch, django_capture_on_commit_callbacks, trust, who, waits
):
    Repository.objects.filter(pk=tracked.pk).update(trust=trust)
    planned = hold_planned_runs(monkeypatch)

    run = open_pull_request(client, django_capture_on_commit_callbacks, feature, **who)

    assert run.awaits_approval is waits
    assert (run.pk in planned) is not waits
    # The merge base is the repository's own code: it always runs.
    assert run.pull_request.base_sha and Run.objects.exclude(pk=run.pk).get().pk in planned


def test_a_maintainer_approves_on_the_run_page(
    client, tracked, feature, monkeypatch, django_capture_on_commit_callbacks
):
    planned = hold_planned_runs(monkeypatch)
    run = open_pull_request(
        client, django_capture_on_commit_callbacks, feature, association="CONTRIBUTOR"
    )
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Waiting for a maintainer" in page and "Log in" in page
    assert "Approve and run" not in page

    # Anonymous visitors and users without the permission change nothing.
    anonymous = client.post(f"/runs/{run.pk}/approve")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    User.objects.create_user("visitor", password="pw")
    client.login(username="visitor", password="pw")
    assert client.post(f"/runs/{run.pk}/approve").status_code == 403
    run.refresh_from_db()
    assert run.awaits_approval and run.pk not in planned

    maintainer = User.objects.create_user("maria", password="pw")
    maintainer.user_permissions.add(Permission.objects.get(codename="maintain"))
    client.login(username="maria", password="pw")
    assert "Approve and run" in client.get(run.get_absolute_url()).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{run.pk}/approve")

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.approved_by == "maria"
    assert run.pk in planned
    assert "approved by maria" in run.log
