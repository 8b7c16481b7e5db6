"""Fixtures for regression tracking: signed GitHub deliveries and a recording HTTP server."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# A real Celery worker, for the end-to-end flow.
from tests.workers.conftest import broker, start_worker  # noqa: F401

SECRET = "s3cret-for-tests"


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(client, payload, *, event: str, guid: str | None = None, secret: str = SECRET,
            url: str = "/webhooks/github/tracked", body: bytes | None = None,
            signature: str | None = None):
    """POST a delivery the way GitHub does: raw JSON body, signed, with its headers."""
    body = json.dumps(payload).encode() if body is None else body
    headers = {
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": guid or str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": sign(body, secret) if signature is None else signature,
    }
    return client.post(url, data=body, content_type="application/json", **headers)


def push_payload(after: str, *, ref: str = "refs/heads/main", commits=(), before: str = "0" * 40,
                 full_name: str = "octo/models") -> dict:
    return {
        "ref": ref,
        "before": before,
        "after": after,
        "deleted": False,
        "commits": [{"id": sha, "message": "m"} for sha in commits],
        "head_commit": {"id": after},
        "repository": {"full_name": full_name},
    }


def pull_request_payload(number: int, *, head_sha: str, base_sha: str, action: str = "opened",
                         head_ref: str = "feature", base_ref: str = "main",
                         association: str = "MEMBER", head_repo: str = "octo/models") -> dict:
    """The fields of GitHub's pull_request event that Peakwatch reads, as GitHub sends them
    (an author with an ``author_association``, head and base repositories)."""
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "title": "Widen the small CNN",
            "html_url": f"https://github.com/octo/models/pull/{number}",
            "head": {"sha": head_sha, "ref": head_ref, "repo": {"full_name": head_repo}},
            "base": {"sha": base_sha, "ref": base_ref, "repo": {"full_name": "octo/models"}},
            "user": {"login": "ada"},
            "author_association": association,
        },
        "repository": {"full_name": "octo/models"},
    }


class _Recorder(BaseHTTPRequestHandler):
    def _record(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        self.server.requests.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers),
             "json": body}
        )
        answer = json.dumps({"id": 4242 + len(self.server.requests)}).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_POST = do_PATCH = _record

    def log_message(self, *args):
        pass


@pytest.fixture
def recording_server():
    """An HTTP server on 127.0.0.1 that records every request (GitHub's API, Slack)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.requests = []
    server.status = 201
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def github_api(recording_server, settings):
    settings.PEAKWATCH_GITHUB_API_URL = recording_server.url + "/api/v3"
    settings.PEAKWATCH_BASE_URL = "https://peakwatch.example"
    return recording_server
