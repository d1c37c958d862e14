"""Large text kept beside the table: what does not fit comfortably in a DynamoDB item goes to S3.

DynamoDB items are capped at 400 KB and a transaction at 4 MB, while the API
accepts a 200,000-character tool output (up to 800 KB of UTF-8), message
blocks of 100,000 characters, and long tool lists; a model may write any
amount. So any text attribute over :data:`INLINE_MAX_BYTES` is written to the
stack's bucket under a content-addressed key (a retried write puts the same
object) and the item keeps only that key. Reads resolve it; deleting a
session deletes its prefix.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Protocol

INLINE_MAX_BYTES = 32 * 1024  # larger texts go to the bucket; keeps items (and transactions) small
NO_BUCKET_MAX_BYTES = 350 * 1024  # without a bucket, what still fits in one item


class BlobStore(Protocol):
    def put(self, key: str, data: bytes, *, content_type: str = ...) -> None: ...
    def get(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...
    def delete_prefix(self, prefix: str) -> None: ...


def blob_key(prefix: str, data: bytes) -> str:
    return f"{prefix}{hashlib.sha256(data).hexdigest()}"


class S3Blobs:
    """Blobs in one S3 bucket (moto's S3 in the local stack).

    Args:
        client: a ready ``boto3`` S3 client, or a function that makes one, called on
            first use: building an S3 client loads botocore's largest service model
            (tens of milliseconds and ~30 MB), and most requests never touch a blob.
        bucket: the stack's blob bucket.
    """

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.bucket = bucket

    @property
    def client(self) -> Any:
        if callable(self._client):
            with self._lock:
                if callable(self._client):
                    self._client = self._client()
        return self._client

    def put(self, key: str, data: bytes, *, content_type: str = "application/json") -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def get(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def delete_prefix(self, prefix: str) -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for start in range(0, len(keys), 1000):
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys[start : start + 1000]})
