"""Artifacts survive a switch from a folder to a bucket: ``manage.py copy_artifacts`` copies
the files written before it (resumable, idempotent, with progress), results reused from
cache serve their source's files, and a file that is missing says why, on the pages and to
the API, never as an empty zip.

The bucket is moto's S3 server in a process of its own (the fixture of
tests/workers/test_artifacts_in_a_bucket.py); no worker runs here.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from dashboard import actions
from dashboard.actions import artifacts as artifact_actions
from dashboard.models import Result, Run
from tests.workers import test_artifacts_in_a_bucket as in_a_bucket

# The bucket's fixtures, found by pytest under these names.
s3_server = in_a_bucket.s3_server
dashboard_on_the_bucket = in_a_bucket.dashboard_on_the_bucket
BUCKET, PREFIX, _keys = in_a_bucket.BUCKET, in_a_bucket.PREFIX, in_a_bucket._keys

PLAN = {
    "arena_bytes": 800,
    "tensors": [
        {"id": "conv_out", "shape": [1, 8], "dtype": "float32", "size": 500, "lower": 0,
         "upper": 4, "offset": 0, "producer": "fused_conv2d"},
        {"id": "relu_out", "shape": [1, 8], "dtype": "float32", "size": 300, "lower": 2,
         "upper": 3, "offset": 500, "producer": "relu"},
    ],
}
LIBRARY = bytes(range(256)) * 64


def _result(run: Run, strategy="none") -> Result:
    return Result.objects.get(run=run, model__name="small-cnn", strategy__name=strategy)


def _attach(result: Result, tmp_path: Path, name: str, content: bytes):
    path = tmp_path / f"{result.pk}-{name}"
    path.write_bytes(content)
    return actions.attach_artifact(result, name, path)


def _reuse(run: Run, source: Result) -> Result:
    """``run``'s small-cnn / none, reused from ``source`` as the compile cache does."""
    Result.objects.filter(run=run, model__name="small-cnn", strategy__name="none").delete()
    return actions.reuse_result(run, model="small-cnn", strategy="none", board="cpu",
                                source=source)


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _copy(*args) -> str:
    out = io.StringIO()
    call_command("copy_artifacts", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def history_in_a_folder(dashboard_on_the_bucket, recorded_history, settings, tmp_path):
    """Results recorded while artifacts went to the artifact folder (two plans, a library,
    a result reused from cache), then the bucket configured: the folder keeps the files."""
    bucket = settings.STORAGES["artifacts"]
    settings.STORAGES = {**settings.STORAGES, "artifacts": {
        "BACKEND": "django.core.files.storage.FileSystemStorage"}}
    source, base = _result(recorded_history[-2]), _result(recorded_history[-2], "tvm-stock")
    _attach(source, tmp_path, "plan.json", json.dumps(PLAN).encode())
    _attach(source, tmp_path, "model.so", LIBRARY)
    _attach(base, tmp_path, "plan.json", json.dumps({**PLAN, "arena_bytes": 900}).encode())
    reused = _reuse(recorded_history[-1], source)
    settings.STORAGES = {**settings.STORAGES, "artifacts": bucket}
    return {"source": source, "base": base, "reused": reused,
            "s3": dashboard_on_the_bucket}


# --- before the copy: every missing file says why ------------------------------------------


@pytest.mark.django_db
def test_a_file_left_in_the_folder_says_to_run_the_copy_command(history_in_a_folder, client):
    library = history_in_a_folder["source"].artifact_named("model.so")

    response = client.get(library.get_absolute_url())

    assert response.status_code == 404
    body = _body(response).decode()
    assert f"model.so of result {library.result_id}" in body
    assert "not copied to the bucket yet" in body
    assert "python3 manage.py copy_artifacts" in body
    # Through the API's link too: the same answer for a script.
    api = client.get(reverse("api:result-detail", args=[library.result_id])).json()
    [listed] = [a for a in api["artifacts"] if a["name"] == "model.so"]
    assert client.get(listed["download_url"]).status_code == 404


@pytest.mark.django_db
def test_a_zip_of_files_none_of_which_is_there_is_a_404_not_an_empty_zip(
    history_in_a_folder, client
):
    for result in (history_in_a_folder["source"], history_in_a_folder["reused"]):
        response = client.get(reverse("result-artifacts-zip", args=[result.pk]))

        assert response.status_code == 404
        assert response["Content-Type"].startswith("text/plain")
        body = _body(response).decode()
        assert body.count("not copied to the bucket yet") == 2, body
        assert "plan.json of result" in body and "model.so of result" in body


@pytest.mark.django_db
def test_the_plan_and_the_plan_diff_say_which_plan_is_missing(history_in_a_folder, client):
    base, head = history_in_a_folder["base"], history_in_a_folder["reused"]

    plan_page = client.get(reverse("result-plan", args=[head.pk])).content.decode()
    diff = client.get(reverse("plan-diff", args=[base.pk, head.pk]))
    diff_json = client.get(reverse("plan-diff-json", args=[base.pk, head.pk]))

    assert "No plan to draw: plan.json of result" in plan_page
    assert "not copied to the bucket yet" in plan_page
    assert diff.status_code == 404
    page = diff.content.decode()
    assert "data-plan-missing" in page and 'data-missing-side="base"' in page
    assert 'data-missing-side="head"' in page
    assert "run `python3 manage.py copy_artifacts`" in page
    assert diff_json.status_code == 404
    answer = diff_json.json()
    assert set(answer["missing"]) == {"base", "head"}
    assert "not copied to the bucket yet" in answer["missing"]["head"]


# --- the copy --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_copy_puts_every_file_in_the_bucket_and_the_pages_serve_them(
    history_in_a_folder, client, settings
):
    s3, source = history_in_a_folder["s3"], history_in_a_folder["source"]
    base, reused = history_in_a_folder["base"], history_in_a_folder["reused"]

    out = _copy()

    # Three files, however many rows share them (the reused result names its source's).
    assert f"copying 3 files ({len(LIBRARY) + 2 * len(json.dumps(PLAN)):,}" in out
    assert "[1/3] copied: results/" in out and "[3/3] copied: results/" in out
    assert "3 copied, 0 already there, 0 not found, of 3 files" in out
    stored = _keys(s3)
    assert stored[f"{PREFIX}/{source.artifact_named('model.so').file.name}"] == LIBRARY
    # The folder keeps its files: the copy is safe to repeat, or to undo by unsetting.
    assert len([p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]) == 3

    library = reused.artifact_named("model.so")
    response = client.get(library.get_absolute_url())
    assert response.status_code == 200
    assert _body(response) == LIBRARY
    assert int(response["Content-Length"]) == len(LIBRARY)
    archive = zipfile.ZipFile(io.BytesIO(
        _body(client.get(reverse("result-artifacts-zip", args=[reused.pk])))
    ))
    assert sorted(archive.namelist()) == ["model.so", "plan.json"]
    assert json.loads(archive.read("plan.json")) == PLAN
    diff = client.get(reverse("plan-diff-json", args=[base.pk, reused.pk]))
    assert diff.status_code == 200
    assert diff.json()["head_result"] == reused.pk


