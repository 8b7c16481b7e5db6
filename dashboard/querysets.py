"""Reusable filters, so views and tasks never rebuild them."""

from __future__ import annotations

from django.db import models


class CommitQuerySet(models.QuerySet):
    def for_repository(self, repository):
        return self.filter(repository=repository)

    def on_branch(self, branch: str):
        return self.filter(branch=branch)

    def chronological(self):
        return self.order_by("committed_at", "id")


class RunQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status__in=["queued", "running"])

    def newest_first(self):
        return self.order_by("-created_at", "-id")

    def for_repository(self, repository):
        return self.filter(repository=repository)

    def with_commit(self):
        """Runs listed with their commit and repository, in the same query."""
        return self.select_related("commit", "repository")


class ResultQuerySet(models.QuerySet):
    def for_model(self, model):
        return self.filter(model=model)

    def for_strategy(self, strategy):
        return self.filter(strategy=strategy)

    def on_board(self, board):
        return self.filter(board=board)

    def on_branch(self, branch: str):
        return self.filter(commit__branch=branch)

    def succeeded(self):
        return self.filter(status="ok")

    def for_run(self, run):
        return self.filter(run=run)

    def for_commit_sha(self, sha: str):
        """Results of the commits whose sha starts with ``sha`` (a short sha is enough)."""
        return self.filter(commit__sha__startswith=sha.lower())

    def for_strategy_named(self, name: str):
        return self.filter(strategy__name=name)

    def on_board_named(self, name: str):
        return self.filter(board__name=name)

    def for_model_named(self, name: str):
        return self.filter(model__name=name)

    def in_repository_named(self, name: str):
        return self.filter(model__repository__name=name)

    def with_related(self):
        """Everything a page or serializer shows of a result, in one query plus artifacts."""
        return self.select_related(
            "run", "commit", "model__repository", "strategy", "board"
        ).prefetch_related("artifacts")

    def chronological(self):
        return self.order_by("commit__committed_at", "commit_id", "id")

    def latest_per_series(self):
        """The newest successful Result of every model x strategy x board."""
        rows = (
            self.succeeded()
            .order_by("model_id", "strategy_id", "board_id", "-commit__committed_at", "-id")
            .values_list("id", "model_id", "strategy_id", "board_id")
        )
        newest: dict[tuple[int, int, int], int] = {}
        for result_id, *series in rows:
            newest.setdefault(tuple(series), result_id)
        return self.filter(id__in=newest.values())
