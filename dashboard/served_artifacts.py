"""The artifacts a page serves for a result, and why one cannot be served.

A result reused from cache shares its source's files: its rows are copied from the
source's when it is recorded. The source's artifacts are stored after its figures, so a
result reused in between has no rows of its own, and a source whose file was stored again
names a newer file than the reuse copied. Either way the source's files are the reused
result's too, and its downloads, zip, plan and plan diffs read them.
"""

from __future__ import annotations

from dashboard.artifact_storage import ArtifactMissing, open_artifact
from dashboard.models import Artifact, Result

#: Results reused from reused results: a chain this long is a loop in the rows.
MAX_SOURCES = 10


def source_ids(result: Result) -> list[int]:
    """The results ``result`` was reused from, nearest first (none unless it was reused)."""
    return _sources_from(result.reused_from_id)


def _sources_from(source: int | None) -> list[int]:
    found: list[int] = []
    while source is not None and source not in found and len(found) < MAX_SOURCES:
        found.append(source)
        source = Result.objects.filter(pk=source).values_list("reused_from", flat=True).first()
    return found


def artifacts_of(result: Result) -> list[Artifact]:
    """``result``'s artifacts by name: its own, then its sources' for names it lacks."""
    served = {artifact.name: artifact for artifact in result.artifacts.all()}
    if result.reused_from_id is not None:
        for source in source_ids(result):
            for artifact in Artifact.objects.filter(result_id=source).exclude(
                name__in=list(served)
            ):
                served[artifact.name] = artifact
    return sorted(served.values(), key=lambda artifact: artifact.name)


def artifact_of(result: Result, name: str) -> Artifact | None:
    """``result``'s artifact ``name``, or its source's (see ``artifacts_of``)."""
    artifact = result.artifact_named(name)
    if artifact is not None or result.reused_from_id is None:
        return artifact
    for source in source_ids(result):
        artifact = Artifact.objects.filter(result_id=source, name=name).first()
        if artifact is not None:
            return artifact
    return None


def open_served(artifact: Artifact):
    """``artifact``'s file, opened for reading: where it is missing and its result was
    reused, the file its source now names for it. ``ArtifactMissing`` when neither is."""
    try:
        return open_artifact(artifact.file.name)
    except ArtifactMissing as missing:
        if missing.temporary:
            raise
        sources = _sources_from(
            Result.objects.filter(pk=artifact.result_id)
            .values_list("reused_from", flat=True).first()
        )
        others = (
            Artifact.objects.filter(result_id__in=sources, name=artifact.name)
            .exclude(file=artifact.file.name).values_list("file", flat=True)
        )
        for name in others:
            try:
                return open_artifact(name)
            except ArtifactMissing:
                continue
        raise


def missing_text(artifact: Artifact, missing: ArtifactMissing) -> str:
    """One line for a page, an API client or a zip's MISSING.txt."""
    return (
        f"{artifact.name} of result {artifact.result_id} ({artifact.file.name or 'no file'}) "
        f"cannot be served: {missing.why}"
    )
