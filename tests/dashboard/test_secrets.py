"""Secrets never leak: not in errors, logs, pages, the API or the admin; not in clear in
the database."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from dashboard import actions, fields
from dashboard.models import Repository, Run
from dashboard.redaction import redact

pytestmark = pytest.mark.django_db

PASSWORD = "hunter2-sekrit"
WEBHOOK_SECRET = "whsec-do-not-show"
GITHUB_TOKEN = "ghp_do_not_show_either"
# Nothing listens on port 9 (discard) here: git fails at once, as with an unreachable host.
CLONE_URL = f"https://alice:{PASSWORD}@127.0.0.1:9/org/models.git"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"git clone -- {CLONE_URL} /tmp/x failed",
         "git clone -- https://alice:***@127.0.0.1:9/org/models.git /tmp/x failed"),
        ("fatal: 'https://ghp_token@github.com/o/r' not found",
         "fatal: 'https://***@github.com/o/r' not found"),
        ("ssh://git@host/repo and git@github.com:o/r.git", "ssh://***@host/repo and "
         "git@github.com:o/r.git"),
        ("no url here", "no url here"),
        # A raw "@" in a password: the user information ends at the last "@".
        ("https://user:p@ss@host/repo.git", "https://user:***@host/repo.git"),
        ("fatal: 'https://tok@en@host' x@y", "fatal: 'https://***@host' x@y"),
    ],
)
def test_it_masks_the_credentials_of_every_url_in_a_text(text, shown):
    assert redact(text) == shown


@pytest.fixture
def failed_run(caplog, django_capture_on_commit_callbacks):
    """A real run of a repository whose credentialed clone URL cannot be reached."""
    caplog.set_level(logging.DEBUG)
    repository = actions.track_repository("leaky", CLONE_URL)
    repository.webhook_secret = WEBHOOK_SECRET
    repository.github_token = GITHUB_TOKEN
    repository.save()
    commit = actions.record_commit(
        repository, sha="ab" * 20, branch="main", author="Ada", message="Leak nothing",
        committed_at=datetime(2026, 11, 1, tzinfo=UTC),
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)
    run.refresh_from_db()
    return run


def test_a_failed_clone_shows_its_error_without_the_password(client, failed_run, caplog):
    superuser = User.objects.create_superuser("root", password="root-password")
    repository = failed_run.repository
    anonymous_urls = [
        reverse("home"),
        reverse("run-detail", args=[failed_run.pk]),
        reverse("run-progress", args=[failed_run.pk]),
        reverse("run-results", args=[failed_run.pk]),
        reverse("api:run-list"),
        reverse("api:run-detail", args=[failed_run.pk]),
        reverse("api:repository-list"),
        reverse("alerts"),
        reverse("boards"),
    ]
    admin_urls = [
        reverse("admin:dashboard_repository_changelist"),
        reverse("admin:dashboard_repository_change", args=[repository.pk]),
        reverse("admin:dashboard_run_change", args=[failed_run.pk]),
        reverse("admin:dashboard_run_changelist"),
    ]

    pages = {url: client.get(url) for url in anonymous_urls}
    client.force_login(superuser)
    pages.update({url: client.get(url) for url in admin_urls})

    assert failed_run.status == Run.Status.FAILED
    assert "127.0.0.1:9" in failed_run.error and "alice:***@" in failed_run.error
    for url, response in pages.items():
        assert response.status_code == 200, url
        body = response.content.decode()
        for secret in (PASSWORD, WEBHOOK_SECRET, GITHUB_TOKEN):
            assert secret not in body, (url, secret)
    logged = "\n".join(
        record.getMessage() + (record.exc_text or "") for record in caplog.records
    ) + caplog.text
    assert "git clone" in failed_run.log
    assert PASSWORD not in logged and PASSWORD not in failed_run.log


def test_secrets_are_stored_encrypted_and_read_back_in_clear(db):
    repository = actions.track_repository("sealed", "/nonexistent")
    repository.webhook_secret = WEBHOOK_SECRET
    repository.github_token = GITHUB_TOKEN
    repository.save()

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT webhook_secret, github_token FROM dashboard_repository WHERE id = %s",
            [repository.pk],
        )
        stored = cursor.fetchone()
    repository = Repository.objects.get(pk=repository.pk)

    assert all(value.startswith(fields.PREFIX) for value in stored)
    assert WEBHOOK_SECRET not in "".join(stored) and GITHUB_TOKEN not in "".join(stored)
    assert (repository.webhook_secret, repository.github_token) == (WEBHOOK_SECRET, GITHUB_TOKEN)
    assert Repository.objects.exclude(webhook_secret="").get() == repository


def test_an_encrypted_webhook_secret_still_verifies_signatures(db):
    import hashlib
    import hmac

    repository = actions.track_repository("sealed", "/nonexistent")
    repository.webhook_secret = WEBHOOK_SECRET
    repository.save()
    body = b'{"zen": "hi"}'
    signature = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()

    assert Repository.objects.get(pk=repository.pk).verifies_signature(body, signature)


def test_a_secret_survives_a_rotated_secret_key(db, settings):
    repository = actions.track_repository("sealed", "/nonexistent")
    repository.webhook_secret = WEBHOOK_SECRET
    repository.save()
    old = settings.SECRET_KEY

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-key-" + "x" * 50, [old]

    assert Repository.objects.get(pk=repository.pk).webhook_secret == WEBHOOK_SECRET


def test_the_admin_keeps_a_secret_sent_back_empty_and_the_masked_clone_url(client, db):
    client.force_login(User.objects.create_superuser("root", password="root-password"))
    repository = actions.track_repository("leaky", CLONE_URL)
    repository.webhook_secret = WEBHOOK_SECRET
    repository.save()
    url = reverse("admin:dashboard_repository_change", args=[repository.pk])
    form = client.get(url).context["adminform"].form
    data = {
        name: value for name, value in form.initial.items()
        if value is not None and not isinstance(value, list | dict)
    }
    data.update(webhook_secret="", github_token="a-new-token", trust="collaborators")

    response = client.post(url, data)

    assert response.status_code == 302, response.content.decode()[-3000:]
    repository.refresh_from_db()
    assert repository.clone_url == CLONE_URL
    assert repository.webhook_secret == WEBHOOK_SECRET
    assert repository.github_token == "a-new-token"


def test_a_password_holding_an_at_sign_shows_nowhere(
    client, caplog, django_capture_on_commit_callbacks
):
    """``https://alice:hunter2@sekrit@host/``: git reads the password up to the first "@",
    URLs and redaction read it up to the last; no part of it may show either way."""
    caplog.set_level(logging.DEBUG)
    url = "https://alice:hunter2@sekrit@127.0.0.1:9/org/models.git"
    printed = io.StringIO()
    call_command("track", "leaky", url, stdout=printed)
    repository = Repository.objects.get(name="leaky")
    commit = actions.record_commit(
        repository, sha="cd" * 20, branch="main", committed_at=datetime(2026, 11, 1, tzinfo=UTC)
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)  # a real clone, which fails
    run.refresh_from_db()
    client.force_login(User.objects.create_superuser("root", password="root-password"))
    shown = {
        "track": printed.getvalue(),
        "run error": run.error,
        "run log": run.log,
        "logs": caplog.text,
        **{url: client.get(url).content.decode() for url in (
            reverse("run-detail", args=[run.pk]),
            reverse("api:run-detail", args=[run.pk]),
            reverse("admin:dashboard_repository_changelist"),
            reverse("admin:dashboard_repository_change", args=[repository.pk]),
        )},
    }

    assert run.status == Run.Status.FAILED and "git clone" in run.log
    assert "https://alice:***@127.0.0.1:9/org/models.git" in shown["track"]
    for where, text in shown.items():
        for part in ("hunter2", "sekrit"):
            assert part not in text, (where, part)
