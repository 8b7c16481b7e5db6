"""A commit message is anyone's text: Peakwatch reads its start, keeps its first lines, and
says where it cut it.

A 64 MiB message was read, stored and served whole on every run page and API answer (67 MB
each).
"""

from __future__ import annotations

import pytest

from dashboard.actions.runs import MESSAGE_CHARACTERS, MESSAGE_LINES
from dashboard.demo import git
from dashboard.models import Run
from tests.helpers import record_head

pytestmark = pytest.mark.django_db


def _commit_with_body(repo, body: str):
    repo.write("README.md", "hello\n")
    (repo.path / "message.txt").write_text("Add a readme\n\n" + body + "\n")
    git(repo.path, "add", "README.md")
    git(repo.path, "commit", "-q", "-F", "message.txt")
    return record_head(repo.path, "tracked")


@pytest.mark.parametrize(
    ("line", "count", "read_whole"),
    [
        ("x" * 1000, 4_000, False),  # 4 MB of long lines: only its start is read
        ("y", 300_000, False),  # 2 MB of short ones
        ("z" * 99, 1_000, True),  # 100 kB: read whole, kept in part
    ],
)
def test_a_huge_commit_message_is_kept_cut_and_pages_stay_small(
    empty_repo, client, settings, line, count, read_whole
):
    body = "\n".join(f"{i} {line}" for i in range(count))
    commit = _commit_with_body(empty_repo, body)

    assert commit.title == "Add a readme"
    kept = commit.message
    assert len(kept) < MESSAGE_CHARACTERS + 600
    assert len(kept.splitlines()) <= MESSAGE_LINES + 4
    assert kept.startswith("Add a readme\n\n0 ")
    assert "[cut by Peakwatch: of the message's" in kept
    read_in_part = settings.PEAKWATCH["GIT"]["MESSAGE_BYTES"]
    if read_whole:
        whole = len("Add a readme\n\n" + body)  # git drops the last newline
        assert f"of the message's {whole:,} characters in {count + 2:,} lines," in kept
        assert "read in part" not in kept
    else:
        assert f"of which the first {read_in_part:,} were read" in kept

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
