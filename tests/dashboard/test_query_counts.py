"""How many queries each page costs, exactly, with an empty cache: the numbers a change
that adds a query per row (or per series) would move."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.urls import reverse

from dashboard import actions
from dashboard.models import Model, Result

pytestmark = pytest.mark.django_db

PLAN = {
    "arena_bytes": 1000,
    "tensors": [
        {"id": "a", "size": 500, "lower": 0, "upper": 4, "offset": 0, "shape": [1], "dtype": "f"},
    ],
}

#: Queries per page, with what each is for.
EXPECTED = {
    # The versions of the tables and of the open alerts; both stored renderings; recent
    # runs. (Rendering them, once per change of the data, is bounded in
    # test_dashboard_pages.)
    "home": 3,
    # The model; its alerts; its trend snapshot; its series with their newest results;
    # the branches; its commits measured at shape points (none here: nothing more); its
    # LLM deployment's breakdown by commit (none here: one query that finds none).
    "trend page": 7,
    # The model; its alerts; its trend snapshot.
    "trend api": 3,
    # The run; its results with artifacts; the parent commit's results.
    "run": 4,
    "run results": 4,
    # The result and its artifacts; the parent's results; the other strategies here.
    "plan": 4,
    # Both results, each with its artifacts.
    "plan diff": 4,
    # The repository; both commits; each commit's results as plain columns (read once for
    # the table and the Pareto chart); both commits' results at shape points; the head's
    # alerts.
    "compare": 7,
    # The alerts with everything they show.
    "alerts": 1,
}


@pytest.fixture
def urls(recorded_history, tmp_path):
    small_cnn = Model.objects.get(name="small-cnn")
    base, head = (
        Result.objects.get(run=run, model=small_cnn, strategy__name="none")
        for run in recorded_history[-2:]
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    for result in (base, head):
        actions.attach_artifact(result, "plan.json", path)
    first, last = recorded_history[0].commit, recorded_history[-1].commit
    return {
        "home": reverse("home"),
        "trend page": small_cnn.get_absolute_url(),
        "trend api": f"/api/models/{small_cnn.pk}/trend/",
        "run": recorded_history[-1].get_absolute_url(),
        "run results": reverse("run-results", args=[recorded_history[-1].pk]),
        "plan": reverse("result-plan", args=[head.pk]),
        "plan diff": reverse("plan-diff", args=[base.pk, head.pk]),
        "compare": reverse("compare-commits", args=["demo", first.sha, last.sha]),
        "alerts": reverse("alerts"),
    }


@pytest.mark.parametrize("page", EXPECTED)
def test_each_page_costs_a_fixed_number_of_queries(client, urls, page, django_assert_num_queries):
    client.get(urls[page])  # what a page stores as rendered is there, as after a run
    cache.clear()
    with django_assert_num_queries(EXPECTED[page]):
        response = client.get(urls[page])
    assert response.status_code == 200
