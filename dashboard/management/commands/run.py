"""``manage.py run NAME [--sha SHA | --branch B] [--wait] [--fail-on-alert[=KIND]]``: run one
commit of a repository.

With the embedded default (no broker) the run happens here, in process; with workers,
``--wait`` follows its progress. It then prints the results and the commit's alerts.
"""

from __future__ import annotations

import time
from argparse import RawDescriptionHelpFormatter

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from dashboard import gitrepo, queue, tracking
from dashboard.ci_client import WORKER_GRACE
from dashboard.commit_alerts import (
    EXIT_ALERT,
    FAIL_ON,
    commit_alerts,
    failing,
    links,
    movement,
    series_name,
)
from dashboard.models import Alert, Repository, Result, Run
from dashboard.templatetags.peakwatch import human_bytes
from planner.shapes import label_order

POLL_SECONDS = 2.0

EXIT_STATUS = f"""\
exit status:
  0  the run succeeded (and, with --fail-on-alert, no open alert of that kind is on the commit)
  1  the run is partial or failed, waits for approval, ran past --timeout, or a queue it
     needs had no worker for --worker-grace (whatever the commit's alerts: a run that did
     not succeed keeps this code)
  2  bad input: an unknown repository or revision
  {EXIT_ALERT}  the run succeeded, but --fail-on-alert found an open alert on the commit; open is
     new or acknowledged, while intended, invalid and fixed are closed"""


class _HelpFormatter(DjangoHelpFormatter, RawDescriptionHelpFormatter):
    pass


