"""A checkout is the tree its commit's ids describe, written from git's objects: no git
attribute changes it, nothing lands outside it, and a tree over a limit is refused by name
before anything is written, in little memory whatever its files' sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import gitrepo
from dashboard.demo import git
from tests.helpers import Repo

ROOT = Path(__file__).resolve().parents[2]
LOCAL = gitrepo.GitLimits(protocols=("file",))


def _mirror(repo: Repo, work: Path, limits: gitrepo.GitLimits = LOCAL) -> Path:
    return gitrepo.mirror(str(repo.path), work, limits)


def _blob_id(path: Path) -> str:
    return subprocess.run(
        ["git", "hash-object", "--no-filters", str(path)], capture_output=True, text=True,
        check=True,
    ).stdout.strip()


def test_export_attributes_and_eol_filters_do_not_change_the_checkout(empty_repo, tmp_path):
    # Given a tree whose .gitattributes would make `git archive` drop a folder, expand a
    # placeholder and turn line ends into CRLF
    empty_repo.write("model.py", "WIDTH = 16  # $Format:%H$\n")
    empty_repo.write("config/width.txt", "16\n")
    empty_repo.write("notes.txt", "line one\nline two\n")
    empty_repo.write(
        ".gitattributes",
        "config export-ignore\nconfig/** export-ignore\nmodel.py export-subst\n"
        "*.txt text eol=crlf\n",
    )
    sha = empty_repo.commit("Attributes that would change an archive")
    mirror = _mirror(empty_repo, tmp_path / "work")

    # When it is checked out
    tree = gitrepo.checkout(mirror, sha, tmp_path / "tree", LOCAL)

    # Then every file is there, byte for byte the blob its id names
    files = {path: entry for path, entry in gitrepo.tree_entries(mirror, sha).items()
             if entry.kind == "file"}
    assert set(files) == {".gitattributes", "model.py", "config/width.txt", "notes.txt"}
    for path, entry in files.items():
        assert _blob_id(tree / path) == entry.oid, path
    assert (tree / "model.py").read_text() == "WIDTH = 16  # $Format:%H$\n"
    assert (tree / "notes.txt").read_bytes() == b"line one\nline two\n"
    written = {str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()}
    assert written == set(files)


def test_it_keeps_the_executable_bit_links_inside_and_submodules_as_empty_folders(
    empty_repo, tmp_path
):
    empty_repo.write("run.sh", "#!/bin/sh\necho hi\n")
    (empty_repo.path / "run.sh").chmod(0o755)
    empty_repo.write("data/weights.txt", "1 2 3\n")
    (empty_repo.path / "weights").symlink_to("data/weights.txt")
    (empty_repo.path / "data" / "up").symlink_to("../run.sh")
    (empty_repo.path / "vendored").mkdir()  # an unpopulated submodule
    git(empty_repo.path, "update-index", "--add", "--cacheinfo", f"160000,{'ab' * 20},vendored")
    sha = empty_repo.commit("Links, an executable and a submodule")

    tree = gitrepo.checkout(_mirror(empty_repo, tmp_path / "work"), sha, tmp_path / "tree", LOCAL)

    assert (tree / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (tree / "data" / "weights.txt").stat().st_mode & 0o777 == 0o644
    assert (tree / "weights").readlink() == Path("data/weights.txt")
    assert (tree / "weights").read_text() == "1 2 3\n"
    assert (tree / "data" / "up").read_text().startswith("#!/bin/sh")
    assert (tree / "vendored").is_dir() and not any((tree / "vendored").iterdir())


@pytest.mark.parametrize(
    "links",
    [
        {"escape": "/etc/passwd"},
        {"escape": "../outside"},
        {"data/escape": "../../outside"},
        # Each alone stays inside; together the second resolves to the tree's parent.
        {"here": ".", "escape": "here/.."},
    ],
)
def test_a_link_pointing_out_of_the_tree_is_refused(empty_repo, tmp_path, links):
    empty_repo.write("data/x", "x\n")
    for name, target in links.items():
        (empty_repo.path / name).symlink_to(target)
    sha = empty_repo.commit("A link out")

    with pytest.raises(gitrepo.GitError, match="unsafe entry: the link .* points outside"):
        gitrepo.checkout(_mirror(empty_repo, tmp_path / "work"), sha, tmp_path / "tree", LOCAL)


@pytest.fixture
def three_files(empty_repo, tmp_path):
    for name, size in (("a.bin", 3000), ("b.bin", 3000), ("sub/c.bin", 1000)):
        empty_repo.write(name, "x" * size)
    sha = empty_repo.commit("Three files")
    return _mirror(empty_repo, tmp_path / "work"), sha


@pytest.mark.parametrize(
    "limit, message",
    [
        ({"CHECKOUT_FILES": 3},
         r"holds more than 3 files, links and folders, over the checkout's limit "
         r"\(PEAKWATCH_GIT_CHECKOUT_FILES=3\)"),
        ({"CHECKOUT_FILE_BYTES": 2999},
         r"holds a.bin of 2.9 KiB, over the checkout's limit of 2.9 KiB for one file "
         r"\(PEAKWATCH_GIT_CHECKOUT_FILE_BYTES=2999\)"),
        ({"CHECKOUT_BYTES": 6999},
         r"holds at least 6.8 KiB of files, over the checkout's limit of 6.8 KiB "
         r"\(PEAKWATCH_GIT_CHECKOUT_BYTES=6999\)"),
    ],
)
def test_a_tree_over_a_limit_is_refused_by_name_before_anything_is_written(
    settings, three_files, tmp_path, limit, message
):
    settings.PEAKWATCH = {
        **settings.PEAKWATCH, "GIT": {**settings.PEAKWATCH["GIT"], **limit}
    }
    mirror, sha = three_files

    with pytest.raises(gitrepo.GitError, match=message):
        gitrepo.checkout(mirror, sha, tmp_path / "tree")

    assert not (tmp_path / "tree").exists()
    # At each limit, it is written.
    settings.PEAKWATCH["GIT"] = {
        **settings.PEAKWATCH["GIT"], **{name: value + 1 for name, value in limit.items()}
    }
    assert gitrepo.checkout(mirror, sha, tmp_path / "tree").joinpath("sub/c.bin").is_file()


#: Checks a commit out in a process of its own, and prints its peak resident memory before
#: and after (VmHWM: the kernel's high-water mark, so nothing between samples is missed).
MEASURE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dashboard import gitrepo

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10

limits = gitrepo.GitLimits(protocols=("file",))
before = peak()
gitrepo.checkout(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), limits)
print(json.dumps({"before": before, "after": peak()}))
"""

