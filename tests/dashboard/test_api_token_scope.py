"""An API token is for one repository unless made, explicitly, for all of them; the admin
says which."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from dashboard import actions
from dashboard.models import ApiToken, Run
from tests.helpers import hold_planned_runs

pytestmark = pytest.mark.django_db


def _create(*arguments: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", *arguments, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def _post(client, token: str, repository: str, sha: str):
    return client.post(
        "/api/runs", data={"repository": repository, "sha": sha},
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_the_command_refuses_a_token_without_a_scope():
    actions.track_repository("tracked", "/nonexistent")

    with pytest.raises(CommandError) as refused:
        _create("ci")

    assert "pass --repository NAME" in str(refused.value)
    assert "--all-repositories" in str(refused.value)
    assert not ApiToken.objects.exists()


def test_the_command_refuses_a_repository_and_all_repositories_at_once():
    actions.track_repository("tracked", "/nonexistent")

    with pytest.raises(CommandError, match="not both"):
        _create("ci", "--repository", "tracked", "--all-repositories")

    assert not ApiToken.objects.exists()


def test_the_action_never_widens_a_token_it_was_given_no_repository_for():
    with pytest.raises(ValueError, match="for one repository"):
        actions.create_api_token("ci")

    assert not ApiToken.objects.exists()


def test_an_all_repositories_token_starts_runs_of_any_repository(
    client, monkeypatch, django_capture_on_commit_callbacks
):
    queued = hold_planned_runs(monkeypatch)
    shas = {}
    for index, name in enumerate(("models", "vision")):
        repository = actions.track_repository(name, "/nonexistent")
        shas[name] = f"{index + 1:x}" * 40
        actions.record_commit(
            repository, sha=shas[name], branch="main", committed_at="2026-11-01T00:00Z"
        )

    raw, said = _create("ci", "--all-repositories")
    with django_capture_on_commit_callbacks(execute=True):
        answers = [_post(client, raw, name, sha) for name, sha in shas.items()]

    assert "for all repositories" in said
    token = ApiToken.objects.get()
    assert token.repository is None and token.scope == "all repositories"
    assert [a.status_code for a in answers] == [202, 202]
    assert sorted(Run.objects.values_list("repository__name", flat=True)) == ["models", "vision"]
    assert len(queued) == 2


def test_a_repository_token_is_named_by_its_scope():
    tracked = actions.track_repository("tracked", "/nonexistent")

    raw, said = _create("github-actions", "--repository", "tracked")

    token = ApiToken.objects.get()
    assert token.repository == tracked and raw.startswith("pw_")
    assert "for repository tracked" in said
    assert str(token) == "github-actions (repository tracked)"
    assert str(actions.create_api_token("ops", all_repositories=True)[0]) == (
        "ops (all repositories)"
    )


def test_the_admin_shows_each_tokens_scope_and_does_not_let_it_be_widened(admin_client):
    tracked = actions.track_repository("tracked", "/nonexistent")
    scoped, _ = actions.create_api_token("github-actions", tracked)
    everywhere, _ = actions.create_api_token("ops", all_repositories=True)

    listing = admin_client.get("/admin/dashboard/apitoken/").content.decode()
    page = admin_client.get(f"/admin/dashboard/apitoken/{scoped.pk}/change/").content.decode()

    assert "Scope" in listing
    assert "all repositories" in listing and "repository tracked" in listing
    assert "repository tracked" in page
    # No field to clear: a token's scope is set when it is made, never widened later.
    assert 'name="repository"' not in page
    assert admin_client.get(
        f"/admin/dashboard/apitoken/{everywhere.pk}/change/"
    ).status_code == 200
