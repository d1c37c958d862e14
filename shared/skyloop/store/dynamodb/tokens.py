"""Bearer tokens: only their SHA-256 hashes are stored, listed per owner."""

from __future__ import annotations

from typing import Any

from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase
from skyloop.store.records import TokenRecord


def _token_from(attrs: dict[str, Any]) -> TokenRecord:
    return TokenRecord(
        token_hash=attrs["token_hash"],
        id=attrs["id"],
        name=attrs["name"],
        created_at=int(attrs["created_at"]),
        owner=attrs.get("owner") or keys.DEFAULT_OWNER,
        # tokens minted before scopes existed could do everything but admin
        scopes=tuple(attrs.get("scopes") or ("read", "write")),
    )


class TokenRecords(TableBase):
    def put_token(self, token: TokenRecord) -> None:
        item = {
            **keys.token_key(token.token_hash),
            "kind": "token",
            "token_hash": token.token_hash,
            "id": token.id,
            "name": token.name,
            "owner": token.owner,
            "scopes": list(token.scopes),
            "created_at": token.created_at,
            keys.OWNER_KEY: keys.owner_index_value("token", token.owner),
            keys.CREATED_KEY: keys.created_key(token.created_at, token.id),
        }
        if not self._put_new(item):
            from skyloop.errors import ConflictError

            raise ConflictError("that token already exists")

    def get_token(self, token_hash: str) -> TokenRecord | None:
        attrs = self._get(keys.token_key(token_hash))
        return _token_from(attrs) if attrs is not None else None

    def list_tokens(self, *, owner: str | None = None) -> list[TokenRecord]:
        """An owner's tokens, or (``owner=None``) every token of the table, oldest first."""
        if owner is None:
            rows: list[dict[str, Any]] = []
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "FilterExpression": "kind = :k",
                "ExpressionAttributeValues": {":k": codec.attr("token")},
            }
            while True:
                r = self.client.scan(**kwargs)
                rows.extend(codec.from_item(i) for i in r.get("Items", []))
                if "LastEvaluatedKey" not in r:
                    break
                kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]
            return sorted((_token_from(a) for a in rows), key=lambda t: (t.created_at, t.id))
        rows = self._query_all(
            {
                "TableName": self.table,
                "IndexName": keys.INDEX_BY_OWNER,
                "KeyConditionExpression": "#k = :v",
                "ExpressionAttributeNames": {"#k": keys.OWNER_KEY},
                "ExpressionAttributeValues": {":v": codec.attr(keys.owner_index_value("token", owner))},
            }
        )
        return [_token_from(a) for a in rows]

    def delete_token(self, token_hash: str) -> TokenRecord | None:
        r = self.client.delete_item(
            TableName=self.table, Key=codec.to_item(keys.token_key(token_hash)), ReturnValues="ALL_OLD"
        )
        old = r.get("Attributes")
        return _token_from(codec.from_item(old)) if old else None