@pytest.mark.django_db
def test_the_copy_run_again_copies_nothing(history_in_a_folder):
    _copy()
    before = _keys(history_in_a_folder["s3"])

    out = _copy()

    assert "0 copied, 3 already there, 0 not found, of 3 files" in out
    assert "[2/3] already there: results/" in out
    assert _keys(history_in_a_folder["s3"]) == before


@pytest.mark.django_db
def test_an_interrupted_copy_goes_on_where_it_stopped(history_in_a_folder, monkeypatch):
    s3, source = history_in_a_folder["s3"], history_in_a_folder["source"]
    real, calls = artifact_actions.copy_artifact_file, []

    def cut_at_the_second(name, folder):
        calls.append(name)
        if len(calls) == 2:
            raise OSError("connection reset")
        return real(name, folder)

    monkeypatch.setattr(artifact_actions, "copy_artifact_file", cut_at_the_second)
    with pytest.raises(CommandError, match=r"stopped at 2 of 3: connection reset; run it"):
        _copy()
    monkeypatch.setattr(artifact_actions, "copy_artifact_file", real)
    assert len(_keys(s3)) == 1
    # A copy cut short in the bucket (a smaller object) is copied again.
    library = source.artifact_named("model.so").file.name
    s3.client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{library}", Body=LIBRARY[:100])

    out = _copy()

    assert "1 already there" in out and "2 copied" in out
    assert _keys(s3)[f"{PREFIX}/{library}"] == LIBRARY


