"""``manage.py create_api_token NAME [--repository REPO]``: a token for ``POST /api/runs``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from dashboard import actions
from dashboard.models import Repository


class Command(BaseCommand):
    help = "Create an API token for POST /api/runs; it is printed once and stored hashed."

    def add_arguments(self, parser):
        parser.add_argument("name", help="who or what uses the token, e.g. 'github-actions'")
        parser.add_argument("--repository", help="allow only runs of this repository")

    def handle(self, *args, name: str, repository: str | None, **options):
        repo = None
        if repository:
            repo = Repository.objects.filter(name=repository).first()
            if repo is None:
                raise CommandError(f"no repository named {repository!r}")
        _, raw = actions.create_api_token(name, repo)
        self.stderr.write(f"Token {name!r} created; it is shown only now:")
        self.stdout.write(raw)