class Command(BaseCommand):
    help = (
        "Run the suite of one commit of a tracked repository (its branch head by default);\n"
        "with --wait, print its results and the commit's alerts.\n\n" + EXIT_STATUS
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the tracked repository's name")
        rev = parser.add_mutually_exclusive_group()
        rev.add_argument("--sha", help="a commit (full or short sha)")
        rev.add_argument("--branch", help="a branch; its head is run")
        parser.add_argument("--wait", action="store_true",
                            help="follow the run, print its results and the commit's alerts, "
                            "exit 1 if any result failed")
        parser.add_argument(
            "--fail-on-alert", nargs="?", const="bytes", choices=FAIL_ON, default=None,
            metavar="{bytes,ram,latency,any}",
            help=f"implies --wait; exit {EXIT_ALERT} when an open alert of this kind (bytes "
            f"when no kind is given, which counts a micro board's RAM too) is on the commit: "
            f"what a CI job fails on",
        )
        parser.add_argument("--timeout", type=float, default=3 * 3600,
                            help="seconds --wait waits at most")
        parser.add_argument("--worker-grace", type=float, default=WORKER_GRACE,
                            help="seconds a queue the run needs may go without a worker "
                            f"before --wait gives up, naming it (default: {WORKER_GRACE:g})")

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # The help's exit codes are a table a CI author reads: keep its line breaks.
        parser.formatter_class = _HelpFormatter
        return parser

    def handle(self, *args, name, sha, branch, wait, timeout, fail_on_alert, worker_grace,
               **options):
        wait = wait or fail_on_alert is not None
        repository = Repository.objects.filter(name=name).first()
        if repository is None:
            known = ", ".join(Repository.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no repository named {name!r}; tracked: {known}", returncode=2)
        branch = branch or ("" if sha else repository.default_branch)
        rev = sha or branch
        try:
            mirror = tracking.mirror_of(repository)
            tracking.resolve_revision(mirror, rev, branch=branch)
        except gitrepo.GitError as exc:
            raise CommandError(f"cannot run {rev!r} of {name}: {exc}", returncode=2) from None
        run = tracking.run_revision(repository, rev, branch=branch, trigger="command")
        if run is None:
            raise CommandError(f"cannot run {rev!r} of {name}", returncode=2)
        self.stdout.write(f"run {run.pk}: {run.commit.short_sha} {run.commit.title}")
        if run.awaits_approval:
            # Whoever types this can start runs, not vouch for code from outside: the run
            # waits, like its pull request's, and one approval on its page releases both.
            self.stdout.write(
                f"run {run.pk} waits for a maintainer's approval: {run.commit.short_sha} is "
                f"code from outside the repository; approve it at {run.get_absolute_url()}"
            )
        if not wait:
            return
        run = self._follow(run, timeout, worker_grace)
        self._table(run)
        alerts = commit_alerts(run.commit)
        self._alerts(run, alerts)
        self.stdout.write(_outcome(run))
        if run.status != Run.Status.SUCCEEDED:
            raise CommandError(_outcome(run), returncode=1)
        failed_on = failing(alerts, fail_on_alert) if fail_on_alert else []
        if failed_on:
            kind = "" if fail_on_alert == "any" else f"{fail_on_alert} "
            raise CommandError(
                f"{len(failed_on)} open {kind}alert(s) on "
                f"{run.commit.short_sha}: see {links(run)['alerts']}",
                returncode=EXIT_ALERT,
            )

    def _follow(self, run: Run, timeout: float, worker_grace: float) -> Run:
        deadline = time.monotonic() + timeout
        shown = -1
        unconsumed: list[str] = []
        since = 0.0
        while True:
            run.refresh_from_db()
            if run.progress_done != shown:
                shown = run.progress_done
                self.stdout.write(
                    f"  {run.progress_done} of {run.progress_total or '?'} results recorded"
                    f" ({run.status})"
                )
            if run.is_finished:
                return run
            waiting = queue.waiting_on(run)
            if waiting != unconsumed:
                unconsumed, since = waiting, time.monotonic()
                if waiting:
                    self.stdout.write(
                        f"  waiting: no worker consumes {', '.join(waiting)} (start one with "
                        f"celery -A workers.app worker -Q {','.join(waiting)})"
                    )
            if unconsumed and time.monotonic() - since > worker_grace:
                raise CommandError(
                    f"run {run.pk} waited {worker_grace:g} s with no worker on "
                    f"{', '.join(unconsumed)}", returncode=1,
                )
            if run.awaits_approval:
                raise CommandError(f"run {run.pk} waits for a maintainer's approval", returncode=1)
            if time.monotonic() > deadline:
                raise CommandError(f"run {run.pk} did not finish in {timeout:g} s", returncode=1)
            time.sleep(POLL_SECONDS)

    def _table(self, run: Run) -> None:
        rows = sorted(
            Result.objects.for_run(run).select_related("model", "strategy", "board", "toolchain"),
            # Points by value: as text, seq=128 would come before seq=32.
            key=lambda r: (
                r.model.name, label_order(r.shape_label), r.board.name, r.strategy.name,
                r.toolchain.spec, r.pk,
            ),
        )
        labels = {result.toolchain_id: result.toolchain.label for result in rows}
        # Two toolchains make each model and strategy appear twice: a column tells them apart.
        several = len(labels) > 1
        if len(labels) == 1:
            self.stdout.write(f"compiled with {next(iter(labels.values()))}")
        width = max((len(label) for label in labels.values()), default=9)
        toolchain = f"{'toolchain':<{width}} " if several else ""
        self.stdout.write(
            f"{'model':<20} {'board':<8} {'strategy':<32} {toolchain}"
            f"{'planned':>12} {'peak':>12}  status"
        )
        for result in rows:
            status = "ok" if result.status == "ok" else f"FAILED: {_first_line(result.error)}"
            toolchain = f"{labels[result.toolchain_id]:<{width}} " if several else ""
            # A model measured at several shape points has a row per point, named so.
            model = result.model.name + (f" at {result.shape_label}" if result.shape_label else "")
            self.stdout.write(
                f"{model:<20} {result.board.name:<8} {result.strategy.name:<32} "
                f"{toolchain}{human_bytes(result.planned_bytes):>12} "
                f"{human_bytes(result.measured_peak_bytes):>12}  {status}"
            )

    def _alerts(self, run: Run, alerts: list[Alert]) -> None:
        if not alerts:
            self.stdout.write(f"no alerts on {run.commit.short_sha}")
            return
        opened = sum(alert.is_open for alert in alerts)
        self.stdout.write(
            f"{len(alerts)} alert(s) on {run.commit.short_sha}, {opened} open: "
            f"{links(run)['alerts']}"
        )
        for alert in alerts:
            self.stdout.write(
                f"  {alert.kind:<7} {series_name(alert)}: {movement(alert)}"
                f"  [{alert.state}]"
            )
            if alert.tolerance:
                self.stdout.write(f"    past its tolerance: {alert.tolerance}")


def _outcome(run: Run) -> str:
    """What became of the finished ``run``: "run 7 succeeded", "run 7 partial: 3 of 12
    failed", "run 7 failed: none of 12 succeeded", or failed with the run's error."""
    if run.status == Run.Status.FAILED and not (run.error or run.failures):
        return f"run {run.pk} failed: it recorded no error message"
    return f"run {run.pk} {run.status_text}" + (f": {run.error}" if run.error else "")


def _first_line(error: str) -> str:
    # A failure may come without a message (a worker killed mid-result): say so.
    lines = [line for line in error.splitlines() if line.strip()]
    return lines[0] if lines else "no error message was recorded"
