"""Memory against input shape as data: /api/models/<id>/shapes/, what the model page's chart
and over-allocation table are drawn from."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.models import Model
from planner.shapes import label_order as point_order
from tests.dashboard.shape_history import (
    COMMITS,
    GROWTH,
    POINTS,
    RESERVED,
    STOCK_MISSING,
    intermediates,
    record_shape_history,
)

pytestmark = pytest.mark.django_db


def shapes_of(client, model, **params):
    response = client.get(reverse("api:model-shapes", args=[model.pk]), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_points_sort_by_their_values_not_as_text():
    assert sorted(["h=256,w=256", "h=1024,w=1024", "h=64,w=64"], key=point_order) == POINTS
    assert sorted(["seq=n", "seq=128"], key=point_order) == ["seq=128", "seq=n"]


def test_the_api_gives_one_curve_per_strategy_over_the_points_in_order(client, pool):
    shapes = shapes_of(client, pool)

    assert [p["label"] for p in shapes["points"]] == POINTS
    assert shapes["points"][0]["point"] == {"h": 64, "w": 64}
    assert [c["strategy"] for c in shapes["curves"]] == ["best-fit", "greedy-by-size", "tvm-stock"]
    best = shapes["curves"][0]
    newest = COMMITS - 1
    assert best["intermediate_bytes"] == [
        intermediates("best-fit", side, newest) for side in (64, 256, 1024)
    ]
    assert best["planned_bytes"] == [v + 1024 for v in best["intermediate_bytes"]]
    assert all(url.startswith("/results/") for url in best["plan_urls"])
    assert shapes["reserved_at_bound"] == [RESERVED] * 3
    assert shapes["best_strategy"] == "best-fit"


def test_the_api_gives_one_curve_per_commit_of_each_strategy(client, pool):
    shapes = shapes_of(client, pool)

    curves = shapes["commit_curves"]["best-fit"]
    assert [c["commit"] for c in curves] == [0, 1, 2]
    assert [c["intermediate_bytes"][2] for c in curves] == [
        64 * 1024 * 1024 + GROWTH * i for i in range(COMMITS)
    ]
    assert [c["title"] for c in shapes["commits"]] == [f"Shape commit {i}" for i in range(3)]
    # Fewer commits asked for: the newest ones.
    two = shapes_of(client, pool, commits=2)
    assert [c["title"] for c in two["commits"]] == ["Shape commit 1", "Shape commit 2"]


def test_the_over_allocation_compares_the_reservation_with_the_best_plan(client, pool):
    table = shapes_of(client, pool)["overallocation"]

    small, _, large = table
    assert small == {
        "point": "h=64,w=64", "need_bytes": 64 * 64 * 64, "need_strategy": "best-fit",
        "stock_bytes": 96 * 64 * 64, "reserved_bytes": RESERVED,
        "ratio": round(RESERVED / (64 * 64 * 64), 2),
    }
    assert small["ratio"] == 384.0
    assert large["ratio"] == 1.5


def test_the_formulas_say_where_their_plan_held(client, pool):
    formulas = {f["strategy"]: f for f in shapes_of(client, pool)["formulas"]}

    assert set(formulas) == {"best-fit", "greedy-by-size", "tvm-stock"}
    assert formulas["tvm-stock"] == {"strategy": "tvm-stock", "missing": STOCK_MISSING}
    assert formulas["best-fit"]["expression"] == "64*h^2"
    assert formulas["best-fit"]["checked_everywhere"] is True
    assert (formulas["greedy-by-size"]["points_checked"], formulas["greedy-by-size"]["points"]) \
        == (2, 3)
    assert formulas["greedy-by-size"]["checked_everywhere"] is False


def test_the_api_answers_404_for_a_model_without_a_shape_axis(client, recorded_history):
    model = Model.objects.get(name="small-cnn")

    response = client.get(reverse("api:model-shapes", args=[model.pk]))

    assert response.status_code == 404


def test_the_api_costs_the_same_queries_however_many_commits(
    client, pool, shape_runs, django_assert_num_queries
):
    # The model, the commits drawn, their results.
    with django_assert_num_queries(3):
        shapes_of(client, pool)
    for first in range(COMMITS, 4 * COMMITS, COMMITS):
        record_shape_history(shape_runs[0].repository, first=first)
    with django_assert_num_queries(3):
        assert len(shapes_of(client, pool, commits=12)["commits"]) == 12


def test_a_point_whose_own_compile_failed_is_left_out_and_named():
    from types import SimpleNamespace

    from dashboard.shape_curves import formulas

    points = ["seq=4", "seq=8", "seq=16"]
    formula = {
        "expression": "512*seq", "range": {"seq": [4, 8]}, "left_out": ["seq=16"],
        "checked": {
            "seq=4": {"valid_plan": True, "point_failed": False},
            "seq=8": {"valid_plan": True, "point_failed": False},
            "seq=16": {"valid_plan": True, "point_failed": True},
        },
    }

    (found,) = formulas([SimpleNamespace(strategy="best-fit", peak_formula=formula)], points)

    assert (found["points_checked"], found["points"], found["left_out"]) == (2, 2, ["seq=16"])
    assert found["checked_everywhere"] is True
