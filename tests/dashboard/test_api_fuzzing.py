"""Schemathesis drives every operation of /api/schema/ with generated inputs, valid and not:
no answer is a 5xx, every answer matches the schema."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from dashboard import actions
from dashboard.models import Alert, Run, RunRequest

pytestmark = pytest.mark.django_db

# Seventeen operations, each through the examples, coverage and fuzzing phases: about 18 s for
# both tests on the project's 2-core machine
# (`python3 -m pytest tests/dashboard/test_api_fuzzing.py`).
EXAMPLES = 25


@pytest.fixture
def api_schema(recorded_history):
    # Run requests in each state, so their answers are checked against the schema too.
    repository = recorded_history[0].repository
    actions.answer_run_request(
        RunRequest.objects.create(repository=repository, rev="main", branch="main"),
        run=recorded_history[0],
    )
    actions.answer_run_request(
        RunRequest.objects.create(repository=repository, rev="0badc0de"), error="unknown"
    )
    RunRequest.objects.create(repository=repository, rev="feature", branch="feature")
    # Pull requests open and closed, one with a run: their answers are checked too.
    head = recorded_history[-1]
    for number in (6, 7):
        pull = actions.record_pull_request(
            repository, number=number, title=f"Change {number}", head_sha=head.commit.sha
        )
    Run.objects.filter(pk=head.pk).update(pull_request=pull)
    actions.close_pull_request(repository, number=6, merged=False)
    # As Django's test client does: requests must not close the connection that holds the
    # test's transaction.
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    assert Alert.objects.exists()  # the history's planned bytes grow at every commit
    yield schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    for signal in (signals.request_started, signals.request_finished):
        signal.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture
def token(recorded_history):
    # Every repository: the fuzzer names any, and each must be answered as documented.
    _, raw = actions.create_api_token("fuzzing", all_repositories=True)
    return raw


BOUNDED = settings(
    max_examples=EXAMPLES, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)


@schema.parametrize()
@BOUNDED
def test_the_api_answers_anonymous_requests_within_its_schema(case):
    case.call_and_validate()


@schema.parametrize()
@BOUNDED
def test_the_api_answers_requests_with_a_token_within_its_schema(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})
