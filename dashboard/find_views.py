"""Pages to find things from: every repository with its open pull requests, and search."""

from __future__ import annotations

from django.db.models import Count
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard import search
from dashboard.models import Model, PullRequest, Repository

#: Open pull requests a repository lists at most (the API lists them all).
OPEN_PULL_REQUESTS = 50
#: Models a repository lists at most by name.
MODELS_LISTED = 100


@require_GET
def repositories_page(request):
    """Each repository with its newest run, its models, and its open pull requests with
    the status of each one's newest run."""
    repositories = list(
        Repository.objects.with_latest_run().annotate(model_count=Count("models")).order_by("name")
    )
    pulls = list(
        PullRequest.objects.open().filter(repository__in=repositories).with_latest_run()
        .order_by("repository_id", "-number")
    )
    models = Model.objects.filter(repository__in=repositories).values_list(
        "repository_id", "name"
    ).order_by("repository_id", "name")
    search.attach_latest_runs(repositories + pulls)
    by_repository = {repository.pk: repository for repository in repositories}
    for repository in repositories:
        repository.open_pulls, repository.open_count, repository.model_names = [], 0, []
    for pull in pulls:
        owner = by_repository[pull.repository_id]
        pull.repository = owner
        owner.open_count += 1
        if len(owner.open_pulls) < OPEN_PULL_REQUESTS:
            owner.open_pulls.append(pull)
    for repository_id, name in models:
        owner = by_repository[repository_id]
        if len(owner.model_names) < MODELS_LISTED:
            owner.model_names.append(name)
    for repository in repositories:
        repository.more_models = repository.model_count - len(repository.model_names)
    return render(request, "dashboard/repositories.html", {"repositories": repositories})


@require_GET
def search_page(request):
    """Models, commits and pull requests matching ``q``; the form alone without one."""
    found = search.search(request.GET.get("q", ""))
    return render(request, "dashboard/search.html", {
        "found": found, "limit": search.LIMIT, "max_query": search.MAX_QUERY,
        "max_words": search.MAX_WORDS,
    })
