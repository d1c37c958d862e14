"""What every part of the DynamoDB store shares: the client, the table, reads and error mapping."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from skyloop.errors import PayloadTooLargeError
from skyloop.store import codec
from skyloop.store.blobs import INLINE_MAX_BYTES, NO_BUCKET_MAX_BYTES, BlobStore, blob_key


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancellation_codes(exc: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction (``"None"`` for items that did not fail)."""
    reasons = exc.response.get("CancellationReasons") or []
    return [str(r.get("Code") or "None") for r in reasons]


class TableBase:
    """The table and the low-level reads shared by every record kind.

    Args:
        table_name: the table.
        client: a ready ``boto3`` DynamoDB client (tests pass a moto-backed one).
        event_ttl_s: how long stream events and dedupe markers stay.
        blobs: where texts too large for an item go (the stack's bucket); without it they must fit.
    """

    def __init__(
        self, table_name: str, client: Any, *, event_ttl_s: int = 24 * 3600, blobs: BlobStore | None = None
    ) -> None:
        self.table = table_name
        self.client = client
        self.event_ttl_s = event_ttl_s
        self.blobs = blobs

    def _text_out(self, name: str, text: str, prefix: str) -> dict[str, Any]:
        """The attribute(s) that store ``text`` as ``name``: inline, or a key to the blob holding it."""
        data = text.encode()
        if len(data) <= INLINE_MAX_BYTES:
            return {name: text}
        if self.blobs is None:
            if len(data) <= NO_BUCKET_MAX_BYTES:
                return {name: text}
            raise PayloadTooLargeError(
                f"{name} is {len(data)} bytes of UTF-8; without a blob bucket at most {NO_BUCKET_MAX_BYTES} fit"
            )
        key = blob_key(prefix, data)
        self.blobs.put(key, data)
        return {f"{name}_blob": key}

    def _text_in(self, attrs: dict[str, Any], name: str) -> str | None:
        """The text stored as ``name`` (resolving a blob key), or None when there is none."""
        if name in attrs:
            return str(attrs[name])
        key = attrs.get(f"{name}_blob")
        if key is None:
            return None
        if self.blobs is None:
            raise RuntimeError(f"{name} is stored in a blob but this store has no blob bucket")
        return self.blobs.get(str(key)).decode()

    def _get(self, key: dict[str, str], *, projection: list[str] | None = None) -> dict[str, Any] | None:
        kwargs: dict[str, Any] = {"TableName": self.table, "Key": codec.to_item(key), "ConsistentRead": True}
        if projection:
            kwargs["ProjectionExpression"] = ", ".join(f"#p{i}" for i in range(len(projection)))
            kwargs["ExpressionAttributeNames"] = {f"#p{i}": name for i, name in enumerate(projection)}
        item = self.client.get_item(**kwargs).get("Item")
        return codec.from_item(item) if item is not None else None

    def _query_all(self, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of a query, across pages, as plain values."""
        out: list[dict[str, Any]] = []
        while True:
            r = self.client.query(**kwargs)
            out.extend(codec.from_item(i) for i in r.get("Items", []))
            if "LastEvaluatedKey" not in r:
                return out
            kwargs = {**kwargs, "ExclusiveStartKey": r["LastEvaluatedKey"]}

    def _query_page(self, kwargs: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` raw items (the extra one tells ``has_more``), across pages and filters."""
        out: list[dict[str, Any]] = []
        while True:
            r = self.client.query(**kwargs, Limit=limit + 1 - len(out))
            out.extend(r.get("Items", []))
            if len(out) > limit or "LastEvaluatedKey" not in r:
                return out
            kwargs = {**kwargs, "ExclusiveStartKey": r["LastEvaluatedKey"]}

    def _put_new(self, item: dict[str, Any]) -> bool:
        """Put an item that must not exist yet; False when it did."""
        try:
            self.client.put_item(
                TableName=self.table, Item=codec.to_item(item), ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _put_rows(self, rows: list[dict[str, Any]]) -> None:
        """Put raw items in batches of 25, retrying what DynamoDB leaves unprocessed."""
        for start in range(0, len(rows), 25):
            requests = [{"PutRequest": {"Item": r}} for r in rows[start : start + 25]]
            while requests:
                out = self.client.batch_write_item(RequestItems={self.table: requests})
                requests = out.get("UnprocessedItems", {}).get(self.table, [])

    def _delete_keys(self, keys: list[dict[str, Any]]) -> None:
        """Delete raw keys in batches of 25, retrying what DynamoDB leaves unprocessed."""
        for start in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
            while requests:
                out = self.client.batch_write_item(RequestItems={self.table: requests})
                requests = out.get("UnprocessedItems", {}).get(self.table, [])
