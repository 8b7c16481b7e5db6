"""``manage.py create_api_token NAME --repository REPO``: a token for ``POST /api/runs``
that starts runs of that repository only; ``--all-repositories`` instead, and only that,
makes one for every repository."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from dashboard import actions
from dashboard.models import Repository


class Command(BaseCommand):
    help = (
        "Create an API token for POST /api/runs, for one repository (--repository NAME) or, "
        "explicitly, for all of them (--all-repositories); it is printed once and stored "
        "hashed."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="who or what uses the token, e.g. 'github-actions'")
        parser.add_argument("--repository", help="allow only runs of this repository")
        parser.add_argument(
            "--all-repositories", action="store_true",
            help="allow runs of every repository, present and future",
        )

    def handle(self, *args, name: str, repository: str | None, all_repositories: bool,
               **options):
        if repository and all_repositories:
            raise CommandError("pass --repository NAME or --all-repositories, not both")
        if not repository and not all_repositories:
            raise CommandError(
                "a token is for one repository: pass --repository NAME, or "
                "--all-repositories for a token that may start runs of every repository"
            )
        repo = None
        if repository:
            repo = Repository.objects.filter(name=repository).first()
            if repo is None:
                raise CommandError(f"no repository named {repository!r}")
        token, raw = actions.create_api_token(name, repo, all_repositories=all_repositories)
        self.stderr.write(f"Token {name!r} for {token.scope} created; it is shown only now:")
        self.stdout.write(raw)
