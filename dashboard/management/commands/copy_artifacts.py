"""Copy the artifacts written before a change of storage into the storage configured now."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Max, Min

from dashboard.actions import artifacts as actions
from dashboard.artifact_storage import artifact_storage, describe_storage, in_a_bucket
from dashboard.models import Artifact


class Command(BaseCommand):
    help = (
        "Copy every artifact file the rows name from the folder it was written to (by default"
        " PEAKWATCH_ARTIFACT_DIR, where artifacts went before PEAKWATCH_ARTIFACT_BUCKET was"
        " set) into the artifact storage configured now, and give results reused from cache"
        " rows for their source's files. A file the storage has at the same size is skipped,"
        " so an interrupted copy is resumed by running it again. Exits 1 naming the files"
        " found in neither place."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--from", dest="folder", type=Path, default=None,
            help="the folder the files were written to (default: PEAKWATCH_ARTIFACT_DIR, "
            f"now {settings.MEDIA_ROOT})",
        )

    def handle(self, *args, folder: Path | None, verbosity: int, **options):
        folder = Path(folder or settings.MEDIA_ROOT).resolve()
        shared = actions.share_source_artifacts()
        if shared:
            self.stdout.write(f"gave {shared} rows of results reused from cache their "
                              "source's files")
        if not in_a_bucket() and Path(artifact_storage.location).resolve() == folder:
            self.stdout.write(
                f"artifacts are stored in {folder} already: nothing to copy (set "
                "PEAKWATCH_ARTIFACT_BUCKET, or name another folder with --from)"
            )
            return
        # One line per file, however many rows (a result and those reusing it) name it.
        files = (
            Artifact.objects.exclude(file="").values("file")
            .annotate(size=Max("size"), result=Min("result_id"), name=Min("name"))
            .order_by("file")
        )
        total, total_bytes = files.count(), sum(row["size"] for row in files.iterator())
        self.stdout.write(
            f"copying {total} files ({total_bytes:,} bytes) from {folder} into "
            f"{describe_storage()}"
        )
        done_bytes, counts, not_found = 0, dict.fromkeys(actions.Copy, 0), []
        for number, row in enumerate(files.iterator(), 1):
            try:
                copied = actions.copy_artifact_file(row["file"], folder)
            except OSError as err:
                raise CommandError(
                    f"stopped at {number} of {total}: {err}; run it again to go on"
                ) from err
            counts[copied.outcome] += 1
            done_bytes += copied.size or row["size"]
            if copied.outcome == actions.Copy.MISSING:
                not_found.append(f"{row['file']} ({row['name']} of result {row['result']})")
            if verbosity >= 1:
                self.stdout.write(
                    f"[{number}/{total}] {copied.outcome}: {row['file']} "
                    f"({copied.size:,} bytes; {done_bytes:,} of {total_bytes:,})"
                )
        self.stdout.write(
            f"{counts[actions.Copy.COPIED]} copied, {counts[actions.Copy.PRESENT]} already "
            f"there, {counts[actions.Copy.MISSING]} not found, of {total} files"
        )
        if not_found:
            raise CommandError(
                f"{len(not_found)} files are in neither {folder} nor {describe_storage()}; "
                "their downloads answer 404 until they are put there:\n  "
                + "\n  ".join(not_found)
            )
