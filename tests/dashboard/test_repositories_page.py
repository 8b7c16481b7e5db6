"""The repositories page and its API: each repository with its newest run, its models and
its open pull requests with the status of each one's newest run."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import PullRequest, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def pull_requests(recorded_history):
    """#7 open with a finished run, #8 open with none yet, #6 merged."""
    repository = recorded_history[0].repository
    head = recorded_history[-1].commit
    opened = {}
    for number, title in ((6, "Merged long ago"), (7, "Widen the small CNN"),
                          (8, "Try a new planner")):
        opened[number] = actions.record_pull_request(
            repository, number=number, title=title, head_sha=head.sha, head_ref=f"pr-{number}",
            url=f"https://github.com/octo/models/pull/{number}",
        )
    Run.objects.create(
        repository=repository, commit=head, trigger="pull_request", pull_request=opened[7],
        status=Run.Status.QUEUED,
    )
    newest = Run.objects.create(
        repository=repository, commit=head, trigger="pull_request", pull_request=opened[7],
        status=Run.Status.PARTIAL, failed_results=2, progress_done=6,
    )
    actions.close_pull_request(repository, number=6, merged=True)
    return {"newest run of #7": newest, **opened}


def test_it_lists_each_repository_with_its_newest_run_and_models(client, recorded_history):
    other = actions.track_repository("empty-one", "/nonexistent/empty.git")

    page = client.get(reverse("repositories")).content.decode()

    assert page.index('data-repository="demo"') < page.index(f'data-repository="{other.name}"')
    newest = Run.objects.filter(repository__name="demo").order_by("-created_at", "-id").first()
    assert f'href="{newest.get_absolute_url()}">run {newest.pk}</a>' in page
    assert reverse("model-trend", args=["demo", "small-cnn"]) in page
    assert "none yet" in page  # the empty repository's latest run
    assert "No open pull requests." in page


def test_it_lists_open_pull_requests_with_their_newest_runs_status(client, pull_requests):
    page = client.get(reverse("repositories")).content.decode()

    assert 'data-pull-request="8"' in page and 'data-pull-request="7"' in page
    assert 'data-pull-request="6"' not in page  # merged
    assert page.index('data-pull-request="8"') < page.index('data-pull-request="7"')
    row = page[page.index('data-pull-request="7"'):]
    row = row[: row.index("</tr>")]
    assert "partial: 2 of 6 failed" in row
    assert pull_requests[7].get_absolute_url() in row
    assert "Widen the small CNN" in row
    assert "Open pull requests <span class=\"muted\">(2)</span>" in page


def test_the_api_lists_open_pull_requests_with_their_newest_run(client, pull_requests):
    body = client.get(reverse("api:pull-request-list"), {"repository": "demo"}).json()

    assert [pull["number"] for pull in body["results"]] == [8, 7]
    seven = body["results"][1]
    assert seven["state"] == "open"
    assert seven["latest_run"]["id"] == pull_requests["newest run of #7"].pk
    assert seven["latest_run"]["status_text"] == "partial: 2 of 6 failed"
    assert seven["page_url"] == pull_requests[7].get_absolute_url()
    assert body["results"][0]["latest_run"] is None


def test_the_api_lists_closed_ones_when_asked(client, pull_requests):
    closed = client.get(reverse("api:pull-request-list"), {"state": "closed"}).json()
    every = client.get(reverse("api:pull-request-list"), {"state": "all"}).json()
    bad = client.get(reverse("api:pull-request-list"), {"state": "draft"})

    assert [(pull["number"], pull["state"]) for pull in closed["results"]] == [(6, "merged")]
    assert every["count"] == 3
    assert bad.status_code == 400


def test_the_repositories_api_says_its_newest_run_and_open_pull_requests(
    client, pull_requests
):
    body = client.get(reverse("api:repository-list")).json()

    demo = body["results"][0]
    assert demo["open_pull_requests"] == 2
    assert demo["latest_run"]["id"] == pull_requests["newest run of #7"].pk
    assert demo["model_count"] == 2


def test_a_reopened_pull_request_is_open_again(client, pull_requests):
    repository = pull_requests[6].repository

    actions.record_pull_request(repository, number=6, title="Back", head_sha="a" * 40)

    assert PullRequest.objects.open().filter(number=6).exists()
    assert 'data-pull-request="6"' in client.get(reverse("repositories")).content.decode()


def test_the_page_is_reached_from_every_page_and_is_private_in_a_private_peakwatch(
    client, recorded_history, settings
):
    assert reverse("repositories") in client.get(reverse("home")).content.decode()

    settings.PEAKWATCH_PUBLIC = False

    assert client.get(reverse("repositories")).status_code == 302
    assert client.get(reverse("api:pull-request-list")).status_code == 401


def test_the_page_costs_a_fixed_number_of_queries(
    client, pull_requests, django_assert_num_queries
):
    # The repositories with their newest run; their open pull requests; their models;
    # the newest runs named.
    with django_assert_num_queries(4):
        assert client.get(reverse("repositories")).status_code == 200
