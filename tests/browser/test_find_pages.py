"""Finding things in a real browser: the search box every page has, the repositories page
with its open pull requests, and a series exported from the model page."""

from __future__ import annotations

import csv
import io

import pytest

from dashboard import actions
from dashboard.models import Run

pytestmark = pytest.mark.browser


@pytest.fixture
def pull_request(recorded_history):
    repository = recorded_history[0].repository
    base, head = recorded_history[0].commit, recorded_history[-1].commit
    pull = actions.record_pull_request(
        repository, number=7, title="Widen the small CNN", head_sha=head.sha,
        base_sha=base.sha, head_ref="widen",
    )
    Run.objects.filter(pk=recorded_history[-1].pk).update(pull_request=pull)
    return pull


def test_the_search_box_of_a_page_finds_a_commit_by_its_sha_prefix(
    page, live_server, recorded_history, screenshot_dir
):
    # Given the overview
    page.goto(f"{live_server.url}/")

    # When a SHA prefix is typed into the header's search box and sent
    box = page.get_by_role("searchbox", name="Search models, commits and pull requests")
    box.fill("01aaa")
    with page.expect_navigation():
        box.press("Enter")

    # Then the search page lists that commit, and its link opens the commit's run
    assert page.url.startswith(f"{live_server.url}/search/?q=01aaa")
    commits = page.locator("[data-found='commits'] tbody tr")
    assert commits.count() == 1
    assert "Commit number 1" in commits.inner_text()
    page.screenshot(path=str(screenshot_dir / "search-page.png"), full_page=True)
    with page.expect_navigation():
        commits.get_by_role("link").first.click()
    assert page.url == f"{live_server.url}{recorded_history[1].get_absolute_url()}"
    assert page.problems == []


def test_the_search_box_finds_a_model_and_a_pull_request(page, live_server, pull_request):
    page.goto(f"{live_server.url}/boards/")
    box = page.get_by_role("searchbox", name="Search models, commits and pull requests")

    box.fill("small")
    with page.expect_navigation():
        box.press("Enter")
    with page.expect_navigation():
        page.locator("[data-found='models']").get_by_role("link", name="small-cnn").click()
    assert page.url == f"{live_server.url}/repos/demo/models/small-cnn/"

    box = page.get_by_role("searchbox", name="Search models, commits and pull requests")
    box.fill("#7")
    with page.expect_navigation():
        box.press("Enter")
    row = page.locator("[data-found='pull-requests'] tr[data-pull-request='7']")
    assert "Widen the small CNN" in row.inner_text()
    assert page.problems == []


def test_the_repositories_page_lists_open_pull_requests_with_their_status(
    page, live_server, pull_request, screenshot_dir
):
    # Given the overview, the repositories page is one click away
    page.goto(f"{live_server.url}/")
    with page.expect_navigation():
        page.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Repositories"
        ).click()

    row = page.locator("[data-repository='demo'] tr[data-pull-request='7']")
    assert row.count() == 1
    assert "succeeded" in row.inner_text()
    page.screenshot(path=str(screenshot_dir / "repositories-page.png"), full_page=True)

    # And the pull request's link opens its comparison
    with page.expect_navigation():
        row.get_by_role("link", name="#7").click()
    assert page.url == f"{live_server.url}{pull_request.get_absolute_url()}"
    assert page.problems == []


def test_a_line_of_the_model_page_downloads_as_csv_and_reads_as_json(
    page, live_server, recorded_history
):
    page.goto(f"{live_server.url}/repos/demo/models/small-cnn/")
    row = page.locator("table.latest tbody tr").filter(has_text="none").first

    with page.expect_download() as download:
        row.get_by_role("link", name="CSV").click()

    assert download.value.suggested_filename == "small-cnn-none-cpu.csv"
    rows = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert [r["commit_sha"] for r in rows] == [run.commit.sha for run in recorded_history]
    json_url = row.get_by_role("link", name="JSON").get_attribute("href")
    body = page.request.get(f"{live_server.url}{json_url}", headers={
        "Accept": "application/json"
    }).json()
    assert [r["planned_bytes"] for r in body["rows"]] == [
        int(r["planned_bytes"]) for r in rows
    ]
    assert page.problems == []
