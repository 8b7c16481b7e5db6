"""Celery workers: one queue per board, each task re-reads its rows and calls one function."""
