"""Artifacts live in the "artifacts" storage: a folder, or an S3 bucket named by the
environment; removing their rows (with a result, run or repository) removes their files.

A worker on another host writing to a bucket the dashboard serves from:
tests/workers/test_artifacts_in_a_bucket.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import transaction

from dashboard import actions
from dashboard.models import Artifact, Result, Run

ROOT = Path(__file__).resolve().parents[2]


def _attach(result: Result, tmp_path, name: str, content: bytes) -> Artifact:
    path = tmp_path / f"{result.pk}-{name}"
    path.write_bytes(content)
    return actions.attach_artifact(result, name, path)


def _result(run: Run, model="small-cnn", strategy="none") -> Result:
    return Result.objects.get(run=run, model__name=model, strategy__name=strategy)


def _files(settings) -> list[Path]:
    return sorted(p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file())


# --- removal -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_deleting_a_result_removes_its_artifact_files(
    recorded_history, tmp_path, settings
):
    result = _result(recorded_history[-1])
    kept = _attach(_result(recorded_history[-1], strategy="tvm-stock"), tmp_path, "plan.json",
                   b"{}")
    plan = _attach(result, tmp_path, "plan.json", b'{"tensors": []}')
    library = _attach(result, tmp_path, "model.so", b"\x7fELF")
    gone = [Path(plan.file.path), Path(library.file.path)]

    result.delete()

    assert not any(path.exists() for path in gone)
    assert _files(settings) == [Path(kept.file.path)]


@pytest.mark.django_db(transaction=True)
def test_deleting_a_run_removes_the_files_of_every_result(
    recorded_history, tmp_path, settings
):
    run = recorded_history[-1]
    for result in Result.objects.filter(run=run):
        _attach(result, tmp_path, "plan.json", b"{}")
    other = _attach(_result(recorded_history[0]), tmp_path, "plan.json", b"{}")

    Run.objects.filter(pk=run.pk).delete()

    assert _files(settings) == [Path(other.file.path)]


@pytest.mark.django_db(transaction=True)
def test_a_file_a_reused_result_shares_stays_until_no_row_names_it(
    recorded_history, tmp_path, settings
):
    source = _result(recorded_history[-2])
    artifact = _attach(source, tmp_path, "plan.json", b'{"strategy": "none"}')
    shared = Path(artifact.file.path)
    # The next commit compiled nothing new: its result points at the source's file.
    Result.objects.filter(run=recorded_history[-1], strategy__name="none").delete()
    reused = actions.reuse_result(
        recorded_history[-1], model="small-cnn", strategy="none", board="cpu", source=source
    )

    source.delete()

    assert shared.exists()
    assert reused.artifact_named("plan.json").file.read() == b'{"strategy": "none"}'

    reused.delete()

    assert not shared.exists()


@pytest.mark.django_db(transaction=True)
def test_replacing_a_reused_results_artifact_keeps_its_sources_file(
    recorded_history, tmp_path
):
    source = _result(recorded_history[-2])
    shared = Path(_attach(source, tmp_path, "plan.json", b"{}").file.path)
    Result.objects.filter(run=recorded_history[-1], strategy__name="none").delete()
    reused = actions.reuse_result(
        recorded_history[-1], model="small-cnn", strategy="none", board="cpu", source=source
    )

    # A redelivery compiled it after all: its own file, not the source's, is replaced.
    _attach(reused, tmp_path, "plan.json", b'{"own": true}')

    assert shared.read_bytes() == b"{}"
    assert reused.artifact_named("plan.json").file.read() == b'{"own": true}'


@pytest.mark.django_db(transaction=True)
def test_a_removal_rolled_back_keeps_the_files(
    recorded_history, tmp_path
):
    result = _result(recorded_history[-1])
    artifact = _attach(result, tmp_path, "plan.json", b"{}")
    path = Path(artifact.file.path)

    with pytest.raises(RuntimeError), transaction.atomic():
        result.delete()
        raise RuntimeError("changed our mind")

    assert Artifact.objects.filter(pk=artifact.pk).exists()
    assert path.exists()


# --- settings ------------------------------------------------------------------------------

PRINT_STORAGE = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps(settings.STORAGES['artifacts'], default=str))"
)
S3_VARIABLES = ("PEAKWATCH_ARTIFACT_BUCKET", "PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL",
                "PEAKWATCH_ARTIFACT_S3_REGION", "PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID",
                "PEAKWATCH_ARTIFACT_S3_SECRET_ACCESS_KEY", "PEAKWATCH_ARTIFACT_S3_PREFIX",
                "PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE")


def _settings(tmp_path, **variables) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in S3_VARIABLES}
    env.update(DJANGO_SETTINGS_MODULE="tests.settings", PEAKWATCH_DATA_DIR=str(tmp_path),
               **variables)
    return subprocess.run([sys.executable, "-c", PRINT_STORAGE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_without_a_bucket_artifacts_stay_in_the_artifact_folder(tmp_path):
    proc = _settings(tmp_path, PEAKWATCH_ARTIFACT_DIR=str(tmp_path / "artifacts"))

    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {
        "BACKEND": "django.core.files.storage.FileSystemStorage"
    }


def test_a_bucket_in_the_environment_sends_artifacts_to_s3(tmp_path):
    proc = _settings(
        tmp_path,
        PEAKWATCH_ARTIFACT_BUCKET="peakwatch-artifacts",
        PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL="http://minio.internal:9000",
        PEAKWATCH_ARTIFACT_S3_REGION="eu-west-1",
        PEAKWATCH_ARTIFACT_S3_PREFIX="/fleet/",
        PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE="path",
    )

    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {
        "BACKEND": "dashboard.s3_storage.StreamingS3Storage",
        "OPTIONS": {
            "bucket_name": "peakwatch-artifacts",
            "default_acl": None,
            "endpoint_url": "http://minio.internal:9000",
            "region_name": "eu-west-1",
            "location": "fleet",
            "addressing_style": "path",
        },
    }


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL": "http://minio.internal:9000"},
         "PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL set without PEAKWATCH_ARTIFACT_BUCKET"),
        ({"PEAKWATCH_ARTIFACT_BUCKET": "b", "PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID": "id"},
         "are set together or not at all"),
        ({"PEAKWATCH_ARTIFACT_BUCKET": "b", "PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE": "dns"},
         "is not one of auto, path, virtual"),
    ],
)
def test_it_refuses_s3_settings_that_cannot_work(tmp_path, variables, message):
    proc = _settings(tmp_path, **variables)

    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr
    assert message in proc.stderr
