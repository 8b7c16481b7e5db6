"""``celery -A workers.app worker``: the Celery app lives with the Django project."""

from dashboard.celery import app

__all__ = ["app"]
