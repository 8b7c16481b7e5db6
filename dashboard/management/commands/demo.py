"""``manage.py demo``: record a real demo history, then serve the dashboard."""

from __future__ import annotations

import shutil

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from dashboard import actions, gitrepo
from dashboard.demo import DEMO_STRATEGIES, create_demo_repository
from dashboard.models import Repository, Run

DEMO_REPOSITORY = "demo-models"


class Command(BaseCommand):
    help = "Record a demo history (a small git repository, every commit run) and serve it."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="record, do not serve")
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--fresh", action="store_true", help="forget the old demo first")

    def handle(self, *args, no_serve: bool, addrport: str, fresh: bool, **options):
        call_command("migrate", interactive=False, verbosity=0)
        if fresh:
            Repository.objects.filter(name=DEMO_REPOSITORY).delete()
        repository = Repository.objects.filter(name=DEMO_REPOSITORY).first()
        if repository is None:
            repository = self._record_history()
        url = f"http://{addrport}/"
        self.stdout.write(self.style.SUCCESS(f"Demo history recorded for {repository.name}."))
        self.stdout.write(f"Dashboard: {url}")
        model = repository.models.order_by("name").first()
        if model:
            self.stdout.write(f"Trend of {model.name}: {url.rstrip('/')}{model.get_absolute_url()}")
        if not no_serve:
            call_command("runserver", addrport, use_reloader=False)

    def _record_history(self) -> Repository:
        path = settings.DATA_DIR / "demo-repository"
        shutil.rmtree(path, ignore_errors=True)
        create_demo_repository(path, strategies=DEMO_STRATEGIES)
        repository = actions.track_repository(DEMO_REPOSITORY, str(path))
        mirror = gitrepo.mirror(str(path), settings.PEAKWATCH["WORK_DIR"])
        for info in gitrepo.history(mirror, "main"):
            commit = actions.record_commit(
                repository,
                sha=info.sha,
                parent_sha=info.parent_sha,
                branch="main",
                author=info.author,
                message=info.message,
                committed_at=info.committed_at,
            )
            self.stdout.write(f"Running {commit.short_sha} {commit.title} ...")
            run = actions.start_run(commit, trigger="demo")
            run.refresh_from_db()
            self.stdout.write(f"  {run.status}: {run.progress_done}/{run.progress_total} results")
            if run.status == Run.Status.FAILED:
                self.stderr.write(f"  error: {run.error}")
        return repository
