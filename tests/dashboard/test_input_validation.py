"""Inputs are checked at the edge: a NUL byte, an out-of-range number or an unknown choice
is a 400 with a message, never a 500 from the database."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard import actions

pytestmark = pytest.mark.django_db

TOO_BIG = "9223372036854775808"  # 2**63: one more than PostgreSQL's bigint holds


@pytest.mark.parametrize(
    "url",
    [
        "/api/results/?commit=%00",
        "/api/runs/?repository=%00",
        "/api/models/?repository=a%00b",
        "/alerts/?commit=%00",
        "/repos/demo/models/%00/",
        "/repos/demo/compare/%00...%00/",
        "/?x%00=1",
    ],
)
def test_a_nul_byte_in_a_path_or_query_is_400(client, recorded_history, url):
    response = client.get(url)

    assert response.status_code == 400
    assert b"NUL" in response.content


@pytest.mark.parametrize(
    "query",
    [
        {"limit": TOO_BIG}, {"offset": TOO_BIG}, {"limit": "0"}, {"limit": "-1"},
        {"limit": "ten"}, {"limit": "1001"}, {"offset": "-5"},
    ],
)
@pytest.mark.parametrize("endpoint", ["repository-list", "model-list", "run-list", "result-list"])
def test_a_limit_or_offset_out_of_range_is_400_on_every_list(client, recorded_history, endpoint,
                                                             query):
    response = client.get(reverse(f"api:{endpoint}"), query)

    assert response.status_code == 400
    assert set(response.json()) == set(query)


def test_a_huge_offset_within_range_is_an_empty_page(client, recorded_history):
    response = client.get(reverse("api:run-list"), {"offset": str(2**63 - 1)})

    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    ("endpoint", "query"),
    [
        ("run-list", {"status": "exploded"}),
        ("result-list", {"status": "maybe"}),
        ("result-list", {"run": TOO_BIG}),
        ("result-list", {"run": "²"}),
    ],
)
def test_an_unknown_choice_or_id_is_400_with_a_message(client, recorded_history, endpoint,
                                                       query):
    response = client.get(reverse(f"api:{endpoint}"), query)

    assert response.status_code == 400
    (message,) = response.json().values()
    assert message


def test_a_model_filter_with_a_huge_number_is_a_name_that_matches_nothing(client,
                                                                          recorded_history):
    response = client.get(reverse("api:result-list"), {"model": TOO_BIG})

    assert response.status_code == 200
    assert response.json()["count"] == 0


@pytest.mark.parametrize("path", [f"/runs/{TOO_BIG}/", f"/api/runs/{TOO_BIG}/",
                                  f"/runs/{TOO_BIG}/progress.json"])
def test_an_id_beyond_bigint_in_a_path_is_404(client, recorded_history, path):
    assert client.get(path).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"repository": "x\u0000", "branch": "main"},
        {"repository": "demo", "branch": "ma\u0000in"},
        {"repository": "demo", "sha": "abc\u0000def"},
        {"repository": "demo", "sha": ""},
        {"repository": "demo", "branch": "main\n"},
        {"repository": ["demo"], "branch": "main"},
    ],
)
def test_the_run_trigger_refuses_a_bad_value_with_400(client, recorded_history, body):
    _, raw = actions.create_api_token("ci", all_repositories=True)

    response = client.post(
        "/api/runs", data=json.dumps(body), content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )

    assert response.status_code == 400
    assert response.json()["error"]


def test_the_run_trigger_is_in_the_openapi_schema(client):
    schema = client.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/runs"]["post"]
    assert operation["security"] == [{"ApiToken": []}]
    assert {"202", "400", "401", "403", "404"} <= set(operation["responses"])
    assert schema["components"]["securitySchemes"]["ApiToken"]["scheme"] == "bearer"
