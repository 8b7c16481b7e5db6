"""Reusable filters, so views and tasks never rebuild them.

``dashboard.models`` imports this module to build its managers, so this one never imports
``dashboard.models``: another model is reached through the app registry, once both are
loaded (``_model``).
"""

from __future__ import annotations

from django.apps import apps
from django.db import connections, models
from django.db.models import OuterRef, Subquery
from django.db.models.expressions import RawSQL

from dashboard.series_key import SeriesKey
from planner.shapes import label_order


def _model(name: str) -> type[models.Model]:
    return apps.get_model("dashboard", name)


class CommitQuerySet(models.QuerySet):
    def for_repository(self, repository):
        return self.filter(repository=repository)

    def on_branch(self, branch: str):
        return self.filter(branch=branch)

    def chronological(self):
        return self.order_by("committed_at", "id")

    def matching_sha(self, sha: str):
        """Commits whose sha starts with ``sha`` (a short sha is enough)."""
        return self.filter(sha__startswith=sha.lower())

    def awaiting_approval(self):
        """Commits from outside that no maintainer approved yet: none of them may run."""
        return self.filter(from_outside=True, approved_at__isnull=True)

    def with_runs_awaiting_approval(self):
        return self.filter(runs__status="awaiting-approval").distinct()

    def branch_names(self, repository) -> list[str]:
        """The names of ``repository``'s branches that have commits, sorted.

        A ``DISTINCT`` over the commits reads every one of them per page view; this walks
        the (repository, branch) index from one name to the next (a loose index scan),
        one probe per branch however long the history.
        """
        table = self.model._meta.db_table
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                f"WITH RECURSIVE names(branch) AS ("
                f" SELECT MIN(branch) FROM {table} WHERE repository_id = %s AND branch > ''"
                f" UNION ALL SELECT (SELECT MIN(branch) FROM {table}"
                f" WHERE repository_id = %s AND branch > names.branch)"
                f" FROM names WHERE names.branch IS NOT NULL"
                f") SELECT branch FROM names WHERE branch IS NOT NULL",
                [repository.pk, repository.pk],
            )
            return [branch for (branch,) in cursor.fetchall()]


class RunQuerySet(models.QuerySet):
    def newest_first(self):
        return self.order_by("-created_at", "-id")

    def for_repository(self, repository):
        return self.filter(repository=repository)

    def with_commit(self):
        """Runs listed with their commit and repository, in the same query."""
        return self.select_related("commit", "repository")

    def for_commit(self, commit):
        return self.filter(commit=commit)

    def not_failed(self):
        """Runs waiting, going on, or over with something measured (succeeded or partial)."""
        return self.exclude(status="failed")

    def measured(self):
        """Finished runs with at least one successful Result to compare: succeeded, or
        partial (a failed run may have some too, but is closed before its boards are done)."""
        return self.filter(status__in=["succeeded", "partial"])

    def awaiting_approval(self):
        return self.filter(status="awaiting-approval")


