"""Planned bytes in their parts on every page that shows them: the arena, the kernel
workspace (measured or estimated) and the outputs, and how each part changed."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.urls import reverse

from dashboard import actions
from dashboard.models import Alert, Result
from tests.conftest import fake_report
from tests.regression.history import record_run

pytestmark = pytest.mark.django_db

KIB = 1024
PLAN = {
    "arena_bytes": 1000,
    "tensors": [
        {"id": "alloc", "role": "intermediate", "binding_index": 0, "shape": [1, 125],
         "dtype": "float32", "size": 500, "lower": 0, "upper": 2, "offset": 0,
         "producer": "fused_conv2d_add_relu"},
    ],
    "outputs": [],
}


def _report(arena: int, workspace: int, source: str):
    outputs = 4 * KIB
    return fake_report(
        arena + workspace + outputs, 1.0, intermediate_bytes=arena, output_bytes=outputs,
        kernel_workspace_bytes=workspace, kernel_workspace_source=source,
    )


@pytest.fixture
def grown(tmp_path):
    """A commit whose planned bytes grew by 681.9 KiB, mostly kernel workspace: the arena
    185 KiB -> 563 KiB, the workspace 120 KiB estimated -> 424 KiB measured."""
    repository = actions.track_repository("tracked", "/nonexistent")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    base = record_run(repository, 0, {
        ("small-cnn", "tvm-stock"): _report(185 * KIB, 120 * KIB, "estimate"),
    })
    head = record_run(repository, 1, {
        ("small-cnn", "tvm-stock"): _report(563 * KIB, 424 * KIB, "measured"),
    }, parent=base.commit.sha)
    results = base.results.get(), head.results.get()
    for result in results:
        actions.attach_artifact(result, "plan.json", path)
    return results


def test_the_plan_page_shows_what_planned_bytes_are_made_of(client, grown):
    _, head = grown

    html = client.get(reverse("result-plan", args=[head.pk])).content.decode()

    parts = html.split("data-planned-parts>")[1].split("</dd>")[0]
    assert 'arena (intermediates) <span class="bytes" title="576,512 bytes">563.0 KiB' in parts
    assert 'kernel workspace <span class="bytes" title="434,176 bytes">424.0 KiB' in parts
    assert "<span class=\"muted\" data-workspace-how>(measured)</span>" in parts
    assert 'outputs <span class="bytes" title="4,096 bytes">4.0 KiB' in parts


def test_the_plan_page_says_when_a_result_did_not_record_its_workspace(client, grown):
    _, head = grown
    Result.objects.filter(pk=head.pk).update(details={})

    html = client.get(reverse("result-plan", args=[head.pk])).content.decode()

    parts = html.split("data-planned-parts>")[1].split("</dd>")[0]
    assert "kernel workspace — <span class=\"muted\" data-workspace-how>(not recorded)" in parts


def test_the_plan_diff_shows_both_sides_and_the_change_of_each_part(client, grown):
    base, head = grown

    html = client.get(reverse("plan-diff", args=[base.pk, head.pk])).content.decode()

    rows = {
        key: html.split(f'<dd data-part="{key}">')[1].split("</dd>")[0]
        for key in ("arena", "workspace", "outputs", "planned")
    }
    assert "185.0 KiB" in rows["arena"] and "563.0 KiB" in rows["arena"]
    assert "+378.0 KiB" in rows["arena"]
    assert "120.0 KiB" in rows["workspace"] and "424.0 KiB" in rows["workspace"]
    assert "+304.0 KiB" in rows["workspace"]
    how = '<span class="muted" data-workspace-how>(estimated → measured)</span>'
    assert how in rows["workspace"]
    assert "±0 B" in rows["outputs"]
    assert "+682.0 KiB" in rows["planned"]

    data = client.get(reverse("plan-diff-json", args=[base.pk, head.pk])).json()
    workspace = next(p for p in data["parts"] if p["key"] == "workspace")
    assert workspace == {
        "key": "workspace", "label": "Kernel workspace", "before": 120 * KIB,
        "after": 424 * KIB, "change": 304 * KIB, "how": ["estimated", "measured"],
    }


def test_the_comparison_shows_each_series_parts_and_their_changes(client, grown):
    base, head = grown
    url = reverse("compare-commits", args=["tracked", base.commit.sha, head.commit.sha])

    html = client.get(url).content.decode()

    parts = html.split('<tr class="parts-row">')[1].split("</tr>")[0]
    assert ('<span data-part="arena">arena <span class="bytes" title="189,440 bytes">185.0 KiB'
            in parts)
    assert "+378.0 KiB" in parts
    assert ('<span data-part="workspace">kernel workspace (estimated → measured) '
            '<span class="bytes" title="122,880 bytes">120.0 KiB</span> → ') in parts
    assert "+304.0 KiB" in parts
    assert '<span data-part="outputs">outputs <span class="bytes" title="4,096 bytes">' in parts

    [row] = client.get(url, {"format": "json"}).json()["rows"]
    assert row["head_parts"] == {
        "arena_bytes": 563 * KIB, "kernel_workspace_bytes": 424 * KIB,
        "kernel_workspace_source": "measured", "output_bytes": 4 * KIB,
    }
    assert row["base_parts"]["kernel_workspace_source"] == "estimate"


def test_an_alert_row_shows_which_parts_grew(client, grown):
    _, head = grown
    alert = Alert.objects.get(result=head, kind="bytes")

    for url in (reverse("alerts"), reverse("home")):
        cache.clear()
        html = client.get(url).content.decode()

        row = html.split(f'<tr data-alert="{alert.pk}">')[1].split("</tr>")[0]
        assert "+682.0 KiB" in row
        # The line under it says where the 682 KiB went.
        parts = html.split(f'data-parts-of="{alert.pk}">')[1].split("</tr>")[0]
        assert '<span data-part="arena">arena' in parts and "+378.0 KiB" in parts
        assert "kernel workspace (estimated → measured)" in parts and "+304.0 KiB" in parts
