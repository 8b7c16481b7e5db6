"""Regression tracking pages: comparisons, plan diffs and alert triage."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard import actions, compare
from dashboard.auth import maintainer_required
from dashboard.commit_alerts import commit_alerts
from dashboard.models import Alert, Commit, PullRequest, Repository, Result, Run
from dashboard.shape_curves import shape_comparison
from planner import plan_diff


def _wants_json(request) -> bool:
    return request.GET.get("format") == "json"


def _commit_or_404(repository: Repository, sha: str):
    commit = compare.find_commit(repository, sha)
    if commit is None:
        raise Http404(f"no single commit {sha!r} in {repository.name}")
    return commit


def _comparison(
    request, repository, base, head, *, title, rows, pareto, extra=None, json_extra=None
):
    # Two commits: models with a shape axis get base and head drawn across their points.
    shapes = (
        shape_comparison(base, head)
        if base is not None and head is not None and base.pk != head.pk else {"models": []}
    )
    context = {
        "shapes": shapes,
        "repository": repository,
        "title": title,
        "base": base,
        "head": head,
        "rows": rows,
        "groups": compare.group_by_model(rows),
        "pareto": pareto,
        # By series, then shape point by its value.
        "alerts": commit_alerts(head) if head is not None else [],
        **(extra or {}),
    }
    if _wants_json(request):
        return JsonResponse(
            {
                "repository": repository.name,
                "title": title,
                "base": base.sha if base else None,
                "head": head.sha if head else None,
                "rows": [row.to_json() for row in rows],
                "pareto": pareto,
                "shapes": shapes,
                **(json_extra or {}),
            }
        )
    return render(request, "dashboard/compare.html", context)


@require_GET
def compare_commits_page(request, repository: str, base: str, head: str):
    repository = get_object_or_404(Repository, name=repository)
    base_commit = _commit_or_404(repository, base)
    head_commit = _commit_or_404(repository, head)
    # Read once for the table and the chart: most of the page's cost.
    results = {"base": compare.results_of(base_commit), "head": compare.results_of(head_commit)}
    return _comparison(
        request, repository, base_commit, head_commit,
        title=f"{base_commit.short_sha} → {head_commit.short_sha}",
        rows=compare.compare_commits(
            base_commit, head_commit, results=(results["base"], results["head"])
        ),
        pareto=compare.pareto_points({"base": base_commit, "head": head_commit}, results),
    )


@require_GET
def pull_request_compare(request, repository: str, number: int):
    pull_request = get_object_or_404(
        PullRequest.objects.select_related("repository"), repository__name=repository,
        number=number,
    )
    repository = pull_request.repository
    head = compare.find_commit(repository, pull_request.head_sha)
    base = compare.find_commit(repository, pull_request.base_sha) if pull_request.base_sha else None
    if head is None or base is None:
        raise Http404("the pull request's commits are not recorded yet")
    return _comparison(
        request, repository, base, head,
        title=f"#{pull_request.number} {pull_request.title}",
        rows=compare.compare_commits(base, head),
        pareto=compare.pareto_points({"merge base": base, "head": head}),
        extra={"pull_request": pull_request},
    )


@require_GET
def branch_compare(request, repository: str, branch: str):
    repository = get_object_or_404(Repository, name=repository)
    head = compare.branch_head(repository, branch)
    if head is None:
        raise Http404(f"no results on branch {branch!r}")
    base = compare.branch_base(repository, head)
    if base is None:
        raise Http404(f"no results on {repository.default_branch}")
    return _comparison(
        request, repository, base, head,
        title=f"{branch} against {repository.default_branch}",
        rows=compare.compare_commits(base, head),
        pareto=compare.pareto_points({repository.default_branch: base, branch: head}),
    )


@require_GET
def strategy_compare(request, repository: str, sha: str):
    repository = get_object_or_404(Repository, name=repository)
    commit = _commit_or_404(repository, sha)
    strategies = sorted({key[1] for key in compare.results_of(commit)})
    base = request.GET.get("base") or (strategies[0] if strategies else "")
    head = request.GET.get("head") or next((s for s in strategies if s != base), base)
    return _comparison(
        request, repository, commit, commit,
        title=f"{head} against {base} at {commit.short_sha}",
        rows=compare.compare_strategies(commit, base, head),
        pareto=compare.pareto_points({commit.short_sha: commit}),
        extra={"strategies": strategies, "base_strategy": base, "head_strategy": head,
               "by_strategy": True},
    )


@require_GET
def toolchain_compare(request, repository: str, sha: str):
    """One commit under two toolchains (``?base=SPEC&head=SPEC``; an empty spec is the
    worker's own TVM), per model, strategy and board, with a plan diff for each pair."""
    repository = get_object_or_404(Repository, name=repository)
    commit = _commit_or_404(repository, sha)
    toolchains = compare.toolchains_of(commit)
    specs = [t.spec for t in toolchains]
    base = request.GET.get("base", specs[0] if specs else "")
    head = request.GET.get("head", next((s for s in reversed(specs) if s != base), base))
    unknown = [s for s in dict.fromkeys((base, head)) if specs and s not in specs]
    if unknown:
        known = ", ".join(repr(s) for s in specs)
        return HttpResponseBadRequest(
            f"no results with toolchain {', '.join(repr(s) for s in unknown)} at "
            f"{commit.short_sha}; toolchains there: {known}",
            content_type="text/plain",
        )
    labels = {t.spec: t.label for t in toolchains}
    return _comparison(
        request, repository, commit, commit,
        title=f"{labels.get(head, head)} against {labels.get(base, base)} at {commit.short_sha}",
        rows=compare.compare_toolchains(commit, base, head),
        pareto=compare.pareto_points({commit.short_sha: commit}),
        extra={"toolchains": toolchains, "base_toolchain": base, "head_toolchain": head,
               "base_label": labels.get(base, base), "head_label": labels.get(head, head),
               "by_toolchain": True},
        json_extra={"base_toolchain": base, "head_toolchain": head},
    )


class _PlanMissing(Exception):
    """A side of a plan diff has no plan to read: ``missing`` says which and why."""

    def __init__(self, base: Result, head: Result, missing: dict[str, str]):
        super().__init__("; ".join(missing.values()))
        self.base, self.head, self.missing = base, head, missing


def _plan_diff(base_pk: int, head_pk: int):
    results = Result.objects.with_related()
    base = get_object_or_404(results, pk=base_pk)
    head = get_object_or_404(results, pk=head_pk)
    (before, base_why), (after, head_why) = compare.read_plan(base), compare.read_plan(head)
    if before is None or after is None:
        missing = {
            side: why or f"result {result.pk} has no plan.json artifact"
            for side, result, plan, why in (
                ("base", base, before, base_why), ("head", head, after, head_why)
            )
            if plan is None
        }
        raise _PlanMissing(base, head, missing)
    return base, head, plan_diff.diff_plans(before, after), (before, after)


@require_GET
def plan_diff_page(request, base: int, head: int):
    try:
        base, head, diff, plans = _plan_diff(base, head)
    except _PlanMissing as gone:
        # Not the bare "Not Found" of a missing page: the results exist, a file does not.
        return render(
            request, "dashboard/plan_missing.html",
            {"base": gone.base, "head": gone.head, "missing": [
                (side, gone.base if side == "base" else gone.head, why)
                for side, why in gone.missing.items()
            ]}, status=404,
        )
    before, after = (
        {key: plan.get(key) for key in ("tensors", "peak", "arena_bytes")} for plan in plans
    )
    return render(
        request, "dashboard/plan_diff.html",
        {"base": base, "head": head, "diff": diff,
         "parts": compare.breakdown_change(
             compare.Breakdown.of(base), compare.Breakdown.of(head)
         ),
         # Each side outlines what changed under its own names.
         "timelines": {"base": before, "head": after, "changed": diff["changed_ids"]},
         "json_url": reverse("plan-diff-json", args=[base.pk, head.pk])},
    )


@require_GET
def plan_diff_json(request, base: int, head: int):
    try:
        base, head, diff, _ = _plan_diff(base, head)
    except _PlanMissing as gone:
        return JsonResponse(
            {"error": f"no plan diff: {gone}", "base_result": gone.base.pk,
             "head_result": gone.head.pk, "missing": gone.missing},
            status=404,
        )
    return JsonResponse(
        {"base_result": base.pk, "head_result": head.pk,
         # The shape point of each plan ("" for a model without an axis).
         "base_shape_label": base.shape_label, "head_shape_label": head.shape_label,
         "parts": compare.breakdown_change(
             compare.Breakdown.of(base), compare.Breakdown.of(head)
         ),
         **plan_diff.plan_diff_json(diff)}
    )


@require_GET
def alerts_page(request):
    # The alerted result too: a row shows what its planned bytes are made of.
    alerts = Alert.objects.select_related("result")
    repository = request.GET.get("repository", "")
    commit = request.GET.get("commit", "")
    state = request.GET.get("state", "")
    if state and state not in Alert.State.values:
        return HttpResponseBadRequest(
            f"unknown state {state!r}: one of {', '.join(Alert.State.values)}"
        )
    if repository:
        alerts = alerts.filter(repository__name=repository)
    if commit:
        alerts = alerts.filter(commit__sha__startswith=commit.lower())
    if state:
        alerts = alerts.filter(state=state)
    return render(
        request, "dashboard/alerts.html",
        {"groups": alerts.grouped_by_commit(), "states": Alert.State.choices,
         "repository": repository, "commit": commit, "state": state},
    )


@require_POST
@maintainer_required
def triage_alert(request, pk: int):
    alert = get_object_or_404(Alert, pk=pk)
    state = request.POST.get("state", "")
    if state not in Alert.State.values:
        return JsonResponse({"error": f"unknown state {state!r}"}, status=400)
    actions.triage_alert(alert, state)
    messages.success(request, f"Alert {alert.pk} marked {state}.")
    back = request.POST.get("next", "")
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("alerts")
    return redirect(back)


@require_POST
@maintainer_required
def triage_commit_alerts(request, pk: int):
    """Every open alert of one commit in one step: a change that was meant."""
    commit = get_object_or_404(Commit, pk=pk)
    state = request.POST.get("state", "")
    if state not in Alert.State.values:
        return JsonResponse({"error": f"unknown state {state!r}"}, status=400)
    changed = actions.triage_commit_alerts(commit, state)
    messages.success(
        request, f"{changed} open alert{'s' if changed != 1 else ''} of {commit.short_sha}"
        f" marked {state}."
    )
    back = request.POST.get("next", "")
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("home")
    return redirect(back)


@require_POST
@maintainer_required
def approve_run(request, pk: int):
    """A maintainer lets a pull request from outside run (its code runs sandboxed)."""
    run = get_object_or_404(Run, pk=pk)
    if actions.approve_run(run, by=request.user.get_username()):
        messages.success(request, f"Run {run.pk} approved: it is queued.")
    else:
        messages.info(request, f"Run {run.pk} was not waiting for approval.")
    return redirect(run.get_absolute_url())