class ResultQuerySet(models.QuerySet):
    def for_model(self, model):
        return self.filter(model=model)

    def on_branch(self, branch: str):
        return self.filter(commit__branch=branch)

    def succeeded(self):
        return self.filter(status="ok")

    def for_run(self, run):
        return self.filter(run=run)

    def for_commit_sha(self, sha: str):
        """Results of the commits whose sha starts with ``sha`` (a short sha is enough)."""
        return self.filter(commit__sha__startswith=sha.lower())

    def in_series(self, key: SeriesKey):
        """Results of the series ``key``: one model, strategy, board, toolchain and point."""
        return self.filter(**SeriesKey(*key)._asdict())

    def at_shape(self, label: str):
        """Results at the shape point ``label`` ("h=64,w=64"; "" for models without an axis)."""
        return self.filter(shape_label=label)

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

    def newest_ok_of(self, model, *, board: str = "", branch: str = "", toolchain=None):
        """``model``'s successful Results, newest commit first, on the model page's filters
        (a board's name, a branch, a toolchain; each left out where empty or None)."""
        results = (
            self.filter(model=model, status="ok")
            .select_related("commit", "strategy", "board", "run")
            .order_by("-commit__committed_at", "-commit_id", "id")
        )
        if board:
            results = results.filter(board__name=board)
        if branch:
            results = results.filter(commit__branch=branch)
        if toolchain is not None:
            results = results.filter(toolchain=toolchain)
        return results

    def for_commit(self, commit):
        return self.filter(commit=commit)

    def cached(self, cache_key: str, board: str, repository, shape_label: str = ""):
        """Successful compiles with ``cache_key`` on the board named ``board`` in
        ``repository`` (a Repository or its id) at the shape point ``shape_label``, oldest
        first.

        Reused results point at the one they were copied from, so only the originals are
        returned: figures are never copied from a copy. Only the repository's own results
        are: another repository's, however alike its files, never stand for its figures.
        """
        return self.succeeded().filter(
            cache_key=cache_key, board__name=board, reused_from__isnull=True,
            model__repository=repository, shape_label=shape_label,
        ).order_by("id")

    def with_recorded_reads(
        self, board: str, repository, *, model: str, strategy: str, toolchain: str,
        shape_label: str = "", observed_by: str,
    ):
        """Successful compiles of ``model`` x ``strategy`` with ``toolchain`` (a spec) on
        the board named ``board`` in ``repository`` at ``shape_label`` whose record of
        what they read of the checkout was made by ``observed_by``, newest first: those a
        commit may reuse when what they read is unchanged there (workers/compile_cache.py).
        Originals only, and only the repository's own, as in :meth:`cached`."""
        return self.succeeded().filter(
            board__name=board, reused_from__isnull=True, model__repository=repository,
            model__name=model, strategy__name=strategy, toolchain__spec=toolchain,
            shape_label=shape_label, reads__observed_by=observed_by,
        ).select_related("commit").order_by("-id")

    def newest_by_series(self) -> dict[SeriesKey, object]:
        """The newest successful Result of each series among these; of one commit run
        twice, the later run's. Meant for one commit's results."""
        return {result.series_key: result for result in self.succeeded().order_by("id")}

    def with_toolchain_spec(self, spec: str):
        return self.filter(toolchain__spec=spec)

    def latest_per_series(self):
        """The newest successful Result of every model x strategy x board x toolchain x
        shape point.

        Newest means the latest commit (``committed_at``, then the highest id among runs of
        the same commit), among the results this queryset already selects. One query; on
        PostgreSQL each series is looked up through the indexes, newest commit first, so
        the cost grows with the number of series, not with the history.
        """
        succeeded = self.succeeded()
        newest = succeeded.order_by("-commit__committed_at", "-id").values("id")
        if connections[self.db].vendor == "postgresql":
            newest = newest.filter(
                model_id=RawSQL("series.model_id", ()),
                strategy_id=RawSQL("series.strategy_id", ()),
                board_id=RawSQL("series.board_id", ()),
                toolchain_id=RawSQL("series.toolchain_id", ()),
                shape_label=RawSQL("series.shape_label", ()),
            )[:1]
            sql, params = newest.query.sql_with_params()
            model, strategy, board, toolchain = (
                self.model._meta.get_field(name).related_model._meta.db_table
                for name in ("model", "strategy", "board", "toolchain")
            )
            # Shape labels are open text, not a table: those of the summarised series
            # (a handful), and "" for results loaded without being summarised.
            labels = (
                f"(SELECT '' AS shape_label UNION"
                f" SELECT DISTINCT shape_label FROM {_model('Series')._meta.db_table})"
            )
            # Every model x strategy x board is a candidate series; the lateral lookup
            # finds nothing for the ones that never ran. Those tables are small.
            series = (
                "SELECT newest.id FROM ("
                " SELECT m.id AS model_id, s.id AS strategy_id, b.id AS board_id,"
                " t.id AS toolchain_id, p.shape_label"
                f" FROM {model} m CROSS JOIN {strategy} s CROSS JOIN {board} b"
                f" CROSS JOIN {toolchain} t CROSS JOIN {labels} p) series"
                f" CROSS JOIN LATERAL ({sql}) newest"
            )
            # ARRAY(...) is evaluated once, before the outer query: joined straight into
            # it, the planner may scan every result instead of looking up a few ids.
            table = self.model._meta.db_table
            return self.filter(
                RawSQL(
                    f'"{table}"."id" = ANY(ARRAY({series}))', params,
                    output_field=models.BooleanField(),
                )
            )
        newest = newest.filter(
            model_id=OuterRef("model_id"),
            strategy_id=OuterRef("strategy_id"),
            board_id=OuterRef("board_id"),
            toolchain_id=OuterRef("toolchain_id"),
            shape_label=OuterRef("shape_label"),
        )[:1]
        return succeeded.filter(id=Subquery(newest))


