"""The artifact storage of a fleet: an S3 bucket (AWS S3, MinIO, Ceph...) that every worker
writes to and the dashboard reads from (``settings.py``, ``PEAKWATCH_ARTIFACT_BUCKET``)."""

from __future__ import annotations

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError
from django.core.files import File
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

#: What boto3 raises when the bucket cannot be reached or refuses a request.
_S3_ERRORS = (BotoCoreError, ClientError, Boto3Error)


class StreamingS3Storage(S3Storage):
    """django-storages' S3 backend, with two differences.

    A file opened for reading streams the object as it arrives: the stock one downloads it
    whole (into memory, by default) before the first byte is read, which a download or a
    zip of a large ``model.so`` should not wait for.

    A bucket that cannot be read or written fails as a disk would, with an ``OSError``
    (``FileNotFoundError`` for a missing object), so that callers handle both storages
    alike: a worker records its result without the artifact and says why, a page that
    draws a plan shows none.
    """

    def _open(self, name, mode="rb"):
        key = self._normalize_name(clean_name(name))
        try:
            if mode != "rb":
                return super()._open(name, mode)
            found = self.connection.meta.client.get_object(Bucket=self.bucket_name, Key=key)
        except ClientError as err:
            if err.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                raise FileNotFoundError(f"no object {key} in bucket {self.bucket_name}") from err
            raise OSError(f"cannot read {key} from bucket {self.bucket_name}: {err}") from err
        except _S3_ERRORS as err:
            raise OSError(f"cannot read {key} from bucket {self.bucket_name}: {err}") from err
        stream = File(found["Body"])
        # Not seekable, so a FileResponse cannot measure it: the object says its size.
        stream.size = found["ContentLength"]
        return stream

    def _save(self, name, content):
        try:
            return super()._save(name, content)
        except _S3_ERRORS as err:
            raise OSError(f"cannot write {name} to bucket {self.bucket_name}: {err}") from err

    def exists(self, name):
        try:
            return super().exists(name)
        except _S3_ERRORS as err:
            raise OSError(f"cannot look up {name} in bucket {self.bucket_name}: {err}") from err

    def size(self, name):
        try:
            return super().size(name)
        except FileNotFoundError:
            raise
        except _S3_ERRORS as err:
            raise OSError(f"cannot look up {name} in bucket {self.bucket_name}: {err}") from err

    def delete(self, name):
        try:
            super().delete(name)
        except _S3_ERRORS as err:
            raise OSError(f"cannot delete {name} from bucket {self.bucket_name}: {err}") from err
