"""Git failures say what was looked for, not an empty ``git rev-parse ... failed:``."""

from __future__ import annotations

import pytest

from dashboard import gitrepo


def test_an_unknown_branch_or_revision_says_what_was_not_found(empty_repo):
    empty_repo.write("README", "docs\n")
    sha = empty_repo.commit("First")

    assert gitrepo.resolve(empty_repo.path, "refs/heads/main") == sha
    with pytest.raises(gitrepo.GitError, match="'nope' names no branch in the repository"):
        gitrepo.resolve(empty_repo.path, "refs/heads/nope")
    with pytest.raises(gitrepo.GitError, match="'v9' names no branch, tag or commit"):
        gitrepo.resolve(empty_repo.path, "v9")
