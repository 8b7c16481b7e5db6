"""Settings for the test suite: the product's settings against real local services.

Tests talk to a real PostgreSQL and a real Redis; ``.ci/run`` starts both when absent.
Tasks run eagerly unless a test starts a real worker and switches that off.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/peakwatch")
# Under pytest-xdist each worker process has a PostgreSQL database of its own
# (pytest-django's test_peakwatch_gw0, ...) and a Redis database of its own here: the
# worker tests flush theirs.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_index = int(_worker[2:]) if _worker.startswith("gw") and _worker[2:].isdigit() else 0
os.environ.setdefault("REDIS_URL", f"redis://127.0.0.1:6379/{15 - _index}")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
os.environ.setdefault("PEAKWATCH_LATENCY_REPEAT", "2")
# A deployment's settings (DATABASE_URL set) need a key and, over plain HTTP, no TLS.
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "x" * 40)
os.environ.setdefault("PEAKWATCH_TLS", "0")
# Each test sees every refused webhook as a row; tests/regression/test_github_webhooks.py
# checks the window itself.
os.environ.setdefault("PEAKWATCH_WEBHOOK_REJECTION_WINDOW", "0")

from dashboard.settings import *  # noqa: E402,F403
