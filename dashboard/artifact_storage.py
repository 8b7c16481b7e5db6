"""Where Results' artifacts live: the ``"artifacts"`` entry of ``STORAGES``.

A folder (``PEAKWATCH_ARTIFACT_DIR``) when the web app and every worker share one disk; an
S3 bucket (``PEAKWATCH_ARTIFACT_BUCKET``, ``dashboard.s3_storage``) when they do not, as for
a worker on a GPU host or beside a board. Workers write through it and the dashboard reads
through it, so neither needs the other's disk. The settings build the entry from the
environment.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.storage import FileSystemStorage, storages
from django.core.signals import setting_changed
from django.utils.functional import LazyObject, empty

ARTIFACTS = "artifacts"
#: What a visitor is told to run when the bucket lacks a file the artifact folder has.
COPY_COMMAND = "python3 manage.py copy_artifacts"

log = logging.getLogger(__name__)


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


class ArtifactMissing(FileNotFoundError):
    """The artifact storage does not have a file a row names, or cannot be read now
    (``temporary``); ``why`` says which, in words a visitor can act on."""

    def __init__(self, why: str, *, temporary: bool = False):
        super().__init__(why)
        self.why = why
        self.temporary = temporary


def in_a_bucket() -> bool:
    return not isinstance(artifact_storage, FileSystemStorage)


def artifact_folder() -> FileSystemStorage:
    """The folder artifacts are written to without a bucket (``PEAKWATCH_ARTIFACT_DIR``):
    where the files of results recorded before a switch to a bucket still are."""
    return FileSystemStorage(location=settings.MEDIA_ROOT)


def describe_storage() -> str:
    """Where artifacts are stored now, for an operator: a bucket (and prefix) or a folder."""
    if not in_a_bucket():
        return f"the folder {artifact_storage.location}"
    prefix = getattr(artifact_storage, "location", "")
    return f"the bucket {artifact_storage.bucket_name}" + (f" under {prefix}/" if prefix else "")


def stored_size(name: str) -> int | None:
    """The size of the stored file ``name``; None when the storage has none."""
    try:
        return artifact_storage.size(name) if artifact_storage.exists(name) else None
    except FileNotFoundError:
        return None


def open_artifact(name: str):
    """The stored file ``name``, opened for reading; ``ArtifactMissing`` saying why not."""
    if not name:
        raise ArtifactMissing("no file was stored for it")
    try:
        return artifact_storage.open(name, "rb")
    except FileNotFoundError:
        raise ArtifactMissing(why_missing(name)) from None
    except OSError as err:
        # The error names the endpoint and bucket: the log has it, the page does not.
        log.warning("cannot read artifact file %s: %s", name, err)
        raise ArtifactMissing(
            "the artifact storage cannot be read now; try again later", temporary=True
        ) from err


def why_missing(name: str) -> str:
    """Why the storage has no file ``name``: after a switch to a bucket, most often a file
    still in the folder it was written to."""
    if not in_a_bucket():
        return (
            "it is not in the artifact folder (PEAKWATCH_ARTIFACT_DIR): it was removed, or "
            "written by a worker on another host, which needs a bucket "
            "(PEAKWATCH_ARTIFACT_BUCKET)"
        )
    try:
        left_behind = artifact_folder().exists(name)
    except (SuspiciousFileOperation, OSError):
        left_behind = False
    if left_behind:
        return (
            "it is not copied to the bucket yet: it was written to the artifact folder "
            f"before PEAKWATCH_ARTIFACT_BUCKET was set; run `{COPY_COMMAND}`"
        )
    return (
        "it is in neither the bucket nor the artifact folder: it was removed, or never "
        f"stored; if it was written to another folder, run `{COPY_COMMAND} --from FOLDER`"
    )
