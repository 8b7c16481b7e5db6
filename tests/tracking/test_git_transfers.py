"""Clone URLs are https, ssh and git unless a setting allows more, and a remote that stalls
costs a worker seconds, not its task's hour: a clone or fetch ends at the low-speed limit
or the wall clock, naming the setting."""

from __future__ import annotations

import base64
import http.server
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from dashboard import gitrepo
from dashboard.models import Repository

ROOT = Path(__file__).resolve().parents[2]

HOSTILE_URLS = [
    "fd::17",
    "ext::sh -c touch% /tmp/pwned",
    "file:///srv/git/models.git",
    "/srv/git/models.git",
    "../models",
]


def _allow(settings, *protocols: str) -> None:
    settings.PEAKWATCH = {
        **settings.PEAKWATCH, "GIT": {**settings.PEAKWATCH["GIT"], "PROTOCOLS": list(protocols)}
    }


def _track(client, url: str):
    token = base64.b64encode(b"admin:pw-admin").decode()
    return client.post(
        "/api/repositories", {"name": "models", "url": url}, content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {token}",
    )


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_the_api_refuses_helpers_and_local_paths_by_default(db, settings, client, url):
    _allow(settings, "https", "ssh", "git")
    User.objects.create_superuser("admin", password="pw-admin")

    answer = _track(client, url)

    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert "PEAKWATCH_GIT_PROTOCOLS=https,ssh,git" in error
    assert ("remote helper, which is never allowed" in error) == ("::" in url)
    assert not Repository.objects.exists()


@pytest.mark.parametrize(
    "url", ["https://github.com/acme/models.git", "ssh://git@host/models.git",
            "git@github.com:acme/models.git", "git://host/models.git"],
)
def test_the_api_takes_https_ssh_and_git_urls(db, settings, client, url):
    _allow(settings, "https", "ssh", "git")
    User.objects.create_superuser("admin", password="pw-admin")

    assert _track(client, url).status_code == 200
    assert Repository.objects.get(name="models").clone_url == url


def test_local_paths_are_taken_where_the_setting_names_file_and_helpers_never(
    db, settings, client
):
    _allow(settings, "https", "ssh", "git", "file")
    User.objects.create_superuser("admin", password="pw-admin")

    assert _track(client, "/srv/git/models.git").status_code == 200
    assert _track(client, "file:///srv/git/models.git").status_code == 200
    for url in ("fd::17", "ext::sh -c id"):
        answer = _track(client, url)
        assert answer.status_code == 400 and "never allowed" in answer.json()["error"]


def test_track_names_the_setting_when_it_refuses_a_path(db, settings, tmp_path):
    _allow(settings, "https", "ssh", "git")

    with pytest.raises(CommandError, match="is a local repository: .*PEAKWATCH_GIT_PROTOCOLS"):
        call_command("track", "models", str(tmp_path), stdout=io.StringIO())


def test_a_password_in_a_refused_url_is_not_shown(db, settings, client):
    _allow(settings, "https")
    User.objects.create_superuser("admin", password="pw-admin")

    answer = _track(client, "ssh://alice:hunter2@host/models.git")

    assert answer.status_code == 400
    assert "hunter2" not in answer.json()["error"] and "alice:***@" in answer.json()["error"]


def test_git_itself_refuses_a_protocol_the_setting_leaves_out(empty_repo, tmp_path):
    # What the URL check misses (a redirect, a submodule, a URL stored before the setting
    # changed) git refuses on its own: GIT_ALLOW_PROTOCOL.
    empty_repo.write("README", "x\n")
    empty_repo.commit("First")
    limits = gitrepo.GitLimits(protocols=("https",))

    with pytest.raises(gitrepo.GitError, match="transport 'file' not allowed"):
        gitrepo._git("clone", "--mirror", str(empty_repo.path), str(tmp_path / "m"),
                     limits=limits)
    with pytest.raises(gitrepo.GitError, match="is a local repository"):
        gitrepo.mirror(str(empty_repo.path), tmp_path / "work", limits)


