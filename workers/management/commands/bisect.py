"""``manage.py bisect REPO MODEL GOOD BAD``: the first commit that changed planned bytes."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dashboard import gitrepo, tracking
from dashboard.models import Repository, Result
from dashboard.templatetags.peakwatch import human_bytes
from workers.bisect import bisect


class Command(BaseCommand):
    help = (
        "Binary-search GOOD..BAD of a tracked repository for the first commit that changed "
        "MODEL's planned bytes, compiling only (no timing), with the manifest at each commit."
    )

    def add_arguments(self, parser):
        parser.add_argument("repository", help="the tracked repository's name")
        parser.add_argument("model", help="the model's name in peakwatch.toml")
        parser.add_argument("good", help="a commit (or branch) with the old planned bytes")
        parser.add_argument("bad", help="a later commit with the new planned bytes")
        parser.add_argument("--strategy", default="greedy-by-size")
        parser.add_argument("--target", default="llvm")
        parser.add_argument(
            "--point", default="",
            help="for a model with a shape axis, the point to follow, e.g. h=256,w=256",
        )

    def handle(self, *args, repository, model, good, bad, strategy, target, point, **options):
        from planner.tvm.strategies import strategy_names

        if strategy not in strategy_names():
            known = ", ".join(strategy_names())
            raise CommandError(f"unknown strategy {strategy!r}; known: {known}")
        repo = Repository.objects.filter(name=repository).first()
        if repo is None:
            raise CommandError(f"no repository named {repository!r}")

        def cached(key: str) -> int | None:
            hit = Result.objects.succeeded().filter(cache_key=key, model__repository=repo)
            return hit.values_list("planned_bytes", flat=True).first()

        def approved_only(shas: list[str]) -> None:
            # Bisecting compiles, so runs the repository's code at every probe: code from
            # outside that no maintainer approved is refused, as every run of it waits.
            held = tracking.unapproved(repo, mirror, shas)
            if held:
                listed = ", ".join(sha[:10] for sha in held[:5])
                more = f" and {len(held) - 5} more" if len(held) > 5 else ""
                raise CommandError(
                    f"GOOD..BAD holds code from outside the repository that no maintainer "
                    f"approved ({listed}{more}): approve it on a run's page, or bisect "
                    f"commits on its branches"
                )

        try:
            mirror = gitrepo.mirror(repo.clone_url, settings.PEAKWATCH["WORK_DIR"])
            outcome = bisect(mirror, model, good, bad, strategy=strategy, target=target,
                             cached=cached, check=approved_only, repository=repo.pk,
                             point=point)
        except (gitrepo.GitError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except RuntimeError as exc:
            raise CommandError(f"a compile failed: {exc}") from None
        for probe in outcome.probes:
            figure = human_bytes(probe.planned_bytes) if probe.planned_bytes is not None else "—"
            self.stdout.write(f"  {probe.sha[:10]}  {figure:>12}  {probe.how} {probe.detail}")
        self.stdout.write(
            f"{outcome.commits} commits after {outcome.good[:10]}, "
            f"{outcome.compiles} compiled ({strategy})"
        )
        if outcome.first_changed is None:
            self.stdout.write(f"{model}'s planned bytes did not change between GOOD and BAD.")
            return
        info = gitrepo.commit_info(mirror, outcome.first_changed)
        self.stdout.write(self.style.WARNING(
            f"first changed at {info.sha} {info.message.splitlines()[0] if info.message else ''}"
        ))
        self.stdout.write(
            f"planned bytes {outcome.before} -> {outcome.after}"
        )
