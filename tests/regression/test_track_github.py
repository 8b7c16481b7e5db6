"""A repository tracked by path or by a mirror: ``track --github OWNER/NAME`` (and ``POST
/api/repositories``) tell Peakwatch which GitHub repository delivers its events."""

from __future__ import annotations

import base64
import io

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command

from dashboard.models import Repository, WebhookDelivery
from tests.regression.conftest import SECRET, deliver, push_payload
from tests.regression.test_github_webhooks import head, queued  # noqa: F401


def track(*args) -> str:
    out = io.StringIO()
    call_command("track", *args, stdout=out)
    return out.getvalue()


def _with_secret(name: str) -> None:
    Repository.objects.filter(name=name).update(webhook_secret=SECRET)


def test_github_deliveries_find_a_path_tracked_repository_once_it_is_named(
    db, settings, demo_repository_path, client, head, queued  # noqa: F811
):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example:8200"
    printed = track("tracked", str(demo_repository_path))
    assert "payload URL  https://peakwatch.example:8200/webhooks/github/tracked" in printed
    assert "--github OWNER/NAME" in printed
    _with_secret("tracked")
    refused = deliver(client, push_payload(head, full_name="octo/models"), event="push")
    assert refused.status_code == 404

    printed = track("tracked", str(demo_repository_path), "--github", "octo/models")
    assert "on GitHub    octo/models" in printed
    # Tracking again keeps the secret GitHub already signs with.
    assert Repository.objects.get(name="tracked").webhook_secret == SECRET
    accepted = deliver(client, push_payload(head, full_name="octo/models"), event="push")
    assert accepted.status_code == 202
    outcomes = list(WebhookDelivery.objects.order_by("pk").values_list("outcome", flat=True))
    assert outcomes[0] == WebhookDelivery.Outcome.UNKNOWN_REPOSITORY
    assert outcomes[1] in (WebhookDelivery.Outcome.QUEUED, WebhookDelivery.Outcome.PROCESSED)


@pytest.mark.parametrize("github", ["octo", "octo/models/extra", "-octo/models", "octo/mo dels"])
def test_track_refuses_what_is_not_owner_slash_name(db, demo_repository_path, github):
    with pytest.raises(CommandError, match="OWNER/NAME"):
        track("tracked", str(demo_repository_path), f"--github={github}")
    assert not Repository.objects.exists()


def _basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_the_api_tracks_a_repository_for_a_maintainer_only(db, settings, client):
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example"
    body = {"name": "models", "url": "/srv/git/models.git", "github": "acme/models"}
    User.objects.create_superuser("admin", password="pw-admin")
    plain = User.objects.create_user("viewer", password="pw-viewer")

    anonymous = client.post("/api/repositories", body, content_type="application/json")
    assert anonymous.status_code == 401
    viewer = client.post(
        "/api/repositories", body, content_type="application/json", **_basic("viewer", "pw-viewer")
    )
    assert viewer.status_code == 403
    wrong = client.post(
        "/api/repositories", body, content_type="application/json", **_basic("admin", "nope")
    )
    assert wrong.status_code == 401 and "error" in wrong.json()
    bearer = client.post(
        "/api/repositories", body, content_type="application/json",
        HTTP_AUTHORIZATION="Bearer pw_whatever",
    )
    assert bearer.status_code == 401
    assert not Repository.objects.exists()

    answer = client.post(
        "/api/repositories", body, content_type="application/json", **_basic("admin", "pw-admin")
    )
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["webhook_url"] == "https://peakwatch.example/webhooks/github/models"
    assert data["github"] == "acme/models" and data["accepts_github_deliveries"] is True
    repository = Repository.objects.get(name="models")
    assert repository.webhook_secret == data["webhook_secret"] != ""
    assert repository.github_repository == "acme/models"

    plain.user_permissions.add(Permission.objects.get(codename="add_repository"))
    again = client.post(
        "/api/repositories", {**body, "github": "acme/renamed"},
        content_type="application/json", **_basic("viewer", "pw-viewer"),
    )
    assert again.status_code == 200
    assert again.json()["webhook_secret"] == data["webhook_secret"]
    assert Repository.objects.get(name="models").github_repository == "acme/renamed"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"url": "/srv/x"}, "name"),
        ({"name": "a b", "url": "/srv/x"}, "name"),
        ({"name": "models", "url": "--upload-pack=touch /tmp/x"}, "git URL"),
        ({"name": "models", "url": "/srv/x", "github": "not-a-pair"}, "github"),
        ({"name": "models", "url": "/srv/x", "branch": "a..b"}, "branch"),
        ({"name": "models", "url": "/srv/x", "trust": "root"}, "trust"),
    ],
)
def test_the_api_says_what_is_wrong_with_a_body(db, client, body, field):
    User.objects.create_superuser("admin", password="pw-admin")
    answer = client.post(
        "/api/repositories", body, content_type="application/json", **_basic("admin", "pw-admin")
    )
    assert answer.status_code == 400
    assert field in answer.json()["error"]
    assert not Repository.objects.exists()


@pytest.mark.parametrize("user, password", [("ad\x00min", "pw"), ("admin", "pw\x00")])
def test_credentials_no_account_can_have_are_refused_not_an_error(db, client, user, password):
    # A NUL byte reached PostgreSQL, which refused the lookup: a 500 (found by the API fuzzer).
    answer = client.post(
        "/api/repositories", {"repository": "octo/models"}, content_type="application/json",
        **_basic(user, password),
    )

    assert answer.status_code == 401
    assert "error" in answer.json()
