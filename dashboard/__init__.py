"""The Django project (settings, URLs) and Peakwatch's main app (models, pages, API)."""

# Loading the Celery app with Django makes @shared_task bind to it in every process.
from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