class SeriesQuerySet(models.QuerySet):
    def for_model(self, model):
        return self.filter(model=model)

    def on_board_named(self, name: str):
        return self.filter(board__name=name)

    def with_toolchain(self, toolchain):
        return self.filter(toolchain=toolchain)

    def with_points(self, result: bool = True):
        """Lines as the charts and tables show them; ``points`` (the heavy column) only
        where they are drawn."""
        series = self.select_related("strategy", "board", "toolchain")
        return series if result else series.defer("points")

    def with_latest(self):
        """Each line with its newest result, the result's commit and run, in one query."""
        return (
            self.with_points(False).filter(latest_result__isnull=False)
            .select_related("model", "latest_result__commit", "latest_result__run")
            # Shown nowhere a line is listed, and the widest columns a result has.
            .defer(
                "latest_html", "latest_result__latency_samples_ms",
                "latest_result__environment", "latest_result__details", "latest_result__error",
                "latest_result__run__log",
            )
        )


class RepositoryQuerySet(models.QuerySet):
    def with_latest_run(self):
        """Each repository with ``latest_run_id``, its newest run's id (None without runs)."""
        runs = _model("Run").objects.filter(repository=OuterRef("pk")).order_by(
            "-created_at", "-id"
        )
        return self.annotate(latest_run_id=Subquery(runs.values("id")[:1]))


class PullRequestQuerySet(models.QuerySet):
    def open(self):
        """Pull requests GitHub has not said were closed (or said were reopened since)."""
        return self.filter(closed_at__isnull=True)

    def for_repository(self, repository):
        return self.filter(repository=repository)

    def with_latest_run(self):
        """Each pull request with ``latest_run_id``, the newest run of its head (None while
        none started)."""
        runs = _model("Run").objects.filter(pull_request=OuterRef("pk")).order_by(
            "-created_at", "-id"
        )
        return self.annotate(latest_run_id=Subquery(runs.values("id")[:1]))


class AlertQuerySet(models.QuerySet):
    def for_repository(self, repository):
        return self.filter(repository=repository)

    def in_repository_named(self, name: str):
        return self.filter(repository__name=name)

    def for_commit_sha(self, sha: str):
        """Alerts on the commits whose sha starts with ``sha`` (a short sha is enough)."""
        return self.filter(commit__sha__startswith=sha.lower())

    def for_commit(self, commit):
        """Every alert on ``commit``, whichever of its runs raised it: CI asks about a
        commit, and a re-run of it must not hide what an earlier run found."""
        return self.filter(commit=commit)

    def open(self):
        return self.filter(state__in=["new", "acknowledged"])

    def for_run(self, run):
        return self.filter(run=run)

    def with_related(self):
        return self.select_related(
            "repository", "commit__repository", "run", "model__repository", "strategy",
            "board", "toolchain", "baseline__commit",
        )

    def newest_commits(self):
        """The ids of the commits these alerts are on, newest commit first."""
        return (
            self.order_by("-commit__committed_at", "-commit_id")
            .values_list("commit_id", flat=True)
            .distinct()
        )

    def grouped_by_commit(self) -> list[tuple]:
        """(commit, [alerts]) pairs, newest commit first, each commit's alerts by model,
        strategy, board, toolchain, then shape point by its value (seq=64 before seq=512,
        which the database, sorting text, would not give); one query."""
        groups: dict[int, tuple] = {}
        for alert in self.with_related().order_by(
            "-commit__committed_at", "commit_id", "model__name", "strategy__name", "kind"
        ):
            groups.setdefault(alert.commit_id, (alert.commit, []))[1].append(alert)
        for _, alerts in groups.values():
            alerts.sort(key=lambda alert: (
                alert.model.name, alert.strategy.name, alert.board.name, alert.toolchain.spec,
                label_order(alert.shape_label), alert.kind_rank, alert.pk,
            ))
        return list(groups.values())
