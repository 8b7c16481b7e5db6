"""Summarise every series from its results: after a bulk load, or to repair the summaries."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from dashboard import actions


class Command(BaseCommand):
    help = (
        "Compute every series' summary (newest result, commit count, chart points) from its"
        " results. Recording a result keeps its series up to date; this is for results"
        " loaded in bulk or recorded before summaries existed."
    )

    def handle(self, *args, **options):
        count = actions.summarise_all_series()
        self.stdout.write(f"summarised {count} series")
