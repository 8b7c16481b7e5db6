"""Memory against input shape on the pages: the model page's chart data and over-allocation
table, the comparison's per-point differences and the plan page's point picker."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dashboard.models import Model, Result
from tests.dashboard.shape_history import COMMITS, GROWTH, POINTS, STOCK_MISSING

pytestmark = pytest.mark.django_db


def test_the_model_page_shows_the_chart_data_and_the_over_allocation(client, pool):
    response = client.get(pool.get_absolute_url())

    html = response.content.decode()
    assert "Memory by shape" in html
    assert 'id="shapes-data"' in html
    assert "peakwatch/shape_charts.js" in html
    rows = re.findall(r'<tr data-point="([^"]+)">(.*?)</tr>', html, re.S)
    assert [label for label, _ in rows] == POINTS
    ratios = [re.search(r"data-ratio>([^<]+)<", row).group(1) for _, row in rows]
    assert ratios == ["384.00×", "24.00×", "1.50×"]
    assert 'data-checked="all"' in html
    assert "plan held at 2 of 3 points" in html
    assert "64*h^2" in html
    assert "data-point-picker" in html


def test_the_model_page_says_why_a_strategy_has_no_formula(client, pool):
    html = client.get(pool.get_absolute_url()).content.decode()

    missing = re.search(r'<li data-formula="tvm-stock" data-missing>(.*?)</li>', html, re.S)
    assert missing and f"no formula: {STOCK_MISSING}".replace("'", "&#x27;") in missing.group(1)


def test_the_model_page_of_a_model_without_a_shape_axis_has_no_shape_section(
    client, recorded_history
):
    model = Model.objects.select_related("repository").get(name="small-cnn")

    html = client.get(model.get_absolute_url()).content.decode()

    assert "Memory by shape" not in html
    assert "shape_charts.js" not in html


def test_the_compare_page_lists_each_point_under_each_strategy(client, shape_runs):
    base, head = shape_runs[0].commit, shape_runs[-1].commit
    url = reverse("compare-commits", args=["tracked", base.sha, head.sha])

    html = client.get(url).content.decode()

    assert "Memory by shape, base and head" in html
    assert 'id="shape-compare-data"' in html
    grown = re.search(
        r'<tr data-strategy="best-fit" data-point="h=1024,w=1024">.*?data-change="(\d+)"',
        html, re.S,
    )
    assert int(grown.group(1)) == GROWTH * (COMMITS - 1)
    same = re.search(
        r'<tr data-strategy="tvm-stock" data-point="h=64,w=64">.*?data-change="(\d+)"', html, re.S
    )
    assert same.group(1) == "0"

    data = client.get(url, {"format": "json"}).json()["shapes"]["models"][0]
    assert data["points"] == POINTS
    assert data["default_strategy"] == "best-fit"
    curve = data["curves"]["best-fit"]
    assert curve["head"][2] - curve["base"][2] == GROWTH * (COMMITS - 1)


def test_the_plan_page_links_to_the_same_result_at_every_other_point(client, shape_runs):
    run = shape_runs[-1]
    result = Result.objects.get(run=run, strategy__name="greedy-by-size", shape_label=POINTS[1])

    html = client.get(reverse("result-plan", args=[result.pk])).content.decode()

    picker = re.search(r"<nav class=\"point-picker\".*?</nav>", html, re.S).group(0)
    links = re.findall(r'<a href="([^"]+)" data-point="([^"]+)"', picker)
    assert [label for _, label in links] == [POINTS[0], POINTS[2]]
    for url, label in links:
        other = Result.objects.get(pk=int(url.split("/")[2]))
        assert (other.shape_label, other.strategy.name, other.run_id) == (
            label, "greedy-by-size", run.pk
        )
    assert f'aria-current="page" data-point="{POINTS[1]}"' in picker
    assert "of intermediates for the symbolic build" in html


def test_the_trend_lists_a_strategys_points_by_value(client, pool):
    body = client.get(f"/api/models/{pool.pk}/trend/").json()

    best_fit = [s["shape_label"] for s in body["series"] if s["strategy"] == "best-fit"]
    # As text h=1024 would come first; they were recorded 256, 1024, 64.
    assert best_fit == POINTS


def test_the_history_names_the_point_of_each_column(client, pool):
    html = client.get(pool.get_absolute_url()).content.decode()

    history = html[html.index("<h2>History</h2>"):]
    heads = re.findall(r'<th scope="col" class="num">(.*?)</th>', history, re.S)
    assert [re.sub(r"<[^>]+>", " ", h).split() for h in heads[:3]] == [
        ["best-fit", "at", p] for p in POINTS
    ]


#: Two models of one repository along one axis, sharing the point seq=32 and no other.
AXES = {"decoder": (16, 32, 64), "encoder": (32, 128, 512)}


def _two_models_at_points(repository, number: int, parent: str, grow: int):
    from datetime import timedelta

    from dashboard import actions
    from dashboard.models import Run
    from tests.regression.history import START, bytes_only

    commit = actions.record_commit(
        repository, sha=f"{number:02d}" + "d" * 38, parent_sha=parent, branch="main",
        author="Ada Planner", message=f"Two axes {number}",
        committed_at=START + timedelta(days=40, hours=number),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    actions.begin_run(
        run, models=[(name, "zoo:mlp") for name in AXES], strategies=["best-fit"],
        boards=["cpu"], total=sum(len(points) for points in AXES.values()),
    )
    for name, points in AXES.items():
        for seq in points:
            report = bytes_only(1000 * seq + grow, shape_point={"seq": seq})
            actions.record_result(run, model=name, strategy="best-fit", board="cpu",
                                  report=report)
    actions.finish_run(run)
    return commit


def test_models_that_share_some_points_keep_every_point_on_the_compare_and_pull_pages(client):
    from dashboard import actions

    repository = actions.track_repository("axes", "/nonexistent")
    base = _two_models_at_points(repository, 1, "", 0)
    head = _two_models_at_points(repository, 2, base.sha, 8)
    actions.record_pull_request(repository, number=7, title="Grow", head_sha=head.sha,
                                base_sha=base.sha)

    for url in (
        reverse("compare-commits", args=["axes", base.sha, head.sha]),
        reverse("pull-request-compare", args=["axes", 7]),
    ):
        models = {
            entry["model"]: entry
            for entry in client.get(url, {"format": "json"}).json()["shapes"]["models"]
        }
        html = client.get(url).content.decode()
        assert sorted(models) == sorted(AXES)
        for name, points in AXES.items():
            labels = [f"seq={seq}" for seq in points]
            assert models[name]["points"] == labels, (url, name)
            curve = models[name]["curves"]["best-fit"]
            assert curve["base"] == [1000 * seq for seq in points]
            assert curve["head"] == [1000 * seq + 8 for seq in points]
            assert [row["change"] for row in models[name]["rows"]] == [8, 8, 8]
        shown = re.findall(r'<tr data-strategy="best-fit" data-point="(seq=\d+)">', html)
        assert sorted(shown) == sorted(f"seq={seq}" for p in AXES.values() for seq in p), url
