"""Every page, table and file that shows a figure of a shape point names the point, lists
points by their values (h=64 before h=256 before h=1024, which as text they are not), and
the model page opens where the news is: on the newest open alert's point and curve."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import Alert, Result, Toolchain
from tests.dashboard.shape_history import POINTS, record_growth

pytestmark = pytest.mark.django_db

STRATEGIES = ["best-fit", "greedy-by-size", "tvm-stock"]
MIDDLE = POINTS[1]
PLAN = {
    "arena_bytes": 1000,
    "tensors": [
        {"id": "a", "size": 500, "lower": 0, "upper": 4, "offset": 0, "shape": [1], "dtype": "f"},
    ],
}


@pytest.fixture
def middle_regression(shape_runs):
    """The history, then a commit growing greedy-by-size at the middle point only: the
    newest open alert is neither at the first point nor at the largest."""
    return record_growth(shape_runs[0].repository, {("greedy-by-size", 256): 8192})


@pytest.fixture
def every_point_regression(shape_runs):
    """The history, then a commit growing best-fit and greedy-by-size at every point
    (recorded, as the worker records them, at h=256, h=1024, then h=64)."""
    return record_growth(shape_runs[0].repository, {
        (strategy, side): 8192
        for strategy in ("best-fit", "greedy-by-size") for side in (64, 256, 1024)
    })


def section(html: str, marker: str) -> str:
    start = html.index(marker)
    return html[start:html.index("</section>", start)]


def attach_plan(result: Result, tmp_path) -> None:
    path = tmp_path / f"{result.pk}-plan.json"
    path.write_text(json.dumps(PLAN))
    actions.attach_artifact(result, "plan.json", path)


def result_at(run, strategy: str, label: str) -> Result:
    return Result.objects.get(run=run, strategy__name=strategy, shape_label=label)


# --- the model page opens where the news is ------------------------------------------------


def test_the_model_page_opens_on_the_point_and_curve_of_the_newest_open_alert(
    client, pool, middle_regression
):
    html = client.get(pool.get_absolute_url()).content.decode()

    toolchain = Toolchain.objects.get(spec="")
    assert f'data-open-point="{MIDDLE}"' in html
    assert 'data-focus-strategy="greedy-by-size"' in html
    assert 'data-focus-board="cpu"' in html
    assert f'data-focus-toolchain="{toolchain.pk}"' in html
    alert = Alert.objects.get(commit=middle_regression.commit)
    assert f'data-opening-alert="{alert.pk}"' in html
    # The memory chart opens on the alerted strategy's curve at each commit, where the
    # growth shows, not on the newest commit alone.
    assert '<option value="commit" selected>' in html
    assert '<option value="greedy-by-size" selected>' in html


def test_an_explicit_point_and_chart_win_over_the_alert(client, pool, middle_regression):
    html = client.get(
        pool.get_absolute_url(), {"point": POINTS[0], "curves": "strategy"}
    ).content.decode()

    assert f'data-open-point="{POINTS[0]}"' in html
    # The alert still names the curve the address did not.
    assert 'data-focus-strategy="greedy-by-size"' in html
    assert '<option value="strategy" selected>' in html


def test_an_explicit_strategy_wins_over_the_alerts(client, pool, middle_regression):
    html = client.get(pool.get_absolute_url(), {"strategy": "tvm-stock"}).content.decode()

    assert f'data-open-point="{MIDDLE}"' in html
    assert 'data-focus-strategy="tvm-stock"' in html
    assert '<option value="tvm-stock" selected>' in html


def test_without_an_open_alert_the_model_page_opens_on_the_first_point(
    client, pool, middle_regression
):
    Alert.objects.update(state=Alert.State.INTENDED)

    html = client.get(pool.get_absolute_url()).content.decode()

    assert 'data-open-point=""' in html
    assert 'data-focus-strategy=""' in html
    assert "data-opening-alert" not in html
    assert '<option value="strategy" selected>' in html
    assert '<option value="best-fit" selected>' in html


def test_the_model_pages_latest_results_list_points_by_value(client, pool, shape_runs):
    html = client.get(pool.get_absolute_url()).content.decode()

    latest = section(html, "<h2>Latest results</h2>")
    rows = re.findall(r'<th scope="row">([\w-]+) <span class="sub">at ([^<]+)</span>', latest)
    assert rows == [(strategy, label) for strategy in STRATEGIES for label in POINTS]


# --- the comparison ---------------------------------------------------------------------


def test_the_compare_table_has_a_point_column_in_the_points_order(client, shape_runs):
    base, head = shape_runs[0].commit, shape_runs[-1].commit

    html = client.get(
        reverse("compare-commits", args=["tracked", base.sha, head.sha])
    ).content.decode()

    table = section(html, 'data-compare-model="pool"')
    assert '<th scope="col" data-point-column>Point</th>' in table
    rows = re.findall(
        r'<tr><th scope="row">([\w-]+)</th><td data-point="([^"]+)"><code>\2</code></td>', table
    )
    assert rows == [(strategy, label) for strategy in STRATEGIES for label in POINTS]


def test_the_comparison_json_lists_points_by_value(client, shape_runs):
    base, head = shape_runs[0].commit, shape_runs[-1].commit
    url = reverse("compare-commits", args=["tracked", base.sha, head.sha])

    rows = client.get(url, {"format": "json"}).json()["rows"]

    assert [(r["strategy"], r["shape_label"]) for r in rows] == [
        (strategy, label) for strategy in STRATEGIES for label in POINTS
    ]


def test_the_strategy_comparison_lists_points_by_value(client, shape_runs):
    commit = shape_runs[-1].commit
    url = reverse("strategy-compare", args=["tracked", commit.sha])

    html = client.get(url, {"base": "tvm-stock", "head": "best-fit"}).content.decode()

    table = section(html, 'data-compare-model="pool"')
    assert re.findall(r'<td data-point="([^"]+)">', table) == POINTS


def test_the_compare_pages_alerts_list_points_by_value(
    client, shape_runs, every_point_regression
):
    parent, head = shape_runs[-1].commit, every_point_regression.commit

    html = client.get(
        reverse("compare-commits", args=["tracked", parent.sha, head.sha])
    ).content.decode()

    alerts = section(html, "<h2>Alerts at")
    assert re.findall(r"pool / ([\w-]+) / cpu at (h=\d+,w=\d+) with ", alerts) == [
        (strategy, label) for strategy in ("best-fit", "greedy-by-size") for label in POINTS
    ]


# --- plans and their diffs --------------------------------------------------------------


def test_the_plan_diff_names_its_point(client, shape_runs, tmp_path):
    base = result_at(shape_runs[0], "best-fit", POINTS[2])
    head = result_at(shape_runs[-1], "best-fit", POINTS[2])
    for result in (base, head):
        attach_plan(result, tmp_path)

    html = client.get(reverse("plan-diff", args=[base.pk, head.pk])).content.decode()

    assert f"<title>Plan diff {base.pk} → {head.pk} at {POINTS[2]}" in html
    assert f"<h1>Plan of pool at <code>{POINTS[2]}</code>: best-fit at" in html
    assert f'<dd data-shape-point="{POINTS[2]}"><code>{POINTS[2]}</code> on both sides' in html
    assert f"Before: best-fit at <code>{POINTS[2]}</code> at" in html
    assert f"After: best-fit at <code>{POINTS[2]}</code> at" in html


def test_a_plan_diff_across_points_names_both(client, shape_runs, tmp_path):
    base = result_at(shape_runs[-1], "best-fit", POINTS[0])
    head = result_at(shape_runs[-1], "best-fit", POINTS[1])
    for result in (base, head):
        attach_plan(result, tmp_path)

    html = client.get(reverse("plan-diff", args=[base.pk, head.pk])).content.decode()
    data = client.get(reverse("plan-diff-json", args=[base.pk, head.pk])).json()

    assert f"<code>{POINTS[0]}</code> → <code>{POINTS[1]}</code>" in html
    assert (data["base_shape_label"], data["head_shape_label"]) == (POINTS[0], POINTS[1])


def test_the_plan_page_title_names_its_point(client, shape_runs):
    result = result_at(shape_runs[-1], "tvm-stock", MIDDLE)

    html = client.get(reverse("result-plan", args=[result.pk])).content.decode()

    assert f"<title>Plan of pool / tvm-stock at {MIDDLE}" in html
    assert 'href="/repos/tracked/models/pool/?point=h%3D256%2Cw%3D256"' in html


# --- files ------------------------------------------------------------------------------


SAFE_NAME = re.compile(r'attachment; filename="([A-Za-z0-9=_.-]+)"')


def test_each_points_artifacts_zip_is_named_for_the_point(client, shape_runs, tmp_path):
    names = []
    for label in POINTS:
        result = result_at(shape_runs[-1], "best-fit", label)
        attach_plan(result, tmp_path)
        response = client.get(reverse("result-artifacts-zip", args=[result.pk]))
        names.append(SAFE_NAME.fullmatch(response["Content-Disposition"]).group(1))

    assert names == [
        f"pool-best-fit-h={side}_w={side}-cpu-02eeeeeeee-artifacts.zip"
        for side in (64, 256, 1024)
    ]


def test_a_points_artifact_downloads_under_a_name_with_the_point(client, shape_runs, tmp_path):
    result = result_at(shape_runs[-1], "greedy-by-size", POINTS[2])
    attach_plan(result, tmp_path)

    response = client.get(result.artifacts.get().get_absolute_url())

    name = SAFE_NAME.fullmatch(response["Content-Disposition"]).group(1)
    assert name == "pool-greedy-by-size-h=1024_w=1024-cpu-02eeeeeeee-plan.json"


# --- runs, alerts and the overview ------------------------------------------------------


def test_the_run_page_lists_points_by_value(client, shape_runs):
    html = client.get(shape_runs[-1].get_absolute_url()).content.decode()

    listed = re.findall(r'<td>([\w-]+) <span class="sub">at ([^<]+)</span></td>', html)
    assert listed == [(strategy, label) for label in POINTS for strategy in STRATEGIES]
    assert 'href="/repos/tracked/models/pool/?point=h%3D64%2Cw%3D64"' in html


def test_the_alerts_page_lists_a_commits_points_by_value(client, every_point_regression):
    html = client.get(reverse("alerts")).content.decode()

    commit = section(html, f'data-alert-commit="{every_point_regression.commit.sha}"')
    assert re.findall(r"greedy-by-size / cpu at (h=\d+,w=\d+)<", commit) == POINTS


def test_the_overviews_open_alerts_list_points_by_value_and_open_on_them(
    client, every_point_regression
):
    html = client.get(reverse("home")).content.decode()

    alerts = section(html, "data-open-alerts")
    assert re.findall(r"greedy-by-size / cpu at (h=\d+,w=\d+)<", alerts) == POINTS
    assert "?board=cpu&amp;toolchain=" in alerts
    assert "&amp;point=h%3D256%2Cw%3D256&amp;strategy=greedy-by-size" in alerts


def test_the_overview_rows_open_the_model_page_at_their_point(client, shape_runs):
    html = client.get(reverse("home")).content.decode()

    rows = re.findall(r'<tr data-model="pool">\s*<th scope="row"><a href="([^"]+)">', html)
    assert rows == [f"/repos/tracked/models/pool/?{urlencode({'point': p})}" for p in POINTS]


def test_ci_names_the_point_of_each_alert(client, middle_regression):
    run = client.get(reverse("api:run-detail", args=[middle_regression.pk])).json()

    [alert] = run["alerts"]
    assert alert["series"].endswith(f" at {MIDDLE}")
    assert alert["shape_label"] == MIDDLE
