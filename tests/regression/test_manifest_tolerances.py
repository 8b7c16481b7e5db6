"""Tolerances in peakwatch.toml: per suite, model and point, in bytes or percent, and
latency's minimum effect, taken at the commit measured; a series' admin row overrides them;
every alert says which tolerance it went past."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard import actions, gitrepo
from dashboard.models import Alert, Board, Model, Result, Run, Strategy
from tests.regression.history import bytes_only, record_run
from workers.manifest import ManifestError, parse

pytestmark = pytest.mark.django_db

SERIES = ("small-cnn", "greedy-by-size")


@pytest.fixture
def repository():
    return actions.track_repository("tracked", "/nonexistent")


def test_the_manifest_sets_tolerances_by_suite_model_and_point():
    suite = parse('''[suite]
tolerance = { bytes = 4096, latency = 0.2 }

[[models]]
name = "encoder"
source = "models/encoder.py:build"
shapes = { seq = [64, 512] }
tolerance = { percent = 2 }
point_tolerance = { "seq=512" = { bytes = 65536, latency = 0.5 } }

[[models]]
name = "plain"
source = "zoo:small_cnn"
''')
    encoder, plain = suite.models

    assert suite.tolerance_for(encoder, "seq=512") == {
        "bytes": 65536, "percent": 2.0, "latency": 0.5,
        "from": "peakwatch.toml: the point's, the model's, [suite]'s"}
    assert suite.tolerance_for(encoder, "seq=64") == {
        "bytes": 4096, "percent": 2.0, "latency": 0.2,
        "from": "peakwatch.toml: the model's, [suite]'s"}
    assert suite.tolerance_for(plain) == {
        "bytes": 4096, "latency": 0.2, "from": "peakwatch.toml: [suite]'s"}
    assert parse('[[models]]\nname = "m"\nsource = "zoo:mlp"\n').tolerance_for(plain) == {}


@pytest.mark.parametrize(("text", "message"), [
    ('[suite]\ntolerance = { bytes = -1 }', "tolerance bytes must be a whole number"),
    ('[suite]\ntolerance = { bytes = 1.5 }', "tolerance bytes must be a whole number"),
    ('[suite]\ntolerance = { percent = "1%" }', "tolerance percent must be a number"),
    ('[suite]\ntolerance = { megabytes = 1 }', "unknown tolerance megabytes"),
    ('[suite]\ntolerance = 5', "a tolerance is a table"),
    ('[[models]]\nname = "m"\nsource = "zoo:mlp"\npoint_tolerance = { "h=1" = {} }',
     "needs a shape axis"),
    ('[[models]]\nname = "m"\nsource = "m.py:build"\nshapes = { seq = [8, 16] }\n'
     'point_tolerance = { "seq=32" = { bytes = 1 } }', "'seq=32' is not one of its points"),
])
def test_a_bad_tolerance_is_refused_with_where_and_why(text, message):
    if "[[models]]" not in text:
        text += '\n[[models]]\nname = "m"\nsource = "zoo:mlp"\n'
    with pytest.raises(ManifestError, match=message):
        parse(text)


def test_a_percent_tolerance_lets_growth_through_and_the_alert_names_it(repository):
    tolerance = {SERIES: {"percent": 10.0, "from": "peakwatch.toml: [suite]'s"}}
    first = record_run(repository, 0, {SERIES: bytes_only(100_000)}, tolerances=tolerance)
    # +8%: within 10% of 100,000 B.
    second = record_run(repository, 1, {SERIES: bytes_only(108_000)},
                        parent=first.commit.sha, tolerances=tolerance)
    assert not Alert.objects.exists()
    # +11.1% of 108,000 B: past it.
    record_run(repository, 2, {SERIES: bytes_only(120_000)}, parent=second.commit.sha,
               tolerances=tolerance)

    alert = Alert.objects.get()
    assert alert.value == 120_000
    assert alert.tolerance == ("0 B or 10% (10,800 B here), from peakwatch.toml: [suite]'s")


def test_the_tolerance_is_the_measured_commits_and_an_admin_row_overrides_it(repository):
    generous = {SERIES: {"bytes": 50_000, "from": "peakwatch.toml: the model's"}}
    first = record_run(repository, 0, {SERIES: bytes_only(100_000)})
    # The commit that raised the model's tolerance is measured with it.
    second = record_run(repository, 1, {SERIES: bytes_only(140_000)}, parent=first.commit.sha,
                        tolerances=generous)
    assert not Alert.objects.exists()
    actions.set_series_threshold(
        Model.objects.get(name=SERIES[0]), Strategy.objects.get(name=SERIES[1]),
        Board.objects.get(name="cpu"), 1000,
    )
    record_run(repository, 2, {SERIES: bytes_only(150_000)}, parent=second.commit.sha,
               tolerances=generous)

    alert = Alert.objects.get()
    assert alert.tolerance == "1,000 B, from the series' threshold in the admin"


@pytest.mark.slow
def test_a_tracked_repository_alerts_past_its_manifests_tolerance_and_says_so(
    empty_repo, django_capture_on_commit_callbacks
):
    # A model whose hidden layer is as wide as the manifest says, under a tolerance of 1000%.
    repo = empty_repo

    def commit(width: int, tolerance: str, message: str) -> str:
        repo.write("peakwatch.toml", (
            f'[suite]\nstrategies = ["greedy-by-size"]\nboards = ["cpu"]\ntolerance = {tolerance}'
            f'\n\n[[models]]\nname = "mlp"\nsource = "zoo:mlp"\n'
            f"params = {{ features = 8, hidden = [{width}], classes = 2 }}\n"
        ))
        return repo.commit(message)

    shas = [commit(16, "{ percent = 1000 }", "An MLP"),
            commit(64, "{ percent = 1000 }", "Wider, within the tolerance"),
            commit(256, "{ bytes = 0 }", "Wider still, and no tolerance left")]
    repository = actions.track_repository("tolerant", str(repo.path))
    runs = []
    for sha in shas:
        info = gitrepo.commit_info(repo.path, sha)
        recorded = actions.record_commit(
            repository, sha=info.sha, parent_sha=info.parent_sha, branch="main",
            author=info.author, message=info.message, committed_at=info.committed_at,
        )
        with django_capture_on_commit_callbacks(execute=True):
            started = actions.start_run(recorded)  # eager: it runs here, as the block ends
        runs.append(Run.objects.get(pk=started.pk))
    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 3, runs[-1].error
    planned = [Result.objects.get(run=run).planned_bytes for run in runs]
    assert planned[0] < planned[1] < planned[2]

    alert = Alert.objects.get()
    assert alert.commit.sha == shas[2]
    assert alert.tolerance == "0 B, from peakwatch.toml: [suite]'s"
    answer = Client().get(f"/api/runs/{runs[2].pk}/").json()
    assert [a["tolerance"] for a in answer["alerts"]] == [alert.tolerance]
    page = Client().get("/alerts/")
    assert b"past 0 B, from peakwatch.toml: [suite]&#x27;s" in page.content
