"""A plan below the model's lower bound says which problem's bound it met, and why."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard import actions
from tests.conftest import fake_report


@pytest.fixture
def reordered_and_rewritten(recorded_history):
    run = recorded_history[-1]
    report = fake_report(
        40_000, 1.0,
        lower_bound_bytes=45_000,
        rewritten_lower_bound_bytes=30_016,
        program_order_lower_bound_bytes=45_000,
        chosen_order_lower_bound_bytes=38_528,
        order={"kept": "chosen order", "method": "exact"},
    )
    return actions.record_result(
        run, model="small-cnn", strategy="best-fit+rewrites+reorder", board="cpu",
        report=report,
    )


def test_it_keeps_the_bounds_of_the_rewritten_and_reordered_problems(reordered_and_rewritten):
    details = reordered_and_rewritten.details

    assert details["rewritten_lower_bound_bytes"] == 30_016
    assert details["program_order_lower_bound_bytes"] == 45_000
    assert details["chosen_order_lower_bound_bytes"] == 38_528
    assert details["order"]["kept"] == "chosen order"


def test_the_plan_page_shows_each_bound_beside_the_original_with_why(
    client, reordered_and_rewritten
):
    html = client.get(reverse("result-plan", args=[reordered_and_rewritten.pk])).content.decode()

    assert "rewrites merge tensors, so the bound is that of the merged problem" in html
    assert 'data-bound="rewritten"' in html and 'data-bound="chosen-order"' in html
    assert html.index("lower bound") < html.index('data-bound="rewritten"')


def test_the_run_page_marks_the_bounds_of_changed_problems(client, reordered_and_rewritten):
    html = client.get(reordered_and_rewritten.run.get_absolute_url()).content.decode()

    assert html.count('data-bound="rewritten"') == 1
    assert html.count('data-bound="chosen-order"') == 1


def test_it_adds_no_note_where_the_problem_is_the_models_own(client, recorded_history):
    html = client.get(recorded_history[-1].get_absolute_url()).content.decode()

    assert "data-bound=" not in html