LARGE = 200 << 20


@pytest.fixture(scope="module")
def large_file_mirror(tmp_path_factory):
    """A commit holding 200 MiB of zeros, which git stores in about a megabyte."""
    root = tmp_path_factory.mktemp("large")
    repo = Repo(root / "repo")
    repo.path.mkdir()
    git(repo.path, "init", "-q", "-b", "main")
    with (repo.path / "zeros.bin").open("wb") as out:
        out.truncate(LARGE)  # sparse: git hashes a file this size by streaming it
    sha = repo.commit("200 MiB of zeros")
    (repo.path / "zeros.bin").unlink()
    return _mirror(repo, root / "work"), sha


def test_a_large_file_is_streamed_to_disk_in_little_memory(large_file_mirror, tmp_path):
    mirror, sha = large_file_mirror

    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(ROOT), str(mirror), sha, str(tmp_path / "tree")],
        capture_output=True, text=True, timeout=120, check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    memory = json.loads(done.stdout)
    assert (tmp_path / "tree" / "zeros.bin").stat().st_size == LARGE
    # `git archive` into memory held the file twice over: 400 MiB here.
    assert memory["after"] - memory["before"] < 16 << 20, memory


def test_a_checkout_past_its_time_limit_ends_naming_the_setting(large_file_mirror, tmp_path):
    mirror, sha = large_file_mirror
    limits = gitrepo.GitLimits(protocols=("file",), seconds=0.05)

    with pytest.raises(
        gitrepo.GitError, match=r"took more than 0.05 s, its time limit \(PEAKWATCH_GIT_SECONDS"
    ):
        gitrepo.checkout(mirror, sha, tmp_path / "tree", limits)
