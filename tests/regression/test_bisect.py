"""``manage.py bisect``: the first commit that changed planned bytes, compiling little."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard import actions
from dashboard.demo import create_demo_repository
from workers.bisect import first_change

SMALL = {"channels": 4, "resolution": 16, "depth": 2}
RESIDUAL = {"channels": 4, "resolution": 16, "blocks": 1}


def test_binary_search_finds_the_first_differing_index_in_few_probes():
    probes = []

    def differs(i):
        probes.append(i)
        return i >= 37

    assert first_change(100, differs) == 37
    assert len(probes) <= 8
    assert first_change(100, lambda i: False) is None
    assert first_change(2, lambda i: True) == 1


@pytest.mark.django_db
@pytest.mark.slow
def test_it_names_the_commit_that_changed_the_models_planned_bytes(tmp_path):
    commits = [
        ("Track tiny models", {"small-cnn": SMALL, "residual-cnn": RESIDUAL}),
        ("Touch only the residual CNN", {"small-cnn": SMALL,
                                         "residual-cnn": {**RESIDUAL, "channels": 8}}),
        ("Feed the small CNN 24x24 inputs", {"small-cnn": {**SMALL, "resolution": 24},
                                             "residual-cnn": {**RESIDUAL, "channels": 8}}),
        ("Unrelated", {"small-cnn": {**SMALL, "resolution": 24},
                       "residual-cnn": RESIDUAL}),
        ("Unrelated again", {"small-cnn": {**SMALL, "resolution": 24},
                             "residual-cnn": {**RESIDUAL, "blocks": 2}}),
    ]
    shas = create_demo_repository(tmp_path / "repo", commits)
    actions.track_repository("tiny", str(tmp_path / "repo"))
    out = io.StringIO()

    call_command("bisect", "tiny", "small-cnn", shas[0], shas[-1], stdout=out)

    text = out.getvalue()
    assert f"first changed at {shas[2]} Feed the small CNN 24x24 inputs" in text
    # GOOD and the one commit with new content compile; equal content is never compiled twice.
    assert "4 commits after" in text and "2 compiled (greedy-by-size)" in text


@pytest.mark.django_db
def test_it_says_so_when_nothing_changed(tmp_path, monkeypatch):
    shas = create_demo_repository(tmp_path / "repo", [
        ("One", {"small-cnn": SMALL}), ("Two", {"small-cnn": SMALL, "residual-cnn": RESIDUAL}),
    ])
    actions.track_repository("tiny", str(tmp_path / "repo"))
    monkeypatch.setattr("workers.bisect.compile_planned_bytes", lambda *a: 1000)
    out = io.StringIO()

    call_command("bisect", "tiny", "small-cnn", shas[0], shas[1], stdout=out)

    assert "did not change" in out.getvalue()


def _shape_repository(path):
    """Two commits of case 1 at two points: the second widens the convolutions."""
    from datetime import UTC, datetime, timedelta

    from dashboard.demo import commit_file, git

    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    start = datetime.now(UTC) - timedelta(hours=2)
    manifest = (
        '[suite]\nstrategies = ["greedy-by-size"]\n\n[[models]]\nname = "pool"\n'
        'source = "zoo:pool_reuse"\n'
        'params = {{ resolution = 16, channels = {channels}, dynamic = true }}\n'
        'shapes = {{ h = [8, 16], w = "h" }}\n'
    )
    return [
        commit_file(path, "peakwatch.toml", manifest.format(channels=c), f"{c} channels",
                    start + timedelta(hours=i))
        for i, c in enumerate((4, 8))
    ]


@pytest.mark.django_db
@pytest.mark.slow
def test_a_model_with_a_shape_axis_is_bisected_at_the_point_named(tmp_path):
    shas = _shape_repository(tmp_path / "repo")
    actions.track_repository("shaped", str(tmp_path / "repo"))

    with pytest.raises(CommandError, match=r"name one with --point \(h=8,w=8, h=16,w=16\)"):
        call_command("bisect", "shaped", "pool", shas[0], shas[1], stdout=io.StringIO())
    out = io.StringIO()
    call_command("bisect", "shaped", "pool", shas[0], shas[1], "--point", "h=8,w=8", stdout=out)

    text = out.getvalue()
    assert f"first changed at {shas[1]} 8 channels" in text
    assert "2 compiled (greedy-by-size)" in text
