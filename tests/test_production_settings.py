"""Settings fail closed: a deployment runs without DEBUG, with its own key, behind TLS; the
embedded default still works from a fresh clone with nothing set."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the tests set for themselves (tests/settings.py) is not what a deployment gets.
# The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process (Playwright's loop);
# a deployment never has it, and check --deploy rightly refuses it.
UNSET = ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "PEAKWATCH_TLS", "DATABASE_URL", "REDIS_URL",
         "CELERY_BROKER_URL", "BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
PRINT_SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'debug': s.DEBUG, 'key': s.SECRET_KEY, 'redirect': s.SECURE_SSL_REDIRECT,"
    " 'hsts': s.SECURE_HSTS_SECONDS, 'secure_cookies': s.SESSION_COOKIE_SECURE}))"
)


def _env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_DATA_DIR=str(tmp_path),
               **extra)
    return env


def _run(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def _settings(env) -> dict:
    proc = _run(["-c", PRINT_SETTINGS], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_deployment_without_a_secret_key_refuses_to_start(tmp_path):
    env = _env(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/peakwatch")

    proc = _run(["manage.py", "check"], env)

    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in proc.stderr


def test_check_deploy_is_clean_for_a_deployment_with_debug_off(tmp_path):
    env = _env(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/peakwatch",
               DJANGO_DEBUG="0", DJANGO_SECRET_KEY="k" + os.urandom(32).hex())

    proc = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout
    figures = _settings(env)
    assert figures["debug"] is False and figures["redirect"] is True
    assert figures["hsts"] >= 365 * 24 * 3600 and figures["secure_cookies"] is True


def test_a_deployment_over_plain_http_turns_tls_off_by_one_setting(tmp_path):
    env = _env(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/peakwatch",
               DJANGO_SECRET_KEY="k" * 60, PEAKWATCH_TLS="0")

    figures = _settings(env)

    assert figures["redirect"] is False and figures["hsts"] == 0
    assert figures["secure_cookies"] is False


def test_the_embedded_default_has_debug_off_and_a_generated_key_of_its_own(tmp_path):
    first = _settings(_env(tmp_path))
    again = _settings(_env(tmp_path))
    elsewhere = _settings(_env(tmp_path / "another-install"))

    key_file = tmp_path / "secret_key"
    assert first["debug"] is False
    assert first["key"] == again["key"] == key_file.read_text().strip()
    assert len(first["key"]) >= 50 and elsewhere["key"] != first["key"]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # Plain HTTP on 127.0.0.1: no redirect to HTTPS.
    assert first["redirect"] is False
