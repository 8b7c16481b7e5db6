"""``manage.py track NAME URL``: register a repository and print where its webhook goes."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from dashboard import actions
from dashboard.models import Repository
from dashboard.redaction import redact
from dashboard.tracking import webhook_url


class Command(BaseCommand):
    help = (
        "Track a git repository (URL or local path) whose commits carry a peakwatch.toml, "
        "and print its webhook URL and secret."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="a short name: letters, digits, '-' and '_'")
        parser.add_argument(
            "url", help="what git clones: https://..., git@..., or a path (where "
            "PEAKWATCH_GIT_PROTOCOLS names file, as the embedded default does)",
        )
        parser.add_argument("--branch", default="main", help="the default branch (main)")
        parser.add_argument(
            "--trust", default=Repository.Trust.COLLABORATORS, choices=Repository.Trust.values,
            help="whose pull requests run without a maintainer's approval",
        )
        parser.add_argument(
            "--github", metavar="OWNER/NAME", default=None,
            help="the repository on GitHub: its webhook deliveries, statuses and comments. "
            "Needed when URL is a path or a mirror that is not on github.com",
        )

    def handle(self, *args, name, url, branch, trust, github, **options):
        problem = actions.why_not_trackable(name, url, branch, github or "")
        if problem:
            raise CommandError(problem, returncode=2)
        repository = actions.track_repository(
            name, url, branch, trust=trust, github_repository=github
        )
        # Terminals are scrolled back, logged and pasted: the URL's password stays masked.
        self.stdout.write(
            f"Tracking {repository.name}: {redact(url)} (default branch {branch})"
        )
        trusted = repository.get_trust_display()
        self.stdout.write(f"Pull requests run without approval from: {trusted}")
        self.stdout.write(
            "GitHub webhook (content type application/json; events push, pull_request):"
        )
        self.stdout.write(f"  payload URL  {webhook_url(repository)}")
        self.stdout.write(f"  secret       {repository.webhook_secret}")
        if repository.github_repository:
            self.stdout.write(f"  on GitHub    {repository.github_repository}")
        elif not actions.accepts_github_deliveries(repository):
            self.stdout.write(
                "  GitHub deliveries are refused (404) until Peakwatch knows which GitHub "
                f"repository this is: track {repository.name} again with --github OWNER/NAME"
            )
        self.stdout.write(f"Run a commit now: peakwatch run {repository.name} --wait")
