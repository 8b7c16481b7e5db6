"""Where Results' artifacts live: the ``"artifacts"`` entry of ``STORAGES``.

A folder (``PEAKWATCH_ARTIFACT_DIR``) when the web app and every worker share one disk; an
S3 bucket (``PEAKWATCH_ARTIFACT_BUCKET``, ``dashboard.s3_storage``) when they do not, as for
a worker on a GPU host or beside a board. Workers write through it and the dashboard reads
through it, so neither needs the other's disk. The settings build the entry from the
environment.
"""

from __future__ import annotations

from django.core.files.storage import storages
from django.core.signals import setting_changed
from django.utils.functional import LazyObject, empty

ARTIFACTS = "artifacts"


class _ArtifactStorage(LazyObject):
    """``storages["artifacts"]``, looked up on first use rather than at import, so that the
    settings decide (a test that swaps ``STORAGES`` swaps this too)."""

    def _setup(self):
        self._wrapped = storages[ARTIFACTS]


artifact_storage = _ArtifactStorage()


def get_artifact_storage():
    """``Artifact.file``'s storage: a callable, so that migrations name it, not a bucket."""
    return artifact_storage


def _forget_backend(*, setting, **kwargs):
    if setting == "STORAGES":
        artifact_storage._wrapped = empty


setting_changed.connect(_forget_backend, dispatch_uid="peakwatch-artifact-storage")
