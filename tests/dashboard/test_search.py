"""Search, from the box on every page and the API: a model by name, a commit by SHA prefix
or message words, a pull request by number or title; bounded, and never a 500."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard import actions, search
from dashboard.models import Model

pytestmark = pytest.mark.django_db


@pytest.fixture
def pull_request(recorded_history):
    repository = recorded_history[0].repository
    return actions.record_pull_request(
        repository, number=42, title="Fuse the residual block", head_ref="fuse-residual",
        head_sha="f00d" + "0" * 36,
    )


def found(client, q: str) -> dict:
    response = client.get(reverse("api:search"), {"q": q})
    assert response.status_code == 200
    return response.json()


def test_it_finds_a_model_by_name_the_exact_one_first(client, recorded_history):
    body = found(client, "small-cnn")
    partial = found(client, "CNN")

    assert [model["name"] for model in body["models"]["items"]] == ["small-cnn"]
    assert body["models"]["items"][0]["page_url"] == "/repos/demo/models/small-cnn/"
    assert [model["name"] for model in partial["models"]["items"]] == [
        "residual-cnn", "small-cnn"
    ]


def test_it_finds_a_commit_by_a_sha_prefix_of_four_hex_digits_or_more(
    client, recorded_history
):
    second = recorded_history[1]

    body = found(client, "01AAA")
    short = found(client, "01a")

    assert [commit["sha"] for commit in body["commits"]["items"]] == [second.commit.sha]
    assert body["commits"]["items"][0]["latest_run"]["id"] == second.pk
    assert body["commits"]["items"][0]["title"] == "Commit number 1"
    assert short["commits"]["items"] == []


def test_it_finds_commits_by_words_of_their_message_newest_first(client, recorded_history):
    body = found(client, "number commit")

    assert [commit["sha"] for commit in body["commits"]["items"]] == [
        run.commit.sha for run in reversed(recorded_history)
    ]


@pytest.mark.parametrize("q", ["42", "#42", "residual block", "fuse-resid", "f00d0"])
def test_it_finds_a_pull_request_by_number_title_branch_or_head(client, pull_request, q):
    body = found(client, q)

    assert [pull["number"] for pull in body["pull_requests"]["items"]] == [42]
    assert body["pull_requests"]["items"][0]["page_url"] == pull_request.get_absolute_url()


def test_each_kind_is_bounded_and_says_there_is_more(client, recorded_history):
    repository = recorded_history[0].repository
    start = recorded_history[-1].commit.committed_at
    for i in range(search.LIMIT + 5):
        actions.record_commit(
            repository, sha=f"{i:04x}" + "c" * 36, message=f"Tune kernel {i}",
            committed_at=start + timedelta(minutes=i + 1),
        )
    for i in range(search.LIMIT + 2):
        Model.objects.create(repository=repository, name=f"tuned-{i}")

    body = found(client, "tune")

    assert len(body["commits"]["items"]) == search.LIMIT and body["commits"]["more"]
    assert body["commits"]["items"][0]["title"] == f"Tune kernel {search.LIMIT + 4}"
    assert len(body["models"]["items"]) == search.LIMIT and body["models"]["more"]


@pytest.mark.parametrize("q", [
    "", "   ", "%", "_", "\\", "'; DROP TABLE dashboard_commit; --", "a" * 10_000,
    "word " * 2_000, "\u202e\u200b\t\r\n", "😀 résumé", "\ufffd", "#", "#99999999999999",
    "0" * 64, "0" * 65,
])
def test_no_query_is_an_error(client, recorded_history, pull_request, q):
    api = client.get(reverse("api:search"), {"q": q})
    page = client.get(reverse("search"), {"q": q})

    assert api.status_code == 200
    assert page.status_code == 200
    assert len(api.json()["query"]) <= search.MAX_QUERY


def test_a_long_query_is_cut_and_says_so(client, recorded_history):
    body = found(client, "small " * 50)

    assert body["truncated"] is True
    assert [model["name"] for model in body["models"]["items"]] == ["small-cnn"]
    assert "The query was cut" in client.get(
        reverse("search"), {"q": "small " * 50}
    ).content.decode()


def test_a_nul_byte_is_refused_not_a_server_error(client, recorded_history):
    assert client.get(reverse("search"), {"q": "a\x00b"}).status_code == 400
    assert client.get(reverse("api:search"), {"q": "a\x00b"}).status_code == 400


def test_the_page_groups_models_commits_and_pull_requests(client, pull_request):
    page = client.get(reverse("search"), {"q": "residual"}).content.decode()

    models = page[page.index('data-found="models"'):page.index('data-found="commits"')]
    pulls = page[page.index('data-found="pull-requests"'):]
    assert reverse("model-trend", args=["demo", "residual-cnn"]) in models
    assert pull_request.get_absolute_url() in pulls
    assert "No commit matches." in page
    assert 'value="residual"' in page


def test_nothing_found_says_so(client, recorded_history):
    page = client.get(reverse("search"), {"q": "no-such-thing"}).content.decode()

    assert "data-nothing-found" in page


def test_every_page_has_the_search_box(client, recorded_history):
    model = Model.objects.get(name="small-cnn")
    for url in (reverse("home"), model.get_absolute_url(), reverse("boards"),
                reverse("alerts"), recorded_history[0].get_absolute_url(),
                reverse("repositories"), reverse("search")):
        page = client.get(url).content.decode()
        assert f'<form class="site-search" method="get" action="{reverse("search")}"' in page, url


def test_search_is_private_in_a_private_peakwatch(client, recorded_history, settings):
    settings.PEAKWATCH_PUBLIC = False

    assert client.get(reverse("search"), {"q": "small"}).status_code == 302
    assert client.get(reverse("api:search"), {"q": "small"}).status_code == 401
