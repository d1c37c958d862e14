"""Session files: a ``FILE#`` row per file, a ``FILES`` totals row, and the bytes in the blob bucket.

The limits must hold however many uploads race, so the totals row moves in
the same transaction that puts the file's row, on the condition that the
count and the bytes stay within the limits; a losing upload writes no row and
its bytes are removed again. The bytes go first (under a key of the file's
fresh id), so every listed file can be read. Rows live in the session's
partition and the bytes under its blob prefix: deleting the session takes both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop.errors import NotConfiguredError, NotFoundError
from skyloop.models.session import SessionFile
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, cancellation_codes, error_code

if TYPE_CHECKING:
    from skyloop.store.blobs import BlobStore
    from skyloop.store.records import FileLimits

FILE_FIELDS = tuple(SessionFile.model_fields)


class FileRecords(TableBase):
    def _file_blobs(self) -> BlobStore:
        if self.blobs is None:
            raise NotConfiguredError("this deployment has no blob bucket for session files")
        return self.blobs

    def add_file(self, file: SessionFile, data: bytes, limits: FileLimits) -> None:
        """Store the bytes, then the row and the totals in one conditional transaction."""
        blobs = self._file_blobs()
        if self._get(keys.session_key(file.session_id), projection=["pk"]) is None:
            raise NotFoundError(f"Session not found: '{file.session_id}'")
        limits.check(self.file_totals(file.session_id), file.bytes)  # early, before the upload
        blob = keys.file_blob_key(file.session_id, file.id)
        blobs.put(blob, data, content_type=file.content_type)
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": codec.to_item(keys.file_totals_key(file.session_id)),
                            "UpdateExpression": "ADD file_count :one, file_bytes :n",
                            "ConditionExpression": (
                                "(attribute_not_exists(file_count) OR file_count < :max_count) AND "
                                "(attribute_not_exists(file_bytes) OR file_bytes <= :room)"
                            ),
                            "ExpressionAttributeValues": {
                                ":one": codec.attr(1),
                                ":n": codec.attr(file.bytes),
                                ":max_count": codec.attr(limits.max_files),
                                ":room": codec.attr(limits.max_total_bytes - file.bytes),
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": codec.to_item(
                                {
                                    **keys.file_key(file.session_id, file.id),
                                    "kind": "file",
                                    **file.model_dump(mode="json"),
                                }
                            ),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            blobs.delete(blob)
            if error_code(exc) == "TransactionCanceledException" and cancellation_codes(exc)[:1] == [
                "ConditionalCheckFailed"
            ]:
                limits.check(self.file_totals(file.session_id), file.bytes)
            raise
        if self._get(keys.session_key(file.session_id), projection=["pk"]) is None:
            # The session was deleted meanwhile: its delete removed the row before reading the
            # partition, so either it saw this file or this check sees it gone. Leave nothing behind.
            self._delete_keys([codec.to_item(keys.file_key(file.session_id, file.id))])
            blobs.delete(blob)
            raise NotFoundError(f"Session not found: '{file.session_id}'")

    def file_totals(self, session_id: str) -> tuple[int, int]:
        """How many files the session holds and their bytes."""
        attrs = self._get(keys.file_totals_key(session_id)) or {}
        return int(attrs.get("file_count", 0)), int(attrs.get("file_bytes", 0))

    def get_file(self, session_id: str, file_id: str) -> SessionFile | None:
        attrs = self._get(keys.file_key(session_id, file_id))
        return _file_from(attrs) if attrs is not None else None

    def read_file(self, file: SessionFile) -> bytes:
        try:
            return self._file_blobs().get(keys.file_blob_key(file.session_id, file.id))
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                raise NotFoundError(f"File not found: '{file.id}'") from exc
            raise

    def list_files(self, session_id: str) -> list[SessionFile]:
        """The session's files, oldest first."""
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :f)",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.session_pk(session_id)),
                    ":f": codec.attr(keys.FILE_PREFIX),
                },
                "ConsistentRead": True,
            }
        )
        return sorted((_file_from(r) for r in rows), key=lambda f: (f.created_at, f.id))

    def delete_file(self, session_id: str, file_id: str) -> SessionFile | None:
        """Remove the row and give its count and bytes back, once; then the bytes. None if absent."""
        found = self.get_file(session_id, file_id)
        if found is None:
            return None
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": codec.to_item(keys.file_key(session_id, file_id)),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": codec.to_item(keys.file_totals_key(session_id)),
                            "UpdateExpression": "ADD file_count :minus_one, file_bytes :minus_n",
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": {
                                ":minus_one": codec.attr(-1),
                                ":minus_n": codec.attr(-found.bytes),
                            },
                        }
                    },
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and "ConditionalCheckFailed" in (
                cancellation_codes(exc)
            ):
                return None  # a concurrent delete won
            raise
        self._file_blobs().delete(keys.file_blob_key(session_id, file_id))
        return found


def _file_from(attrs: dict[str, Any]) -> SessionFile:
    return SessionFile.model_validate({k: v for k, v in attrs.items() if k in FILE_FIELDS})