PRINT_PROTOCOLS = (
    "import django; django.setup(); from django.conf import settings; "
    "print(','.join(settings.PEAKWATCH['GIT']['PROTOCOLS']))"
)


@pytest.mark.parametrize(
    "database, protocols",
    [("", "https,ssh,git,file"),
     ("postgres://postgres@127.0.0.1:5432/peakwatch", "https,ssh,git")],
)
def test_only_the_embedded_default_clones_local_paths_unless_told(tmp_path, database, protocols):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "PEAKWATCH_GIT_PROTOCOLS")}
    env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_DATA_DIR=str(tmp_path),
               DJANGO_SECRET_KEY="k" * 50)
    if database:
        env["DATABASE_URL"] = database

    shown = subprocess.run([sys.executable, "-c", PRINT_PROTOCOLS], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    refused = subprocess.run([sys.executable, "-c", PRINT_PROTOCOLS], cwd=ROOT,
                             env={**env, "PEAKWATCH_GIT_PROTOCOLS": "https,ext"},
                             capture_output=True, text=True, timeout=120, check=False)

    assert shown.stdout.strip() == protocols, shown.stderr[-2000:]
    assert refused.returncode != 0
    assert "PEAKWATCH_GIT_PROTOCOLS names ext" in refused.stderr


class _Trickle(http.server.BaseHTTPRequestHandler):
    """A git server that answers at once, then sends a byte every half second."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
        self.end_headers()
        try:
            for _ in range(120):
                self.wfile.write(b"0")
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:  # the client gave up: what the test waits for
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def stalling_remote():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/models.git"
    server.shutdown()
    server.server_close()


def _fetch_or_clone(operation: str, url: str, work: Path, limits: gitrepo.GitLimits):
    if operation == "clone":
        return gitrepo.mirror(url, work, limits)
    mirror = work / "repos" / "stale.git"
    subprocess.run(["git", "init", "-q", "--bare", str(mirror)], check=True)
    subprocess.run(["git", "-C", str(mirror), "remote", "add", "origin", url], check=True)
    return gitrepo.fetch(mirror, "pull/7/head", limits)


@pytest.mark.parametrize("operation", ["clone", "fetch"])
@pytest.mark.parametrize(
    "limits, message",
    [
        ({"low_speed_bytes": 1000, "low_speed_seconds": 1, "seconds": 60},
         r"Operation too slow.*\(the low-speed limit: PEAKWATCH_GIT_LOW_SPEED_BYTES=1000 for "
         r"PEAKWATCH_GIT_LOW_SPEED_SECONDS=1\)"),
        ({"low_speed_bytes": 1, "low_speed_seconds": 60, "seconds": 1.5},
         r"took more than 1.5 s, its time limit \(PEAKWATCH_GIT_SECONDS=1.5\)"),
    ],
    ids=["low-speed", "wall-clock"],
)
def test_a_stalling_remote_is_given_up_on_at_a_limit(
    stalling_remote, tmp_path, operation, limits, message
):
    limits = gitrepo.GitLimits(protocols=("http",), **limits)
    started = time.monotonic()

    with pytest.raises(gitrepo.GitError, match=message):
        _fetch_or_clone(operation, stalling_remote, tmp_path / "work", limits)

    assert time.monotonic() - started < 10
    # A clone ended by a limit leaves no half mirror for the next run to fetch into.
    assert [p.name for p in (tmp_path / "work" / "repos").iterdir()] == (
        ["stale.git"] if operation == "fetch" else []
    )
    leftover = subprocess.run(["pgrep", "-f", stalling_remote], capture_output=True, text=True)
    assert leftover.stdout == "", "git's helpers outlived the limit"


def test_a_timeout_names_the_command_without_the_password(tmp_path, stalling_remote):
    url = stalling_remote.replace("http://", "http://alice:hunter2@")
    limits = gitrepo.GitLimits(protocols=("http",), seconds=1)

    with pytest.raises(gitrepo.GitError) as raised:
        gitrepo.mirror(url, tmp_path / "work", limits)

    assert "git clone --quiet --mirror -- http://alice:***@127.0.0.1" in str(raised.value)
    assert "hunter2" not in json.dumps(str(raised.value))
