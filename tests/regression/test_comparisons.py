"""Comparison pages: commits, a pull request, a branch, strategies; and plan diffs."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.compare import pareto_front
from planner.plan_diff import diff_plans
from tests.regression.history import bytes_only, record_run

pytestmark = pytest.mark.django_db


def _plan(tmp_path, name, tensors, arena):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"arena_bytes": arena, "tensors": tensors}))
    return str(path)


def _tensor(tensor_id, size, lower, upper, offset):
    return {"id": tensor_id, "shape": [1, size // 4], "dtype": "float32", "size": size,
            "lower": lower, "upper": upper, "offset": offset, "producer": "conv2d"}


@pytest.fixture
def two_commits(tmp_path):
    repository = actions.track_repository("tracked", "/nonexistent")
    before = _plan(tmp_path, "before", [
        _tensor("a", 1024, 0, 2, 0), _tensor("b", 512, 1, 3, 1024), _tensor("c", 256, 2, 4, 0)
    ], 1536)
    after = _plan(tmp_path, "after", [
        _tensor("a", 2048, 0, 2, 0), _tensor("b", 512, 1, 3, 2048), _tensor("c", 256, 2, 5, 0),
        _tensor("d", 64, 4, 5, 256),
    ], 2560)
    base = record_run(repository, 0, {
        ("small-cnn", "greedy-by-size"): bytes_only(50_000, 1.0, [1.0],
                                                       artifacts={"plan.json": before}),
        ("small-cnn", "none"): bytes_only(80_000, 0.9, [0.9]),
    })
    head = record_run(repository, 1, {
        ("small-cnn", "greedy-by-size"): bytes_only(58_192, 1.1, [1.1],
                                                       artifacts={"plan.json": after}),
        ("small-cnn", "none"): bytes_only(80_000, 0.9, [0.9]),
    }, parent=base.commit.sha, branch="feature")
    return repository, base, head


def test_the_commit_comparison_shows_each_models_delta(client, two_commits):
    _, base, head = two_commits
    url = reverse("compare-commits", args=["tracked", base.commit.sha[:8], head.commit.sha[:8]])

    response = client.get(url)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-compare-model="small-cnn"' in html
    assert 'data-bytes-delta="8192"' in html
    assert 'title="+8,192 bytes">+8.0 KiB</span>' in html
    assert "+16.4%" in html
    assert "peakwatch/compare.js" in html and 'id="pareto-data"' in html


def test_the_comparison_is_served_as_json_too(client, two_commits):
    _, base, head = two_commits
    url = reverse("compare-commits", args=["tracked", base.commit.sha, head.commit.sha])

    data = client.get(url, {"format": "json"}).json()

    greedy = next(r for r in data["rows"] if r["strategy"] == "greedy-by-size")
    assert (greedy["base_bytes"], greedy["head_bytes"], greedy["bytes_delta"]) == (
        50_000, 58_192, 8192)
    assert greedy["latency_relative"] == pytest.approx(0.1)
    [model] = data["pareto"]["models"]
    assert [s["label"] for s in model["sets"]] == ["base", "head"]


def test_an_unknown_commit_is_a_404(client, two_commits):
    assert client.get("/repos/tracked/compare/deadbeef...cafebabe/").status_code == 404


def test_a_pull_request_is_compared_with_its_merge_base(client, two_commits):
    repository, base, head = two_commits
    actions.record_pull_request(repository, number=5, title="Widen", head_sha=head.commit.sha,
                                base_sha=base.commit.sha)

    response = client.get(reverse("pull-request-compare", args=["tracked", 5]))

    assert response.status_code == 200
    assert 'data-bytes-delta="8192"' in response.content.decode()


def test_a_branch_is_compared_with_the_default_branch(client, two_commits):
    response = client.get(reverse("branch-compare", args=["tracked", "feature"]))

    assert response.status_code == 200
    assert response.context["base"].branch == "main"
    assert 'data-bytes-delta="8192"' in response.content.decode()


def test_two_strategies_are_compared_on_one_commit(client, two_commits):
    _, base, _ = two_commits
    url = reverse("strategy-compare", args=["tracked", base.commit.sha])

    data = client.get(url, {"base": "none", "head": "greedy-by-size", "format": "json"}).json()

    [row] = data["rows"]
    assert (row["base_bytes"], row["head_bytes"], row["bytes_delta"]) == (80_000, 50_000, -30_000)
    assert client.get(url, {"base": "none", "head": "greedy-by-size"}).status_code == 200


def test_a_plan_diff_finds_resized_moved_and_longer_lived_tensors(client, two_commits):
    _, base, head = two_commits
    before = base.results.get(strategy__name="greedy-by-size")
    after = head.results.get(strategy__name="greedy-by-size")

    data = client.get(reverse("plan-diff-json", args=[before.pk, after.pk])).json()
    page = client.get(reverse("plan-diff", args=[before.pk, after.pk])).content.decode()

    changes = {c["id"]: c for c in data["changes"]}
    assert changes["a"]["fields"] == {"size": [1024, 2048], "shape": [[1, 256], [1, 512]]}
    assert changes["b"]["fields"] == {"offset": [1024, 2048]}
    assert changes["c"]["fields"] == {"upper": [4, 5]}
    assert changes["d"]["status"] == "added"
    assert (data["resized"], data["moved"], data["lifetime_changed"], data["added"]) == (1, 1, 1, 1)
    assert 'data-tensor="a"' in page
    assert "1 resized, 1 with a new lifetime, 1 moved; 1 new, 0 gone" in page


def test_a_plan_diff_needs_both_plans(client, two_commits):
    _, base, head = two_commits
    without = base.results.get(strategy__name="none")
    after = head.results.get(strategy__name="greedy-by-size")

    assert client.get(reverse("plan-diff", args=[without.pk, after.pk])).status_code == 404


def test_identical_plans_have_no_changes():
    plan = {"tensors": [_tensor("a", 4, 0, 1, 0)]}

    diff = diff_plans(plan, plan)

    assert diff["changes"] == [] and diff["unchanged"] == 1


def test_the_pareto_front_keeps_strategies_no_other_beats_on_both():
    points = [{"strategy": s, "planned_bytes": b, "latency_ms": t}
              for s, b, t in [("none", 2000, 1.0), ("greedy", 1000, 1.2), ("worse", 2100, 1.3)]]

    assert [p["strategy"] for p in pareto_front(points)] == ["none", "greedy"]
