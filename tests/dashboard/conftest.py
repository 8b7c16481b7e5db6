"""A model with a shape axis and its recorded history, for the pages that draw it."""

import pytest

from dashboard import actions
from dashboard.models import Model
from tests.dashboard.shape_history import record_shape_history


@pytest.fixture
def shape_runs():
    return record_shape_history(actions.track_repository("tracked", "/nonexistent"))


@pytest.fixture
def pool(shape_runs):
    return Model.objects.select_related("repository").get(name="pool")
