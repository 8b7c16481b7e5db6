"""Settings for the test suite: the product's settings against real local services.

Tests talk to a real PostgreSQL and a real Redis; ``.ci/run`` starts both when absent.
Tasks run eagerly unless a test starts a real worker and switches that off.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/peakwatch")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
os.environ.setdefault("PEAKWATCH_LATENCY_REPEAT", "2")

from dashboard.settings import *  # noqa: E402,F403
