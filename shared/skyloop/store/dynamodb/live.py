"""Live connections and subscriptions in the table (keys: :func:`skyloop.store.keys.live_connection_key`).

A connection row says who the connection authenticated as and which
sessions it watches (a string set, so ``$disconnect`` knows what to remove);
a subscription row sits in the watched session's partition, so the fan-out
of an event is one strongly consistent Query beside it. Both carry the
connection's end of life as their TTL: API Gateway closes every connection
within two hours, so rows a lost ``$disconnect`` leaves behind expire soon,
and readers skip expired rows until DynamoDB deletes them.

Not part of :class:`skyloop.store.Store`: only the cloud's ``live`` and
``push_fanout`` functions use it (the local stack serves the live channel
from its in-process feed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop.principals import Principal
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code
from skyloop.store.records import StoredEvent

if TYPE_CHECKING:
    from skyloop.live.access import Grant


@dataclass(frozen=True)
class LiveConnection:
    connection_id: str
    expires_at: int
    principal: Principal | None = None  # None until an ``auth`` frame succeeded
    token_hash: str | None = None
    auth_expires_at: int | None = None
    sessions: frozenset[str] = frozenset()


class LiveRecords(TableBase):
    def open_connection(self, connection_id: str, *, connected_at: int, expires_at: int) -> None:
        item = {
            **keys.live_connection_key(connection_id),
            "connected_at": connected_at,
            keys.TTL_ATTRIBUTE: expires_at,
        }
        self.client.put_item(TableName=self.table, Item=codec.to_item(item))

    def authorize_connection(self, connection_id: str, grant: Grant) -> bool:
        """Record who the connection is; False when the connection is gone."""
        principal = grant.principal
        values: dict[str, Any] = {
            ":p": codec.attr(principal.name),
            ":s": codec.attr(sorted(principal.scopes)),
            ":v": codec.attr(principal.via),
        }
        sets = ["principal = :p", "scopes = :s", "via = :v"]
        removes = []
        for name, value in (("token_hash", grant.token_hash), ("auth_expires_at", grant.expires_at)):
            if value is None:
                removes.append(name)
            else:
                values[f":{name}"] = codec.attr(value)
                sets.append(f"{name} = :{name}")
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.live_connection_key(connection_id)),
                UpdateExpression="SET "
                + ", ".join(sets)
                + (" REMOVE " + ", ".join(removes) if removes else ""),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def get_connection(self, connection_id: str) -> LiveConnection | None:
        attrs = self._get(keys.live_connection_key(connection_id))
        if attrs is None or int(attrs.get(keys.TTL_ATTRIBUTE, 0)) < time.time():
            return None
        principal = None
        if "principal" in attrs:
            principal = Principal(
                name=attrs["principal"], scopes=frozenset(attrs.get("scopes") or ()), via=attrs["via"]
            )
        auth_expires = attrs.get("auth_expires_at")
        return LiveConnection(
            connection_id=connection_id,
            expires_at=int(attrs[keys.TTL_ATTRIBUTE]),
            principal=principal,
            token_hash=attrs.get("token_hash"),
            auth_expires_at=int(auth_expires) if auth_expires is not None else None,
            sessions=frozenset(attrs.get("sessions") or ()),
        )

    def subscribe(self, session_id: str, connection: LiveConnection) -> bool:
        """Put the subscription and note it on the connection, in one transaction.

        False when the connection is gone (its ``$disconnect`` ran first): then
        nothing is written, so no subscription outlives its connection.
        """
        assert connection.principal is not None
        row = {
            **keys.live_subscription_key(session_id, connection.connection_id),
            "principal": connection.principal.name,
            keys.TTL_ATTRIBUTE: connection.expires_at,
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": codec.to_item(keys.live_connection_key(connection.connection_id)),
                            "UpdateExpression": "ADD sessions :s",
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": {":s": {"SS": [session_id]}},
                        }
                    },
                    {"Put": {"TableName": self.table, "Item": codec.to_item(row)}},
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return False
            raise
        return True

    def unsubscribe(self, session_id: str, connection_id: str) -> None:
        self.client.delete_item(
            TableName=self.table, Key=codec.to_item(keys.live_subscription_key(session_id, connection_id))
        )
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.live_connection_key(connection_id)),
                UpdateExpression="DELETE sessions :s",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":s": {"SS": [session_id]}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def close_connection(self, connection_id: str) -> None:
        """Remove the connection and every subscription it holds (``$disconnect``, or gone)."""
        attrs = self._get(keys.live_connection_key(connection_id), projection=["sessions"])
        sessions = sorted((attrs or {}).get("sessions") or ())
        doomed = [keys.live_subscription_key(s, connection_id) for s in sessions]
        doomed.append(keys.live_connection_key(connection_id))
        self._delete_keys([codec.to_item(k) for k in doomed])

    def subscribers(self, session_id: str) -> list[str]:
        """The connections watching the session now (strongly consistent: a subscription written
        before an event committed is always seen by that event's fan-out)."""
        now = time.time()
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :l)",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.session_pk(session_id)),
                    ":l": codec.attr(keys.LIVE_PREFIX),
                },
                "ProjectionExpression": "sk, #t",
                "ExpressionAttributeNames": {"#t": keys.TTL_ATTRIBUTE},
                "ConsistentRead": True,
            }
        )
        return [
            str(row["sk"]).removeprefix(keys.LIVE_PREFIX)
            for row in rows
            if int(row.get(keys.TTL_ATTRIBUTE, 0)) >= now
        ]

    def forget_subscriber(self, session_id: str, connection_id: str) -> None:
        """A connection API Gateway says is gone: drop its row and this subscription now
        (its other subscriptions go when their own fan-out finds it gone, or expire)."""
        for key in (
            keys.live_subscription_key(session_id, connection_id),
            keys.live_connection_key(connection_id),
        ):
            self.client.delete_item(TableName=self.table, Key=codec.to_item(key))

    def event_from_image(self, image: dict[str, Any]) -> StoredEvent:
        """A stored event from a stream record's ``NewImage`` (large payloads resolved from the bucket)."""
        attrs = codec.from_item(image)
        return StoredEvent(
            seq=int(attrs["seq"]), type=attrs["type"], data=codec.loads(self._text_in(attrs, "data"), {})
        )