@pytest.mark.django_db
def test_files_in_neither_place_fail_the_copy_naming_them(history_in_a_folder, settings):
    library = history_in_a_folder["source"].artifact_named("model.so")
    (Path(settings.MEDIA_ROOT) / library.file.name).unlink()
    out = io.StringIO()

    with pytest.raises(CommandError) as failed:
        call_command("copy_artifacts", stdout=out)

    assert "2 copied, 0 already there, 1 not found" in out.getvalue()
    message = str(failed.value)
    assert message.startswith("1 files are in neither ")
    assert f"{library.file.name} (model.so of result {library.result_id})" in message
    assert len(_keys(history_in_a_folder["s3"])) == 2


@pytest.mark.django_db
def test_the_copy_reads_another_folder_when_told(history_in_a_folder, settings, tmp_path):
    moved = tmp_path / "old-artifacts"
    Path(settings.MEDIA_ROOT).rename(moved)

    out = _copy("--from", str(moved))

    assert "3 copied" in out
    assert len(_keys(history_in_a_folder["s3"])) == 3


# --- reused results ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_result_reused_before_its_source_stored_artifacts_serves_the_sources(
    recorded_history, tmp_path, client
):
    # Given a result reused while its source's files were still being stored,
    source = _result(recorded_history[-2])
    reused = _reuse(recorded_history[-1], source)
    _attach(source, tmp_path, "plan.json", json.dumps(PLAN).encode())
    _attach(source, tmp_path, "model.so", LIBRARY)
    base = _result(recorded_history[-1], "tvm-stock")
    _attach(base, tmp_path, "plan.json", json.dumps(PLAN).encode())
    assert not reused.artifacts.exists()

    # its zip, its plan and its plan diffs read the source's files.
    archive = zipfile.ZipFile(io.BytesIO(
        _body(client.get(reverse("result-artifacts-zip", args=[reused.pk])))
    ))
    assert archive.read("model.so") == LIBRARY
    page = client.get(reverse("result-plan", args=[reused.pk])).content.decode()
    assert 'id="timeline-data"' in page
    assert "(the files of the result it reused)" in page
    assert client.get(reverse("plan-diff", args=[base.pk, reused.pk])).status_code == 200

    # The copy command gives it rows of its own, naming the source's files.
    out = _copy()

    assert "gave 2 rows of results reused from cache their source's files" in out
    assert "artifacts are stored in " in out and "nothing to copy" in out
    assert {a.name: a.file.name for a in reused.artifacts.all()} == {
        a.name: a.file.name for a in source.artifacts.all()
    }
    run_page = client.get(reverse("run-results", args=[recorded_history[-1].pk]))
    assert reused.artifact_named("model.so").get_absolute_url() in run_page.content.decode()
    assert "gave" not in _copy()


@pytest.mark.django_db
def test_a_reused_result_whose_shared_file_is_gone_serves_its_sources_newer_one(
    recorded_history, tmp_path, client
):
    source = _result(recorded_history[-2])
    _attach(source, tmp_path, "model.so", b"old library")
    reused = _reuse(recorded_history[-1], source)
    # The source's file was stored again (a redelivery) and the old one then lost.
    old = reused.artifact_named("model.so")
    _attach(source, tmp_path, "model.so", LIBRARY)
    old.file.storage.delete(old.file.name)

    response = client.get(old.get_absolute_url())

    assert response.status_code == 200
    assert _body(response) == LIBRARY


# --- a folder -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_file_gone_from_the_folder_says_so(recorded_history, tmp_path, client):
    result = _result(recorded_history[-1])
    artifact = _attach(result, tmp_path, "plan.json", json.dumps(PLAN).encode())
    artifact.file.storage.delete(artifact.file.name)

    download = client.get(artifact.get_absolute_url())
    plan_page = client.get(reverse("result-plan", args=[result.pk])).content.decode()

    assert download.status_code == 404
    assert "is not in the artifact folder (PEAKWATCH_ARTIFACT_DIR)" in download.content.decode()
    assert "No plan to draw: plan.json of result" in plan_page
