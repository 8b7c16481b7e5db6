"""The compile cache: an unchanged model is not compiled again; its figures are reused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dashboard import actions, gitrepo
from dashboard.demo import commit_file, create_demo_repository
from dashboard.models import Alert, Result, Run
from workers import compile_cache
from workers.manifest import ModelEntry, Suite

SMALL = {"channels": 4, "resolution": 16, "depth": 2}
RESIDUAL = {"channels": 4, "resolution": 16, "blocks": 1}
COMMITS = [
    ("Track two tiny models", {"small-cnn": SMALL, "residual-cnn": RESIDUAL}),
    ("Widen the small CNN", {"small-cnn": {**SMALL, "channels": 8}, "residual-cnn": RESIDUAL}),
]

ONE_MODEL = [("Track a tiny model", {"small-cnn": SMALL})]


def test_the_key_follows_the_repository_model_content_strategy_tvm_and_target():
    entry = ModelEntry("small-cnn", "zoo:small_cnn", SMALL)
    content = compile_cache.model_content_hash(entry)
    same = compile_cache.model_content_hash(ModelEntry("renamed", "zoo:small_cnn", dict(SMALL)))
    wider = compile_cache.model_content_hash(
        ModelEntry("small-cnn", "zoo:small_cnn", {**SMALL, "channels": 8})
    )

    key = compile_cache.cache_key(content, "greedy-by-size", "0.27", "llvm", repository=1)

    assert content == same != wider
    # The form of its mixtures of experts is another compile of the same files.
    grouped = compile_cache.model_content_hash(
        ModelEntry("small-cnn", "zoo:small_cnn", dict(SMALL), moe="grouped")
    )
    assert grouped != content
    assert key != compile_cache.cache_key(content, "none", "0.27", "llvm", repository=1)
    assert key != compile_cache.cache_key(content, "greedy-by-size", "0.28", "llvm", repository=1)
    assert key != compile_cache.cache_key(content, "greedy-by-size", "0.27", "cuda", repository=1)
    assert key != compile_cache.cache_key(content, "greedy-by-size", "0.27", "llvm", repository=2)
    assert key != compile_cache.cache_key(
        content, "greedy-by-size", "0.27", "llvm", "apache-tvm==0.27|abc", repository=1
    )


def test_a_file_source_is_hashed_by_the_whole_tree_whatever_inputs_are_listed(tmp_path):
    repo = tmp_path / "repo"
    create_demo_repository(repo, COMMITS[:1])
    (repo / "compile").mkdir()
    when = datetime.now(UTC)
    shas = [
        commit_file(repo, "net.py", "from helpers import W\ndef build():\n    return W\n",
                    "Add net", when),
        commit_file(repo, "net.py", "from helpers import W\ndef build():\n    return 2\n",
                    "Change net", when),
        # Files the compile reads besides the model's: a module it imports, the pipeline.
        commit_file(repo, "helpers.py", "W = 3\n", "Change what net imports", when),
        commit_file(repo, "compile/pipeline.py", "def passes(t):\n    return []\n",
                    "Change the pipeline", when),
        commit_file(repo, "README", "docs\n", "Only docs", when),
    ]
    entry = ModelEntry("m", "net.py:build", {})
    whole_tree = Suite((entry,), ("none",), ("cpu",), pipeline="compile/pipeline.py:passes")
    only_net = Suite((entry,), ("none",), ("cpu",), pipeline="compile/pipeline.py:passes",
                     inputs=("net.py",))

    by_tree = [compile_cache.model_content_hash(entry, whole_tree, repo, sha) for sha in shas]
    by_inputs = [compile_cache.model_content_hash(entry, only_net, repo, sha) for sha in shas]

    assert None not in by_tree
    # The sandbox hands the compile the whole tree: every change may change what it
    # builds, and inputs listed by the repository cannot say otherwise.
    assert len(set(by_tree)) == len(shas)
    assert by_inputs == by_tree
    # Without the repository, a file model's content is unknown: no caching.
    assert compile_cache.model_content_hash(entry, whole_tree) is None


def test_another_models_manifest_entry_leaves_a_model_cached(tmp_path):
    repo = tmp_path / "repo"
    create_demo_repository(repo, COMMITS[:1])
    when = datetime.now(UTC)
    first = commit_file(repo, "net.py", "def build():\n    return 1\n", "Add net", when)
    manifest = (repo / "peakwatch.toml").read_text()
    second = commit_file(
        repo, "peakwatch.toml", manifest + "\n# another model's params changed\n", "Tune", when
    )
    entry = ModelEntry("m", "net.py:build", {})
    whole_tree = Suite((entry,), ("none",), ("cpu",))

    before, after = (
        compile_cache.model_content_hash(entry, whole_tree, repo, sha) for sha in (first, second)
    )

    assert before is not None and before == after


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_an_unchanged_model_is_reused_and_a_changed_one_compiled(tmp_path):
    path = tmp_path / "repo"
    create_demo_repository(path, COMMITS, strategies=("tvm-stock", "greedy-by-size"))
    repository = actions.track_repository("tiny", str(path))
    runs = []
    for info in gitrepo.history(path, "main"):
        commit = actions.record_commit(
            repository, sha=info.sha, parent_sha=info.parent_sha, branch="main",
            author=info.author, message=info.message, committed_at=info.committed_at,
        )
        runs.append(actions.start_run(commit))
    first, second = (Run.objects.get(pk=run.pk) for run in runs)

    assert first.status == second.status == Run.Status.SUCCEEDED, second.error
    assert second.progress_done == 4
    reused = Result.objects.filter(run=second, model__name="residual-cnn")
    assert reused.count() == 2
    for result in reused:
        original = Result.objects.get(run=first, model__name="residual-cnn",
                                      strategy=result.strategy)
        assert result.reused_from == original and result.is_reused
        assert result.planned_bytes == original.planned_bytes
        assert result.details["reused_from"] == original.pk
        # The artifacts are the original's files, not copies.
        assert {a.file.name for a in result.artifacts.all()} == {
            a.file.name for a in original.artifacts.all()}
    compiled = Result.objects.filter(run=second, model__name="small-cnn")
    assert not any(r.is_reused for r in compiled)
    assert "unchanged, reused" in second.log
    # The widened model planned more bytes: detection raised the alerts.
    assert set(Alert.objects.values_list("model__name", "kind")) == {("small-cnn", "bytes")}


def _record_head(repository, path):
    info = gitrepo.history(path, "main")[-1]
    return actions.record_commit(
        repository, sha=info.sha, parent_sha=info.parent_sha, branch="main",
        author=info.author, message=info.message, committed_at=info.committed_at,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_repositories_with_identical_models_never_share_cached_results(tmp_path):
    # Given two repositories whose manifests and files are the same (one model: the cache
    # is keyed by model, and each model's compile would only repeat the point)
    repositories = []
    for name in ("ours", "theirs"):
        create_demo_repository(tmp_path / name, ONE_MODEL, strategies=("tvm-stock",))
        repositories.append(actions.track_repository(name, str(tmp_path / name)))
    ours, theirs = repositories

    # When both run (ours first, so its results are in the cache)
    first = actions.start_run(_record_head(ours, tmp_path / "ours"))
    second = actions.start_run(_record_head(theirs, tmp_path / "theirs"))

    # Then theirs compiled everything itself: nothing was copied from ours
    first, second = (Run.objects.get(pk=run.pk) for run in (first, second))
    assert first.status == second.status == Run.Status.SUCCEEDED, second.error
    results = Result.objects.filter(run=second)
    assert results.count() == 1
    assert not any(result.is_reused for result in results)
    assert "unchanged, reused" not in second.log
    for result in results:
        original = Result.objects.get(run=first, model__name=result.model.name)
        assert result.cache_key and result.cache_key != original.cache_key
        assert list(Result.objects.cached(result.cache_key, "cpu", theirs)) == [result]
        assert not Result.objects.cached(original.cache_key, "cpu", theirs).exists()


def _installed(folder, name: str, version: str, record: str) -> None:
    """A distribution as pip leaves it in a package folder: its metadata and RECORD."""
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(record)


def test_the_environment_key_follows_every_installed_package_and_its_build(tmp_path):
    base, upgraded, rebuilt = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, version, record in (
        (base, "2.13.0", "torch/lib.so,sha256=AAA,10\n"),
        (upgraded, "2.14.0", "torch/lib.so,sha256=AAA,10\n"),
        # The same version built again: its files' hashes differ.
        (rebuilt, "2.13.0", "torch/lib.so,sha256=BBB,10\n"),
    ):
        _installed(folder, "torch", version, record)
        _installed(folder, "numpy", "2.1.0", "numpy/core.so,sha256=CCC,5\n")
    keys = [compile_cache.environment_fingerprint((str(f),)) for f in (base, upgraded, rebuilt)]
    assert len(set(keys)) == 3
    assert keys[0] == compile_cache.environment_fingerprint((str(base),))
    # Another package beside them changes it too.
    _installed(base, "safetensors", "0.4.0", "")
    compile_cache.environment_fingerprint.cache_clear()
    assert compile_cache.environment_fingerprint((str(base),)) != keys[0]

    # The worker's own environment is its package folders': TVM, PyTorch and numpy are in it.
    compile_cache.environment_fingerprint.cache_clear()
    own = compile_cache.environment_fingerprint()
    content = compile_cache.model_content_hash(ModelEntry("m", "zoo:small_cnn", SMALL))
    key = compile_cache.cache_key(content, "none", "0.27", "llvm", repository=1)
    assert key == compile_cache.cache_key(
        content, "none", "0.27", "llvm", repository=1, environment=own)
    assert key != compile_cache.cache_key(
        content, "none", "0.27", "llvm", repository=1, environment=keys[0])


@pytest.mark.django_db
def test_a_worker_with_another_package_version_compiles_an_unchanged_model_again(
    tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    path = tmp_path / "repo"
    create_demo_repository(path, ONE_MODEL, strategies=("greedy-by-size",))
    repository = actions.track_repository("tiny", str(path))
    commit = _record_head(repository, path)

    def run(trigger: str) -> Run:
        with django_capture_on_commit_callbacks(execute=True):
            return actions.start_run(commit, trigger=trigger)  # eager: it runs here

    first, same = run("manual"), run("rerun")
    # A package upgraded on the worker (one more distribution in its package folders).
    extra = tmp_path / "upgraded"
    _installed(extra, "torch", "9.9.9", "torch/lib.so,sha256=NEW,1\n")
    folders = compile_cache._site_packages()
    monkeypatch.setattr(compile_cache, "_site_packages", lambda: [*folders, str(extra)])
    compile_cache.environment_fingerprint.cache_clear()
    try:
        upgraded = run("rerun")
    finally:
        compile_cache.environment_fingerprint.cache_clear()

    runs = [Run.objects.get(pk=run.pk) for run in (first, same, upgraded)]
    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 3, runs[-1].error
    first, same, upgraded = (Result.objects.get(run=run) for run in runs)
    assert same.reused_from == first  # the same environment: reused
    assert not upgraded.is_reused, "an unchanged commit on another environment was reused"
