"""JSON nested too deep is a 400 with a message, before anything recursive parses it:
``POST /api/runs``, GitHub's webhooks and every DRF view."""

from __future__ import annotations

import io
import json
from urllib.parse import urlencode

import pytest
from rest_framework.exceptions import ParseError
from rest_framework.settings import api_settings

from dashboard import actions
from dashboard.json_bodies import MAX_DEPTH, BoundedJSONParser, nesting_depth
from dashboard.models import Run, WebhookDelivery
from tests.regression.conftest import SECRET, deliver, sign

pytestmark = pytest.mark.django_db

SHA = "a" * 40
BASE = "b" * 40


@pytest.fixture
def tracked():
    repository = actions.track_repository("tracked", "/nonexistent", webhook_secret=SECRET)
    repository.github_repository = "octo/models"
    repository.save()
    return repository


@pytest.fixture
def token(tracked):
    return actions.create_api_token("ci", tracked)[1]


def _user(login: str) -> dict:
    return {
        "login": login, "id": 1, "node_id": "MDQ6VXNlcjE=", "type": "User",
        "avatar_url": "https://avatars.githubusercontent.com/u/1?v=4", "site_admin": False,
        "html_url": f"https://github.com/{login}", "url": f"https://api.github.com/users/{login}",
    }


def _repo(full_name: str) -> dict:
    owner = full_name.split("/")[0]
    return {
        "id": 2, "node_id": "R_kgDOA", "name": full_name.split("/")[1], "full_name": full_name,
        "private": False, "owner": _user(owner), "fork": owner != "octo",
        "license": {"key": "mit", "name": "MIT License", "spdx_id": "MIT", "url": None},
        "topics": ["memory", "tvm"], "default_branch": "main", "visibility": "public",
        "custom_properties": {},
    }


def github_pull_request_event() -> dict:
    """A ``pull_request`` delivery with the shape GitHub really sends (nested users,
    repositories, owners, licenses, labels, links), trimmed of repeated URL fields."""
    links = {name: {"href": f"https://api.github.com/repos/octo/models/pulls/5/{name}"}
             for name in ("self", "html", "issue", "comments", "commits", "statuses")}
    return {
        "action": "opened",
        "number": 5,
        "pull_request": {
            "url": "https://api.github.com/repos/octo/models/pulls/5", "id": 3, "number": 5,
            "html_url": "https://github.com/octo/models/pull/5", "state": "open",
            "locked": False, "title": "Widen the small CNN", "body": "Wider [and] {faster}",
            "user": _user("stranger"), "author_association": "CONTRIBUTOR",
            "labels": [{"id": 4, "name": "models", "color": "0e8a16", "default": False}],
            "milestone": None, "assignees": [], "requested_reviewers": [_user("maria")],
            "requested_teams": [{"name": "core", "slug": "core", "parent": None}],
            "head": {"label": "stranger:wide", "ref": "wide", "sha": SHA,
                     "user": _user("stranger"), "repo": _repo("stranger/models")},
            "base": {"label": "octo:main", "ref": "main", "sha": BASE,
                     "user": _user("octo"), "repo": _repo("octo/models")},
            "_links": links, "auto_merge": None, "draft": False, "merged": False,
        },
        "repository": _repo("octo/models"),
        "organization": {"login": "octo", "id": 5},
        "sender": _user("stranger"),
    }


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_the_depth_is_counted_outside_strings_and_past_escaped_quotes():
    assert nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert nesting_depth(r'["a \"[[[[", "\\", [[]]]') == 3
    assert nesting_depth("42") == 0
    # Iterative: far deeper than Python's recursion limit, and it stops early when asked.
    assert nesting_depth(nested(100_000)) == 100_000
    assert nesting_depth(nested(100_000), stop_above=MAX_DEPTH) == MAX_DEPTH + 1


def test_a_deeply_nested_api_request_is_400_with_a_message(client, token):
    at_the_limit = {"repository": "tracked", "sha": json.loads(nested(MAX_DEPTH - 1))}
    read = client.post("/api/runs", data=at_the_limit, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")
    assert read.json() == {"error": "repository, sha and branch are strings"}

    for body in (nested(5000), json.dumps({"repository": "tracked",
                                           "sha": json.loads(nested(MAX_DEPTH + 1))})):
        response = client.post(
            "/api/runs", data=body, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

        assert response.status_code == 400
        assert response.json() == {
            "error": f"the JSON body nests arrays and objects deeper than {MAX_DEPTH} levels"
        }
    assert not Run.objects.exists()


@pytest.mark.parametrize("form", [False, True], ids=["json", "form-encoded"])
def test_a_signed_webhook_nested_too_deep_is_malformed(client, tracked, form):
    payload = json.dumps({"zen": json.loads(nested(900))})
    body = urlencode({"payload": payload}).encode() if form else payload.encode()

    response = client.post(
        "/webhooks/github/tracked", data=body,
        content_type="application/x-www-form-urlencoded" if form else "application/json",
        HTTP_X_GITHUB_EVENT="ping", HTTP_X_GITHUB_DELIVERY="deep-1",
        HTTP_X_HUB_SIGNATURE_256=sign(body),
    )

    assert response.status_code == 400
    assert f"deeper than {MAX_DEPTH} levels" in response.json()["detail"]
    assert WebhookDelivery.objects.get().outcome == WebhookDelivery.Outcome.MALFORMED


def test_a_real_github_payload_is_far_below_the_limit_and_accepted(client, tracked):
    event = github_pull_request_event()
    assert nesting_depth(json.dumps(event)) <= 6 < MAX_DEPTH

    response = deliver(client, event, event="pull_request")

    assert response.status_code == 202
    assert WebhookDelivery.objects.get().outcome == WebhookDelivery.Outcome.QUEUED


def test_every_drf_view_parses_json_through_the_depth_check():
    assert BoundedJSONParser in api_settings.DEFAULT_PARSER_CLASSES
    parser = BoundedJSONParser()

    with pytest.raises(ParseError, match="deeper than"):
        parser.parse(io.BytesIO(nested(5000).encode()))
    assert parser.parse(io.BytesIO(b'{"a": [1, [2]]}')) == {"a": [1, [2]]}
