"""``manage.py track NAME URL``: register a repository and print where its webhook goes."""

from __future__ import annotations

import re
import secrets

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from dashboard import actions
from dashboard.models import Repository
from dashboard.redaction import redact

NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")


class Command(BaseCommand):
    help = (
        "Track a git repository (URL or local path) whose commits carry a peakwatch.toml, "
        "and print its webhook URL and secret."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="a short name: letters, digits, '-' and '_'")
        parser.add_argument("url", help="what git clones: https://..., git@..., or a path")
        parser.add_argument("--branch", default="main", help="the default branch (main)")
        parser.add_argument(
            "--trust", default=Repository.Trust.COLLABORATORS, choices=Repository.Trust.values,
            help="whose pull requests run without a maintainer's approval",
        )

    def handle(self, *args, name, url, branch, trust, **options):
        if not NAME.match(name):
            raise CommandError(f"{name!r}: use letters, digits, '-' and '_'", returncode=2)
        if url.startswith("-"):
            raise CommandError(f"{url!r} is not a git URL or path", returncode=2)
        existing = Repository.objects.filter(name=name).first()
        secret = (existing.webhook_secret if existing else "") or secrets.token_hex(20)
        repository = actions.track_repository(
            name, url, branch, trust=trust, webhook_secret=secret
        )
        hook = settings.PEAKWATCH_BASE_URL.rstrip("/") + reverse(
            "github-webhook-repository", args=[repository.name]
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
        self.stdout.write(f"  payload URL  {hook}")
        self.stdout.write(f"  secret       {repository.webhook_secret}")
        self.stdout.write(f"Run a commit now: python3 manage.py run {repository.name} --wait")
