"""A mixture of experts listed twice in a manifest, once in each form: either model's page
shows both forms' planned bytes side by side."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from dashboard import actions
from dashboard.models import Run
from planner.tvm.sources.experts import ASSUMPTION
from tests.conftest import fake_report

SOURCE = "models/moe.py:build"
SIZES = {"blocks": "2 blocks", "kinds": "MixtralSparseMoeBlock", "experts": "4", "top_k": "2"}


@pytest.fixture
def both_forms(db):
    repository = actions.track_repository("moe", "/nonexistent/moe.git")
    commit = actions.record_commit(
        repository, sha="a" * 40, parent_sha="", branch="main", author="Ada Planner",
        message="Track a mixture of experts in both forms",
        committed_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    run = Run.objects.create(repository=repository, commit=commit, trigger="test")
    models = [("mixtral", SOURCE), ("mixtral-grouped", SOURCE), ("cnn", "zoo:small_cnn")]
    actions.begin_run(run, models=models, strategies=["tvm-stock", "best-fit+rewrites"],
                      boards=["cpu"], total=5)
    planned = {("mixtral", "tvm-stock"): 100_000, ("mixtral", "best-fit+rewrites"): 68_000,
               ("mixtral-grouped", "tvm-stock"): 135_000,
               ("mixtral-grouped", "best-fit+rewrites"): 68_000}
    for (model, strategy), figure in planned.items():
        form = "grouped" if model.endswith("grouped") else "dense"
        actions.record_result(
            run, model=model, strategy=strategy, board="cpu",
            report=fake_report(figure, 1.0, assumptions=[ASSUMPTION[form].format(**SIZES)]),
        )
    actions.record_result(run, model="cnn", strategy="tvm-stock", board="cpu",
                          report=fake_report(50_000, 1.0))
    actions.finish_run(run)
    return repository


def page(client, model: str) -> str:
    return client.get(reverse("model-trend", args=["moe", model])).content.decode()


@pytest.mark.parametrize("model", ["mixtral", "mixtral-grouped"])
def test_either_forms_page_shows_both_side_by_side(client, both_forms, model):
    html = page(client, model)

    table = html[html.index("data-moe-table"):html.index("</table>", html.index("data-moe-table"))]
    stock = table[table.index('data-strategy="tvm-stock"'):]
    assert "Dense (mixtral)" in table and "Grouped (mixtral-grouped)" in table
    row = stock.split("</tr>")[0]
    assert row.index('title="100,000 bytes"') < row.index('title="135,000 bytes"')
    assert "1.350" in row  # grouped / dense under tvm-stock
    rewrites = table[table.index('data-strategy="best-fit+rewrites"'):].split("</tr>")[0]
    assert "1.000" in rewrites
    other = "mixtral-grouped" if model == "mixtral" else "mixtral"
    assert reverse("model-trend", args=["moe", other]) in html


def test_a_model_without_experts_or_without_the_other_form_shows_none(client, both_forms):
    assert "data-moe-forms" not in page(client, "cnn")

    from dashboard.models import Model

    Model.objects.filter(name="mixtral-grouped").update(source="models/other.py:build")
    assert "data-moe-forms" not in page(client, "mixtral")
