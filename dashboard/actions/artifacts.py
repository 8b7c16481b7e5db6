"""Artifacts carried over a change of storage: the files of results recorded before
``PEAKWATCH_ARTIFACT_BUCKET`` was set stay in the folder they were written to, under the
names their rows give, until they are copied into the bucket (``manage.py
copy_artifacts``). Results reused from cache are given rows for their source's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.storage import FileSystemStorage
from django.db.models import Exists, F, OuterRef

from dashboard.artifact_storage import artifact_storage, stored_size
from dashboard.models import Artifact

BATCH = 500


class Copy(StrEnum):
    COPIED = "copied"
    #: In the storage already, at the folder's size (or the folder has it no more).
    PRESENT = "already there"
    #: In neither the folder nor the storage.
    MISSING = "not found"


@dataclass(frozen=True)
class CopiedFile:
    name: str
    outcome: Copy
    size: int = 0


def copy_artifact_file(name: str, folder: Path) -> CopiedFile:
    """Put the file ``name`` of ``folder`` into the artifact storage under the same name,
    unless the storage has it at the same size: run again after an interruption, it copies
    what is left, and a copy cut short (a smaller file) again. The folder keeps its file.
    Storage errors are ``OSError``s."""
    source = FileSystemStorage(location=folder)
    try:
        size = source.size(name) if source.exists(name) else None
    except (SuspiciousFileOperation, OSError):
        size = None
    stored = stored_size(name)
    if size is None:
        if stored is None:
            return CopiedFile(name, Copy.MISSING)
        return CopiedFile(name, Copy.PRESENT, stored)
    if stored == size:
        return CopiedFile(name, Copy.PRESENT, size)
    if stored is not None:
        # A folder would save the new copy under another name beside the partial one.
        artifact_storage.delete(name)
    with source.open(name, "rb") as handle:
        saved = artifact_storage.save(name, handle)
    if saved != name:
        raise OSError(f"{name} was stored as {saved}; its rows name {name}")
    return CopiedFile(name, Copy.COPIED, size)


def share_source_artifacts() -> int:
    """Give every result reused from cache a row for each artifact of its source it has
    none of, naming the source's file, as if it had been reused after they were stored
    (they are stored after the source's figures); the number of rows made."""
    missing = (
        Artifact.objects.filter(result__reused_by__isnull=False)
        .annotate(reused=F("result__reused_by"))
        .exclude(Exists(
            Artifact.objects.filter(result_id=OuterRef("reused"), name=OuterRef("name"))
        ))
        .values_list("reused", "name", "file", "size", "content_type")
        .order_by("reused", "name")
    )
    made = 0
    rows = []
    for result_id, name, file, size, content_type in missing.iterator(chunk_size=BATCH):
        rows.append(Artifact(result_id=result_id, name=name, file=file, size=size,
                             content_type=content_type))
        if len(rows) == BATCH:
            made += len(Artifact.objects.bulk_create(rows, ignore_conflicts=True))
            rows = []
    if rows:
        made += len(Artifact.objects.bulk_create(rows, ignore_conflicts=True))
    return made
