"""The Celery application: Redis as broker when configured, eager in process otherwise."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("peakwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {
    # Planning a run is cheap (read the manifest, fan out); measuring belongs to a board.
    "workers.tasks.plan_run": {"queue": "peakwatch"},
    # Git fetches and HTTP calls of regression tracking; never a compile.
    "workers.tracking.*": {"queue": "peakwatch"},
}
# Imported by the worker once Django is set up (importing now would load models too early).
app.conf.imports = ["workers.tasks", "workers.tracking"]
