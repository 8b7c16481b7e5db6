"""A commit message is anyone's text: Peakwatch keeps its first lines, and says it cut it.

A 64 MiB message was stored whole and served on every run page and API answer (67 MB each).
"""

from __future__ import annotations

import pytest

from dashboard.actions.runs import MESSAGE_CHARACTERS, MESSAGE_LINES
from dashboard.demo import git
from dashboard.models import Run
from tests.helpers import record_head

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("line", "count"),
    [("x" * 1000, 4_000), ("y", 300_000)],  # long lines; many short ones
)
def test_a_huge_commit_message_is_kept_cut_and_pages_stay_small(
    empty_repo, client, line, count
):
    body = "\n".join(f"{i} {line}" for i in range(count))
    empty_repo.write("README.md", "hello\n")
    (empty_repo.path / "message.txt").write_text("Add a readme\n\n" + body + "\n")
    git(empty_repo.path, "add", "README.md")
    git(empty_repo.path, "commit", "-q", "-F", "message.txt")
    commit = record_head(empty_repo.path, "tracked")

    assert commit.title == "Add a readme"
    kept = commit.message
    assert len(kept) < MESSAGE_CHARACTERS + 300
    assert len(kept.splitlines()) <= MESSAGE_LINES + 2
    assert kept.startswith("Add a readme\n\n0 ")
    whole = len("Add a readme\n\n" + body)  # git drops the last newline
    assert f"the message has {whole:,} characters" in kept

    run = Run.objects.create(repository=commit.repository, commit=commit, trigger="test")
    page = client.get(run.get_absolute_url())
    assert page.status_code == 200
    assert len(page.content) < 200_000
    assert b"cut by Peakwatch" in page.content
    answer = client.get(f"/api/runs/{run.pk}/")
    assert answer.status_code == 200 and len(answer.content) < 100_000


def test_a_short_message_is_kept_as_it_is(empty_repo):
    empty_repo.write("README.md", "hello\n")
    empty_repo.commit("Add a readme\n\nWith a body of two lines,\nboth kept.")
    commit = record_head(empty_repo.path, "tracked")
    assert commit.message.strip() == "Add a readme\n\nWith a body of two lines,\nboth kept."
