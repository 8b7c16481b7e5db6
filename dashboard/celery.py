"""The Celery application, with the Django project as in Celery's own Django layout.

Redis is the broker when configured; without one, tasks run eagerly in process. The worker
modules are named, not imported, so the web process never loads them.
"""

from __future__ import annotations

import os

from celery import Celery, signals

from dashboard.redaction import RedactingFilter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("peakwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {
    "workers.tasks.plan_run": {"queue": "peakwatch"},
    "workers.tracking.*": {"queue": "peakwatch"},
}
# Imported by a worker once Django is set up (importing now would load models too early).
app.conf.imports = ["workers.tasks", "workers.tracking", "workers.health"]


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):
    # A worker replaces the handlers of settings.LOGGING with its own: filter those too.
    for handler in logger.handlers:
        handler.addFilter(RedactingFilter())
