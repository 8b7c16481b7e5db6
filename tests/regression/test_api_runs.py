"""``POST /api/runs``: CI triggers runs with a hashed API token."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from dashboard import actions
from dashboard.demo import DEMO_COMMITS, git
from dashboard.models import ApiToken, Commit, Run
from tests.helpers import hold_planned_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def tracked(demo_repository_path):
    return actions.track_repository("tracked", str(demo_repository_path))


@pytest.fixture
def token(tracked):
    return actions.create_api_token("ci", tracked)[1]


@pytest.fixture
def queued(monkeypatch):
    return hold_planned_runs(monkeypatch)


def _post(client, body, token=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post("/api/runs", data=body, content_type="application/json", **headers)


def test_the_command_prints_a_token_and_stores_only_its_hash(tracked):
    out = io.StringIO()

    call_command("create_api_token", "github-actions", "--repository", "tracked", stdout=out,
                 stderr=io.StringIO())

    raw = out.getvalue().strip()
    stored = ApiToken.objects.get()
    assert raw.startswith("pw_") and len(raw) > 40
    assert stored.token_hash == ApiToken.hash(raw) and raw not in stored.token_hash
    assert stored.repository == tracked


def test_it_refuses_a_request_without_a_valid_token(client, tracked):
    assert _post(client, {"repository": "tracked", "branch": "main"}).status_code == 401
    assert _post(client, {"repository": "tracked", "branch": "main"}, "pw_nope").status_code == 401
    assert not Run.objects.exists()


def test_a_scoped_token_cannot_run_another_repository(client, tracked):
    other = actions.track_repository("other", "/nonexistent")
    raw = actions.create_api_token("other-ci", other)[1]

    response = _post(client, {"repository": "tracked", "branch": "main"}, raw)

    assert response.status_code == 403


@pytest.mark.parametrize("body", [
    "not json", {"repository": "tracked"}, {"repository": "tracked", "sha": "xyz"},
    {"repository": "tracked", "branch": "--upload-pack=evil"}, {"branch": "main"},
])
def test_it_answers_400_to_a_bad_request(client, token, body):
    assert _post(client, body, token).status_code == 400


def test_a_branch_with_two_dots_is_refused_by_the_schema_as_by_the_view(client, token):
    import re

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    pattern = schema["components"]["schemas"]["TriggerRunRequest"]["properties"]["branch"][
        "pattern"
    ]
    response = _post(client, {"repository": "tracked", "branch": "..lrozgF2_ZI"}, token)

    # Schemathesis once drew this name as schema-valid, and the view refused it.
    assert response.status_code == 400
    assert response.json() == {"error": "that is not a branch name"}
    assert re.fullmatch(pattern, "..lrozgF2_ZI") is None
    assert re.fullmatch(pattern, "release/1.2")


def test_it_runs_a_known_commit_at_once(
    client, tracked, token, queued, django_capture_on_commit_callbacks
):
    commit = actions.record_commit(tracked, sha="ab" * 20, committed_at="2026-11-01T00:00Z")

    with django_capture_on_commit_callbacks(execute=True):
        response = _post(client, {"repository": "tracked", "sha": "abababab"}, token)

    assert response.status_code == 202
    run = Run.objects.get()
    assert response.json()["run"] == run.pk
    assert response.json()["run_url"] == f"/api/runs/{run.pk}/"
    assert client.get(response.json()["run_url"]).json()["status"] == "queued"
    assert (run.commit, run.trigger) == (commit, "api")
    assert queued == [run.pk]
    assert ApiToken.objects.get().last_used_at is not None


def test_it_resolves_a_branch_in_a_task_and_runs_its_head(
    client, tracked, token, queued, demo_repository_path, django_capture_on_commit_callbacks
):
    head = git(demo_repository_path, "rev-parse", "main")

    with django_capture_on_commit_callbacks(execute=True):
        response = _post(client, {"repository": "tracked", "branch": "main"}, token)

    assert response.status_code == 202
    assert response.json()["status"] == "resolving"
    run = Run.objects.get()
    assert run.commit.sha == head and run.commit.branch == "main"
    assert Commit.objects.count() == len(DEMO_COMMITS)


def test_a_branch_to_resolve_answers_a_request_that_ci_polls_until_it_names_the_run(
    client, tracked, token, queued, demo_repository_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as resolving:
        response = _post(client, {"repository": "tracked", "branch": "main"}, token)
        # Before the task ran: resolving, with where to ask again.
        answer = response.json()
        polled = client.get(answer["poll_url"]).json()

    assert response.status_code == 202
    assert answer["status"] == "resolving"
    assert answer["poll_url"] == f"/api/run-requests/{answer['request']}/"
    assert response["Location"] == answer["poll_url"]
    assert (polled["status"], polled["run"], polled["run_url"]) == ("resolving", None, None)

    for task in resolving:
        task()

    polled = client.get(answer["poll_url"]).json()
    run = Run.objects.get()
    assert polled["status"] == "resolved" and polled["run"] == run.pk
    assert polled["run_url"] == f"/api/runs/{run.pk}/"
    assert polled["page_url"] == run.get_absolute_url()
    assert client.get(polled["run_url"]).json()["id"] == run.pk


def test_a_revision_git_cannot_find_is_a_failed_request_that_says_why(
    client, tracked, token, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(client, {"repository": "tracked", "branch": "no-such-branch"}, token)

    polled = client.get(response.json()["poll_url"]).json()
    assert polled["status"] == "failed" and polled["run"] is None
    assert "no-such-branch" in polled["error"]
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_answer_names_the_run_at_once(
    client, tracked, token, queued, demo_repository_path
):
    head = git(demo_repository_path, "rev-parse", "main")

    response = _post(client, {"repository": "tracked", "branch": "main"}, token)

    answer = response.json()
    run = Run.objects.get()
    assert run.commit.sha == head
    assert (answer["status"], answer["run"], answer["commit"]) == ("queued", run.pk, head)
    assert answer["run_url"] == f"/api/runs/{run.pk}/"
    assert client.get(answer["poll_url"]).json()["run"] == run.pk
