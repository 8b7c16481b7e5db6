"""``manage.py demo``: record a real demo history, then serve the dashboard."""

from __future__ import annotations

import shutil

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from dashboard import actions, gitrepo
from dashboard.demo import DEMO_STRATEGIES, create_demo_repository
from dashboard.models import Repository, Result, Run

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
        runs = Run.objects.for_repository(repository)
        going_on = runs.exclude(status__in=Run.FINISHED).exists()  # with workers: not yet
        if not going_on and not Result.objects.succeeded().filter(run__in=runs).exists():
            # Serving a dashboard of failures would look like a demo that works.
            raise CommandError(
                f"no result of {repository.name} succeeded, so there is nothing to show "
                f"(why is above; --fresh records the history again)",
                returncode=1,
            )
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
            self._report(run)
        return repository

    def _report(self, run: Run) -> None:
        """What really happened to one commit's run: how many results were recorded and how
        many are ok, and why the others failed."""
        if run.status == Run.Status.SUCCEEDED:
            self.stdout.write(f"  succeeded: all {run.progress_done} results ok")
        elif run.is_finished:
            self.stdout.write(f"  {run.status_text}")
        else:
            self.stdout.write(
                f"  {run.status}: {run.progress_done} of {run.progress_total} results so far"
            )
        if run.error:
            self.stderr.write(f"  error: {run.error}")
        errors = (
            run.results.filter(status=Result.Status.FAILED).order_by("id")
            .values_list("error", flat=True)
        )
        # The same cause (no TVM, a sandbox that cannot start) usually fails them all.
        for error in list(dict.fromkeys(_first_line(error) for error in errors))[:3]:
            self.stderr.write(f"  failed: {error}")


def _first_line(error: str) -> str:
    lines = [line for line in error.splitlines() if line.strip()]
    return lines[0][:300] if lines else "no error message was recorded"
