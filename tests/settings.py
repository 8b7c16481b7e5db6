"""Settings for the test suite: the product's settings against real local services.

Tests talk to a real PostgreSQL and a real Redis; ``.ci/run`` starts both when absent.
Tasks run eagerly unless a test starts a real worker and switches that off.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/peakwatch")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# Under pytest-xdist each test process has a PostgreSQL database of its own (pytest-django's
# test_peakwatch_gw0, ...) and a Redis database of its own, numbered down from the first's: the
# worker tests flush theirs. (The processes inherit the environment the first set above.)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and _worker[2:].isdigit() and int(_worker[2:]) > 0:
    from urllib.parse import urlsplit

    _redis = urlsplit(os.environ["REDIS_URL"])
    _db, _n = int(_redis.path.strip("/") or 0), int(_worker[2:])
    _db = _db - _n if _db >= _n else _db + _n
    os.environ["REDIS_URL"] = _redis._replace(path=f"/{_db}").geturl()
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
os.environ.setdefault("PEAKWATCH_LATENCY_REPEAT", "2")
# A deployment's settings (DATABASE_URL set) need a key and, over plain HTTP, no TLS.
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "x" * 40)
os.environ.setdefault("PEAKWATCH_TLS", "0")
# Each test sees every refused webhook as a row; tests/regression/test_github_webhooks.py
# checks the window itself.
os.environ.setdefault("PEAKWATCH_WEBHOOK_REJECTION_WINDOW", "0")
# Every test client comes from 127.0.0.1, and failed sign-ins stay counted in Redis across
# tests: one test process must not lock its own address out for the next file's tests.
# tests/dashboard/test_sign_in_throttle.py sets the limits it checks.
os.environ.setdefault("PEAKWATCH_SIGN_IN_FAILURES_PER_ADDRESS", "1000")
# The tests' repositories are local folders standing for remote ones (a deployment's
# default refuses local paths; tests/tracking/test_git_transfers.py checks that).
os.environ.setdefault("PEAKWATCH_GIT_PROTOCOLS", "https,ssh,git,file")

from dashboard.settings import *  # noqa: E402,F403
