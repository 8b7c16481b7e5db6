"""Guessing passwords: repeated failures lock the account name and the client address out,
through HTTP Basic on ``POST /api/repositories``, the login page and the admin alike, in
public and private mode; the right credentials work in both once no lock holds.

Failures are counted in the real Redis of tests/settings.py, as gunicorn workers share them.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import RequestFactory

from dashboard import sign_in_throttle
from dashboard.models import Repository

pytestmark = pytest.mark.django_db

BODY = {"name": "models", "url": "https://example.org/acme/models.git"}
NAMES = ("admin", "Admin", "ghost", "viewer", "other")
ROOT = Path(__file__).resolve().parents[2]
ADDRESSES = ("127.0.0.1", "192.0.2.1", "192.0.2.2", "198.51.100.7", "2001:db8::/64")


@pytest.fixture(autouse=True)
def _no_failures_from_elsewhere():
    # Redis outlives a test: start and leave every name and address these tests use clean.
    def forget():
        for name in NAMES:
            sign_in_throttle.forget(username=name)
        for address in ADDRESSES:
            sign_in_throttle.forget(address=address)

    forget()
    yield
    forget()


@pytest.fixture(autouse=True)
def _quick_hashes(settings):
    # What is counted is the answer, not the hash: a test guesses dozens of times.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin():
    return User.objects.create_superuser("admin", password="pw-admin")


@pytest.fixture(params=["public", "private"])
def mode(request, settings):
    settings.PEAKWATCH_PUBLIC = request.param == "public"
    return request.param


@pytest.fixture
def short_lockout(settings):
    settings.PEAKWATCH_SIGN_IN = {
        **settings.PEAKWATCH_SIGN_IN, "FAILURES_PER_ACCOUNT": 3, "FAILURES_PER_ADDRESS": 5,
        "LOCKOUT_SECONDS": 2,
    }


def _track(client, user, password, address="127.0.0.1"):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return client.post(
        "/api/repositories", BODY, content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {token}", REMOTE_ADDR=address,
    )


def test_the_right_credentials_track_a_repository_in_either_mode(client, admin, mode):
    anonymous = client.post("/api/repositories", BODY, content_type="application/json")
    wrong = _track(client, "admin", "nope")
    right = _track(client, "admin", "pw-admin")

    assert anonymous.status_code == 401 and "error" in anonymous.json()
    assert wrong.status_code == 401 and "error" in wrong.json()
    assert right.status_code == 200, right.content
    assert Repository.objects.filter(name="models").exists()


def test_the_eleventh_try_is_refused_even_with_the_right_password(client, admin, mode):
    # Given ten wrong passwords for one account, each from another address
    for n in range(10):
        wrong = _track(client, "admin", f"guess-{n}", address=f"192.0.2.{n % 2 + 1}")
        assert wrong.status_code == 401

    # When the right one comes, from an address that never failed
    locked = _track(client, "admin", "pw-admin", address="198.51.100.7")

    # Then it is refused until the lock ends, as an {"error"} with Retry-After
    assert locked.status_code == 429
    assert "too many failed sign-ins" in locked.json()["error"]
    assert 0 < int(locked["Retry-After"]) <= 15 * 60
    assert not Repository.objects.exists()


def test_the_right_password_works_again_once_the_lock_ends(client, admin, mode, short_lockout):
    for n in range(3):
        _track(client, "admin", f"guess-{n}")
    refused = _track(client, "admin", "pw-admin")
    assert refused.status_code == 429 and int(refused["Retry-After"]) <= 2

    time.sleep(2.1)

    assert _track(client, "admin", "pw-admin").status_code == 200


def test_a_lock_does_not_say_whether_the_account_exists(client, admin, short_lockout):
    existing = [_track(client, "admin", f"guess-{n}", address="192.0.2.1") for n in range(4)]
    missing = [_track(client, "ghost", f"guess-{n}", address="192.0.2.2") for n in range(4)]

    assert [r.status_code for r in existing] == [r.status_code for r in missing] == [
        401, 401, 401, 429,
    ]
    assert [r.json() for r in existing] == [r.json() for r in missing]


def test_another_spelling_of_the_name_is_the_same_account(client, admin, short_lockout):
    for n in range(3):
        _track(client, "Admin", f"guess-{n}", address=f"192.0.2.{n % 2 + 1}")

    assert _track(client, "admin", "pw-admin", address="198.51.100.7").status_code == 429


def test_one_address_guessing_many_names_is_locked_out(client, admin, short_lockout):
    # Five failures from one address, under three per name.
    for name in ("ghost", "viewer", "other", "ghost", "viewer"):
        assert _track(client, name, "guess", address="192.0.2.1").status_code == 401

    from_there = _track(client, "admin", "pw-admin", address="192.0.2.1")
    from_elsewhere = _track(client, "admin", "pw-admin", address="192.0.2.2")

    assert from_there.status_code == 429
    assert from_elsewhere.status_code == 200


def test_a_success_clears_the_accounts_failures(client, admin, short_lockout):
    for attempt in (1, 2):
        for n in range(2):
            wrong = _track(client, "admin", f"guess-{n}", address=f"192.0.2.{attempt}")
            assert wrong.status_code == 401
        assert _track(client, "admin", "pw-admin", address="198.51.100.7").status_code == 200


def test_the_lock_is_kept_in_redis_where_every_worker_sees_it(
    client, admin, settings, short_lockout
):
    for n in range(3):
        _track(client, "admin", f"guess-{n}", address=f"192.0.2.{n % 2 + 1}")
    # A second process reaches the same Redis through a connection of its own.
    from django.core.cache import caches

    other_worker = caches.create_connection("default")

    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    assert any(
        other_worker.get(f"{key}:locked")
        for key, _ in sign_in_throttle._subjects("admin", "198.51.100.7")
    )


def test_the_login_page_counts_failures_the_same_way(client, admin, mode, short_lockout):
    for n in range(3):
        page = client.post("/accounts/login/", {"username": "admin", "password": f"guess-{n}"})
        assert page.status_code == 200 and "do not match" in page.text

    locked = client.post("/accounts/login/", {"username": "admin", "password": "pw-admin"})
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.text
    assert int(locked["Retry-After"]) <= 2
    assert "_auth_user_id" not in client.session
    # The API refuses the same name: the login page is no way around its lock.
    assert _track(client, "admin", "pw-admin", address="198.51.100.7").status_code == 429

    time.sleep(2.1)

    signed_in = client.post("/accounts/login/", {"username": "admin", "password": "pw-admin"})
    assert signed_in.status_code == 302
    assert client.session["_auth_user_id"] == str(admin.pk)


def test_the_admin_login_counts_failures_the_same_way(client, admin, short_lockout):
    for n in range(3):
        client.post("/admin/login/", {"username": "admin", "password": f"guess-{n}"})

    locked = client.post("/admin/login/", {"username": "admin", "password": "pw-admin"})

    assert "too many failed sign-ins" in locked.text
    assert "_auth_user_id" not in client.session


def test_the_read_api_takes_no_password_to_guess(client, admin):
    token = base64.b64encode(b"admin:nope").decode()

    answer = client.get("/api/runs/", HTTP_AUTHORIZATION=f"Basic {token}")

    assert answer.status_code == 200


@pytest.mark.parametrize(
    "meta, expected",
    [
        ({"REMOTE_ADDR": "192.0.2.1"}, "192.0.2.1"),
        ({"REMOTE_ADDR": "::ffff:192.0.2.1"}, "192.0.2.1"),
        # One IPv6 host usually holds a whole /64.
        ({"REMOTE_ADDR": "2001:db8::1"}, "2001:db8::/64"),
        ({"REMOTE_ADDR": "2001:db8::ffff:1"}, "2001:db8::/64"),
        # Without the setting, a client's own header is ignored.
        ({"REMOTE_ADDR": "192.0.2.1", "HTTP_X_FORWARDED_FOR": "198.51.100.7"}, "192.0.2.1"),
    ],
)
def test_failures_are_counted_against_the_clients_address(meta, expected):
    request = RequestFactory().get("/", **meta)

    assert sign_in_throttle.client_address(request) == expected


def test_behind_a_proxy_the_address_it_appended_counts(settings):
    settings.PEAKWATCH_SIGN_IN = {
        **settings.PEAKWATCH_SIGN_IN, "CLIENT_IP_HEADER": "HTTP_X_FORWARDED_FOR",
    }
    # The client sent "203.0.113.9" itself; the proxy appended what it saw.
    request = RequestFactory().get(
        "/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9, 192.0.2.1"
    )

    assert sign_in_throttle.client_address(request) == "192.0.2.1"


def test_a_limit_below_one_fails_loudly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_DATA_DIR=str(tmp_path),
               PEAKWATCH_SIGN_IN_LOCKOUT_SECONDS="0")

    proc = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode != 0
    assert "PEAKWATCH_SIGN_IN_LOCKOUT_SECONDS=0 must be at least 1" in proc.stderr
