"""Compile-cache keys from what the compile really read, and names git has to quote.

A model's figures are reused when nothing it read changed, and compiled again when anything
it read, looked for or listed did: whatever the names (unicode, spaces, quotes, newlines),
however many other models share the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from dashboard import actions, gitrepo
from dashboard.models import Result, Run
from planner.checkout_reads import MAX_PATHS, CheckoutReads, InvalidReads, parse_reads
from tests.helpers import Repo
from workers import compile_cache
from workers.manifest import ModelEntry, Suite
from workers.sandbox import view

PROJECT = Path(__file__).resolve().parents[2]

#: Names git C-quotes in its line-based output: a non-ASCII byte, a space, a quote, a newline.
FOLDER = "módels"
MODEL_FILE = f'{FOLDER}/grow "q".py'
WIDTH_FILE = f"{FOLDER}/width\nof grow.txt"
UNREAD_FILE = f"{FOLDER}/notes ü \"unread\".txt"

#: A model whose hidden layer is as wide as a file of the repository says.
GROW = '''from pathlib import Path

from planner.tvm.zoo.mlp import mlp

WIDTH = Path(__file__).parent / "width\\nof grow.txt"


def build():
    return mlp(features=8, hidden=(int(WIDTH.read_text()),), classes=2)
'''


def _model(width: int) -> str:
    return f'''from planner.tvm.zoo.mlp import mlp


def build():
    return mlp(features=8, hidden=({width},), classes=2)
'''


def _manifest(models: dict[str, str]) -> str:
    lines = ['[suite]', 'strategies = ["tvm-stock"]', 'boards = ["cpu"]']
    for name, source in models.items():
        lines += ["", "[[models]]", f'name = "{name}"', f"source = {json.dumps(source)}"]
    return "\n".join(lines) + "\n"


def _run(repository, repo: Repo, sha: str) -> Run:
    info = gitrepo.commit_info(repo.path, sha)
    commit = actions.record_commit(
        repository, sha=info.sha, parent_sha=info.parent_sha, branch="main",
        author=info.author, message=info.message, committed_at=info.committed_at,
    )
    run = Run.objects.get(pk=actions.start_run(commit).pk)
    assert run.status == Run.Status.SUCCEEDED, (run.error, run.log)
    return run


def _result(run: Run, model: str) -> Result:
    return Result.objects.get(run=run, model__name=model)


def test_the_whole_tree_key_sees_every_name_git_can_store(empty_repo):
    # Given a file model whose folder and neighbours have names git quotes
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"grow": f"{MODEL_FILE}:build"}))
    repo.write(MODEL_FILE, GROW)
    repo.write(WIDTH_FILE, "16")
    repo.write(UNREAD_FILE, "first")
    shas = [repo.commit("Track a model in a folder with a unicode name")]
    entry = ModelEntry("grow", f"{MODEL_FILE}:build", {})
    suite = Suite((entry,), ("greedy-by-size",), ("cpu",))

    # When each of those files changes in turn
    for path, text in ((WIDTH_FILE, "4096"), (UNREAD_FILE, "second"), (MODEL_FILE, GROW + "\n")):
        repo.write(path, text)
        shas.append(repo.commit(f"Change {path!r}"))

    # Then every commit has a key of its own: no name drops out of the whole tree
    keys = [compile_cache.model_content_hash(entry, suite, repo.path, sha) for sha in shas]
    assert None not in keys
    assert len(set(keys)) == len(shas)
    assert gitrepo.blob_id(repo.path, shas[0], WIDTH_FILE) is not None
    assert FOLDER in gitrepo.top_level(repo.path, shas[0])


def test_the_read_key_follows_exactly_the_files_looked_at_and_the_folders_listed(empty_repo):
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"a": "models/a.py:build"}))
    repo.write("models/a.py", _model(4))
    repo.write("models/b.py", _model(8))
    base = repo.commit("Two models")
    entry = ModelEntry("a", "models/a.py:build", {})
    suite = Suite((entry,), ("greedy-by-size",), ("cpu",))
    # What a's import did: read its file, looked for a config that is not there, listed
    # the root (the import system does, the checkout is on sys.path).
    reads = CheckoutReads(files=("models/a.py", "models/a.toml"), folders=(".",))

    def key(sha: str) -> str:
        return compile_cache.reads_content_hash(entry, suite, reads, repo.path, sha)

    repo.write("models/b.py", _model(16))
    other_model = repo.commit("Widen b")
    repo.write("models/a.toml", "width = 2\n")
    looked_for = repo.commit("Add the config a looks for")
    repo.write("extra.py", "X = 1\n")
    in_listed_folder = repo.commit("A module next to the manifest")

    assert key(other_model) == key(base)
    assert key(looked_for) != key(other_model)
    assert key(in_listed_folder) != key(looked_for)


def _record(tree: Path, script: str, tmp_path: Path) -> dict:
    """Run ``script`` in a fresh Python, as another user would, in the view of ``tree``
    the worker serves; what the view saw it look at."""
    with view.CheckoutView(tree, tmp_path / "view") as served:
        subprocess.run(
            [sys.executable, "-c", script], cwd=served.mountpoint, check=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(PROJECT), "PYTHONDONTWRITEBYTECODE": "1"},
        )
    return served.record()


needs_view = pytest.mark.skipif(
    bool(view.unavailable()), reason=f"no FUSE view here: {view.unavailable()}"
)


@needs_view
def test_the_view_records_what_any_reader_opened_probed_and_listed(tmp_path):
    tree = tmp_path / "tree"
    (tree / FOLDER).mkdir(parents=True)
    (tree / WIDTH_FILE).write_text("16")
    (tree / "helper_mod.py").write_text("VALUE = 1\n")
    (tree / "data").mkdir()
    (tree / "data" / "big.bin").write_bytes(b"0" * 10)
    (tree / "link").symlink_to("data")
    for name in ("native.txt", "shell.txt", "dirfd.txt", "spawned.txt", "sqlite.db"):
        (tree / name).write_text("1")

    record = _record(tree, "\n".join([
        "import ctypes, multiprocessing, os, sqlite3, subprocess, sys",
        "sys.path.insert(0, '.')",
        "import helper_mod",
        f"open({WIDTH_FILE!r}).read()",
        "os.path.exists('missing.cfg')",
        "os.listdir('link')",
        # Sizes through a listing's entries, no file opened.
        "[entry.stat().st_size for entry in os.scandir('data')]",
        # libc's own fopen, a program started by its absolute path, a folder's descriptor.
        "libc = ctypes.CDLL(None)",
        "libc.fopen.restype = ctypes.c_void_p",
        "libc.fclose(ctypes.c_void_p(libc.fopen(b'native.txt', b'r')))",
        "subprocess.run(['/bin/sh', '-c', 'cat shell.txt > /dev/null'], check=True)",
        "folder = os.open('.', os.O_RDONLY)",
        "os.close(os.open('dirfd.txt', os.O_RDONLY, dir_fd=folder))",
        "sqlite3.connect('file:sqlite.db?mode=ro', uri=True).close()",
        "ctx = multiprocessing.get_context('spawn')",
        "child = ctx.Process(target=open, args=('spawned.txt',))",
        "child.start(); child.join()",
        "open('/etc/hostname').close()",
    ]), tmp_path)

    assert {WIDTH_FILE, "helper_mod.py", "missing.cfg", "data/big.bin", "native.txt",
            "shell.txt", "dirfd.txt", "sqlite.db", "spawned.txt"} <= set(record["files"])
    # Through a link: the link and where it leads.
    assert {"link", "data"} <= set(record["files"]) and "data" in record["folders"]
    # Files outside the checkout are the environment's, keyed by its packages instead.
    assert not any(path.startswith("/") or ".." in path for path in record["files"])


@needs_view
def test_a_job_cannot_write_to_its_view_or_its_record(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "model.py").write_text("X = 1\n")

    with view.CheckoutView(tree, tmp_path / "view") as served:
        for attempt in (lambda: (served.mountpoint / "model.py").write_text("X = 2\n"),
                        lambda: (served.mountpoint / "new.py").write_text(""),
                        lambda: (served.mountpoint / "model.py").unlink()):
            with pytest.raises(OSError):
                attempt()
    assert (tree / "model.py").read_text() == "X = 1\n"
    assert not (tree / "new.py").exists()
    # The record is the serving process's, written after the view is gone.
    assert "model.py" in served.record()["files"]


@pytest.mark.parametrize("record, why", [
    ({"files": ["../outside"]}, "not a normal relative path"),
    ({"files": ["/etc/passwd"]}, "absolute"),
    ({"folders": ["a//b"]}, "not a normal relative path"),
    ({"files": [7]}, "not a text"),
    ({"files": ["a"] * (MAX_PATHS + 1)}, "more than"),
    ({"files": [], "key": "forged"}, "unknown fields"),
])
def test_a_record_that_breaks_the_format_is_refused(record, why):
    # Records are read back from stored Results: checked again, as anything read back is.
    with pytest.raises(InvalidReads, match=why):
        parse_reads(record)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_changed_file_with_a_quoted_name_is_compiled_again_and_an_unread_one_is_not(
    empty_repo,
):
    # Given a model under módels/ whose width is read from a file named with a newline
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"grow": f"{MODEL_FILE}:build"}))
    repo.write(MODEL_FILE, GROW)
    repo.write(WIDTH_FILE, "16")
    repo.write(UNREAD_FILE, "first")
    small = repo.commit("Track a model in a folder with a unicode name")
    repository = actions.track_repository("quoted", str(repo.path))
    first = _result(_run(repository, repo, small), "grow")

    # When the file it reads grows the model
    repo.write(WIDTH_FILE, "4096")
    large = repo.commit("Widen the model")
    second_run = _run(repository, repo, large)
    second = _result(second_run, "grow")

    # Then it was compiled again, and its figure is the new one
    assert not second.is_reused, second_run.log
    assert second.planned_bytes > first.planned_bytes
    assert WIDTH_FILE in second.reads["files"]

    # When only a file it never read changes
    repo.write(UNREAD_FILE, "second")
    docs = repo.commit("Change a file the model never reads")
    third_run = _run(repository, repo, docs)
    third = _result(third_run, "grow")

    # Then the widened figures are reused, not the first commit's
    assert third.reused_from == second, third_run.log
    assert third.planned_bytes == second.planned_bytes


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_changing_one_models_file_compiles_only_that_model(empty_repo):
    # Given two models in one repository
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"a": "models/a.py:build", "b": "models/b.py:build"}))
    repo.write("models/a.py", _model(16))
    repo.write("models/b.py", _model(16))
    first_sha = repo.commit("Two models")
    repository = actions.track_repository("two", str(repo.path))
    first = _run(repository, repo, first_sha)

    # When only b's file changes
    repo.write("models/b.py", _model(512))
    second = _run(repository, repo, repo.commit("Widen b"))

    # Then b was compiled again with its new figure, and a's figures were reused
    a, b = _result(second, "a"), _result(second, "b")
    assert a.reused_from == _result(first, "a"), second.log
    assert not b.is_reused
    assert b.planned_bytes > _result(first, "b").planned_bytes


#: Ways honest code reads its configuration that a record kept by the job's own process
#: missed: each read width.txt, and a commit that changed only it was shown "unchanged".
READERS = {
    "a program by its absolute path": (
        "import shutil, subprocess\n"
        "def width():\n"
        "    cat = shutil.which('cat')\n"
        "    return int(subprocess.run([cat, 'config/width.txt'], capture_output=True,"
        " check=True).stdout)\n"
    ),
    "libc through ctypes": (
        "import ctypes\n"
        "def width():\n"
        "    libc = ctypes.CDLL(None)\n"
        "    libc.fopen.restype = ctypes.c_void_p\n"
        "    handle = ctypes.c_void_p(libc.fopen(b'config/width.txt', b'r'))\n"
        "    buffer = ctypes.create_string_buffer(32)\n"
        "    libc.fgets(buffer, 32, handle)\n"
        "    libc.fclose(handle)\n"
        "    return int(buffer.value)\n"
    ),
    "a folder's descriptor": (
        "import os\n"
        "def width():\n"
        "    folder = os.open('config', os.O_RDONLY)\n"
        "    handle = os.open('width.txt', os.O_RDONLY, dir_fd=folder)\n"
        "    return int(os.read(handle, 32))\n"
    ),
    "a spawned child": (
        "import multiprocessing\n"
        "def _read(queue):\n"
        "    queue.put(int(open('config/width.txt').read()))\n"
        "def width():\n"
        "    ctx = multiprocessing.get_context('spawn')\n"
        "    queue = ctx.Queue()\n"
        "    child = ctx.Process(target=_read, args=(queue,))\n"
        "    child.start()\n"
        "    value = queue.get(timeout=60)\n"
        "    child.join()\n"
        "    return value\n"
    ),
    "a listing's sizes": (
        "import os\n"
        "def width():\n"
        "    return next(e.stat().st_size for e in os.scandir('config') if e.name == 'width.txt')\n"
    ),
}


@needs_view
@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_config_read_any_way_is_never_reused_once_it_changes(empty_repo, reader):
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"net": "models/net.py:build"}))
    repo.write("models/reader.py", READERS[reader])
    repo.write("models/net.py", (
        "import sys\nsys.path.insert(0, 'models')\n"
        "from reader import width\nfrom planner.tvm.zoo.mlp import mlp\n\n\n"
        "def build():\n    return mlp(features=8, hidden=(width(),), classes=2)\n"
    ))
    # A size and a number at once: the scandir reader takes the size.
    repo.write("config/width.txt", "16" + " " * 14)
    repository = actions.track_repository("configured", str(repo.path))
    first = _result(_run(repository, repo, repo.commit("Width 16")), "net")
    assert first.reads.get("observed_by"), first.reads
    assert "config/width.txt" in first.reads["files"]
    answer = Client().get(f"/api/results/{first.pk}/").json()
    assert (answer["cache_key"], answer["cache_key_reason"]) == ("read", "")

    repo.write("config/width.txt", "64" + " " * 62)
    second_run = _run(repository, repo, repo.commit("Width 64, in the config alone"))
    second = _result(second_run, "net")

    assert not second.is_reused, second_run.log
    assert second.planned_bytes > first.planned_bytes


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_without_a_view_a_result_is_keyed_by_the_whole_tree_and_says_why(
    empty_repo, monkeypatch
):
    # A host without FUSE (a container without /dev/fuse): nothing observes the reads.
    monkeypatch.setattr(view, "unavailable", lambda: "the kernel offers no FUSE")
    repo = empty_repo
    repo.write("peakwatch.toml", _manifest({"a": "models/a.py:build"}))
    repo.write("models/a.py", _model(16))
    repo.write("README.md", "first\n")
    repository = actions.track_repository("no-view", str(repo.path))
    first = _result(_run(repository, repo, repo.commit("A model")), "a")

    answer = Client().get(f"/api/results/{first.pk}/").json()
    assert answer["cache_key"] == "whole tree"
    assert answer["cache_key_reason"] == "no view of the checkout here: the kernel offers no FUSE"

    # A file the model never reads changes: the whole tree did, so it compiles again.
    repo.write("README.md", "second\n")
    second_run = _run(repository, repo, repo.commit("Change the readme"))
    assert not _result(second_run, "a").is_reused, second_run.log
