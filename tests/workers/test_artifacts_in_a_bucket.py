"""A fleet: a worker on another host (its own folders, none of the dashboard's disk) writes
its artifacts to an S3 bucket; the dashboard serves them from there, and removes them with
their result. The bucket is a real S3-compatible server (moto) in a process of its own.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from dashboard import actions
from dashboard.demo import create_demo_repository
from dashboard.models import Artifact, Result, Run
from tests.conftest import fake_report
from tests.helpers import record_head, stop_process_group
from tests.workers.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "peakwatch-artifacts"
PREFIX = "fleet"
# Path-style addressing: the server is one host name, with no bucket subdomains.
S3_ENV = {
    "PEAKWATCH_ARTIFACT_BUCKET": BUCKET,
    "PEAKWATCH_ARTIFACT_S3_REGION": "us-east-1",
    "PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID": "peakwatch-tests",
    "PEAKWATCH_ARTIFACT_S3_SECRET_ACCESS_KEY": "peakwatch-tests-secret",
    "PEAKWATCH_ARTIFACT_S3_PREFIX": PREFIX,
    "PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE": "path",
}
PRINT_STORAGE = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps(settings.STORAGES['artifacts']))"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def s3_server(tmp_path):
    """An S3-compatible server on 127.0.0.1 with an empty bucket; the environment that
    points Peakwatch at it."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "s3-server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=S3_ENV["PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["PEAKWATCH_ARTIFACT_S3_SECRET_ACCESS_KEY"],
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            break
        except EndpointConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the S3 server did not start: {Path(log.name).read_text()}")
            time.sleep(0.2)
    yield SimpleNamespace(
        client=client, env={**S3_ENV, "PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL": endpoint}
    )
    stop_process_group(proc, timeout=10)
    log.close()


@pytest.fixture
def dashboard_on_the_bucket(s3_server, settings, tmp_path):
    """This process (the dashboard) reads artifacts as the settings make of the same
    environment a deployment would give it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEAKWATCH_ARTIFACT_")}
    env.update(s3_server.env, DJANGO_SETTINGS_MODULE="dashboard.settings",
               PEAKWATCH_DATA_DIR=str(tmp_path / "web-data"))
    proc = subprocess.run([sys.executable, "-c", PRINT_STORAGE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    settings.STORAGES = {**settings.STORAGES, "artifacts": json.loads(proc.stdout)}
    return s3_server


def _keys(s3) -> dict[str, bytes]:
    """Every object in the bucket, by key."""
    listed = s3.client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {
        item["Key"]: s3.client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        for item in listed
    }


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def _download(client, url: str):
    response = client.get(url)
    body = b"".join(response.streaming_content) if response.status_code == 200 else b""
    return response, body


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_worker_on_another_host_writes_artifacts_the_dashboard_serves_and_removes(
    tmp_path, dashboard_on_the_bucket, start_worker, client, settings
):
    s3 = dashboard_on_the_bucket
    create_demo_repository(tmp_path / "repo", [
        ("Track a tiny model", {"small-cnn": {"channels": 4, "resolution": 16, "depth": 2}}),
    ])
    commit = record_head(tmp_path / "repo")
    # Given a worker whose disk is not the dashboard's: its own data and artifact folders,
    # its own working directory, and only the bucket in common.
    host = tmp_path / "gpu-host"
    host.mkdir()
    worker = start_worker(
        extra_env={**s3.env, "PEAKWATCH_DATA_DIR": str(host / "data"),
                   "PEAKWATCH_ARTIFACT_DIR": str(host / "artifacts")},
        cwd=host,
    )

    # When it executes a run,
    run = actions.start_run(commit)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, 300, "the run to finish",
             [worker.log_path])

    # then every artifact it recorded is an object in the bucket, and in neither folder.
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert "workers.tasks.run_on_board" in Path(worker.log_path).read_text()
    results = list(Result.objects.filter(run=run).order_by("pk"))
    artifacts = list(Artifact.objects.filter(result__run=run))
    assert len(results) == 3
    assert all(result.artifact_named("plan.json") for result in results)
    stored = _keys(s3)
    assert set(stored) == {f"{PREFIX}/{artifact.file.name}" for artifact in artifacts}
    assert _files_under(host / "artifacts") == []
    assert _files_under(Path(settings.MEDIA_ROOT)) == []

    # The dashboard serves each one, byte for byte, one by one and zipped by result.
    for artifact in artifacts:
        content = stored[f"{PREFIX}/{artifact.file.name}"]
        response, body = _download(client, artifact.get_absolute_url())
        assert response.status_code == 200, artifact.name
        assert body == content, artifact.name
        assert int(response["Content-Length"]) == len(content) == artifact.size
        assert response["Content-Disposition"].startswith("attachment; filename=")
    for result in results:
        response, body = _download(client, reverse("result-artifacts-zip", args=[result.pk]))
        assert response.status_code == 200
        archive = zipfile.ZipFile(io.BytesIO(body))
        assert {name: archive.read(name) for name in archive.namelist()} == {
            artifact.name: stored[f"{PREFIX}/{artifact.file.name}"]
            for artifact in result.artifacts.all()
        }
    # The plan page reads its plan.json from the bucket too.
    page = client.get(reverse("result-plan", args=[results[0].pk])).content.decode()
    assert 'id="timeline-data"' in page

    # Private mode still guards them: the dashboard, not the bucket, answers.
    settings.PEAKWATCH_PUBLIC = False
    url = artifacts[0].get_absolute_url()
    assert Client().get(url).status_code == 302
    reader = Client()
    reader.force_login(User.objects.create_user("reader"))
    response, body = _download(reader, url)
    assert body == stored[f"{PREFIX}/{artifacts[0].file.name}"]

    # Removing a result removes its objects, and only those; removing the run, the rest.
    doomed = results[0]
    doomed_keys = {f"{PREFIX}/{a.file.name}" for a in doomed.artifacts.all()}
    doomed.delete()
    assert set(_keys(s3)) == set(stored) - doomed_keys
    Run.objects.filter(pk=run.pk).delete()
    assert _keys(s3) == {}


@pytest.mark.django_db
def test_a_download_streams_from_the_bucket_with_its_length(
    dashboard_on_the_bucket, recorded_history, tmp_path, client
):
    result = Result.objects.filter(run=recorded_history[-1]).first()
    library = bytes(range(256)) * 4096
    (tmp_path / "model.so").write_bytes(library)
    artifact = actions.attach_artifact(result, "model.so", tmp_path / "model.so")

    response = client.get(artifact.get_absolute_url())

    assert response.streaming
    assert int(response["Content-Length"]) == len(library)
    assert b"".join(response.streaming_content) == library
    key = f"{PREFIX}/results/{result.run_id}/{result.pk}/model.so"
    assert _keys(dashboard_on_the_bucket) == {key: library}


@pytest.mark.django_db
def test_an_artifact_whose_object_is_gone_is_a_404(
    dashboard_on_the_bucket, recorded_history, tmp_path, client
):
    result = Result.objects.filter(run=recorded_history[-1]).first()
    (tmp_path / "plan.json").write_bytes(b"{}")
    artifact = actions.attach_artifact(result, "plan.json", tmp_path / "plan.json")
    dashboard_on_the_bucket.client.delete_object(
        Bucket=BUCKET, Key=f"{PREFIX}/{artifact.file.name}"
    )

    download = client.get(artifact.get_absolute_url())
    assert download.status_code == 404
    assert "is in neither the bucket nor the artifact folder" in download.content.decode()
    # With nothing else to send, the zip is that 404 too, not an empty zip.
    response = client.get(reverse("result-artifacts-zip", args=[result.pk]))
    assert response.status_code == 404
    assert not response.streaming
    assert f"plan.json of result {result.pk}" in response.content.decode()


@pytest.mark.django_db
def test_a_bucket_out_of_reach_costs_the_artifact_not_the_result(
    recorded_history, tmp_path, settings
):
    # Nothing listens there; one try, not boto3's retries with back-off.
    settings.STORAGES = {**settings.STORAGES, "artifacts": {
        "BACKEND": "dashboard.s3_storage.StreamingS3Storage",
        "OPTIONS": {"bucket_name": BUCKET, "endpoint_url": f"http://127.0.0.1:{_free_port()}",
                    "region_name": "us-east-1", "access_key": "a", "secret_key": "b",
                    "client_config": Config(retries={"total_max_attempts": 1})},
    }}
    (tmp_path / "plan.json").write_bytes(b"{}")
    report = fake_report(50_000, 1.0, artifacts={"plan.json": str(tmp_path / "plan.json")})

    result = actions.record_result(
        recorded_history[-1], model="small-cnn", strategy="none", board="cpu", report=report
    )

    assert result.status == Result.Status.OK
    assert not result.artifacts.exists()
    [warning] = [w for w in result.details["warnings"] if "plan.json" in w]
    assert warning.startswith("artifact plan.json could not be stored: cannot write ")
