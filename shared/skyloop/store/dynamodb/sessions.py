"""Session rows: status, counters and the fields the API edits; listed by owner or by agent name."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.models.session import Session, TaskError
from skyloop.store import codec, keys, notifier
from skyloop.store.dynamodb.base import TableBase, cancellation_codes, error_code

if TYPE_CHECKING:
    from collections.abc import Sequence

    from skyloop.models.session import ConversationItem

JSON_FIELDS = ("labels", "last_task_error", "environment")  # stored as compact JSON text


def session_attrs(session: Session) -> dict[str, Any]:
    data = session.model_dump(mode="json")
    for name in JSON_FIELDS:
        data[name] = codec.dumps(data[name]) if data[name] not in (None, {}) else None
    return data


def session_from(attrs: dict[str, Any]) -> Session:
    attrs = dict(attrs)
    attrs["labels"] = codec.loads(attrs.get("labels"), {})
    err = codec.loads(attrs.get("last_task_error"))
    attrs["last_task_error"] = TaskError.model_validate(err) if err else None
    attrs["environment"] = codec.loads(attrs.get("environment"))
    return Session.model_validate({k: v for k, v in attrs.items() if k in Session.model_fields})


class SessionRecords(TableBase):
    def create_session(self, session: Session, items: Sequence[ConversationItem] = ()) -> None:
        """Put the row (and its parent's link to it) last: until then its seeded items are unreachable.

        The items go first, in batches (no transaction holds thousands), under
        a fresh id nobody can know yet; the row and the fork link are then one
        conditional transaction, so a reader finds the session whole or not at all.
        """
        created = keys.created_key(time.time_ns(), session.id)
        if items:
            session = session.model_copy(update={"last_seq": max(session.last_seq, len(items))})
            self._put_items(session.id, items)
        item = {
            **session_attrs(session),
            **keys.session_key(session.id),
            "kind": "session",
            keys.OWNER_KEY: keys.owner_index_value("session", session.owner),
            keys.NAME_KEY: keys.agent_name_index_value("session", session.owner, session.agent_name),
            keys.CREATED_KEY: created,
        }
        if session.parent_session_id is None:
            if not self._put_new(item):
                raise ConflictError(f"a session with id {session.id!r} already exists")
            notifier.notify(session.id, notifier.CREATED)
            return
        link = {
            **keys.child_key(session.parent_session_id, session.id),
            "kind": "child",
            "child_id": session.id,
            "created_at": session.created_at,
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": codec.to_item(row),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                    for row in (item, link)
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and "ConditionalCheckFailed" in (
                cancellation_codes(exc)
            ):
                raise ConflictError(f"a session with id {session.id!r} already exists") from exc
            raise
        notifier.notify(
            session.id, notifier.CREATED
        )  # the local lifecycle publisher's cue (the cloud: the stream)

    def _put_items(self, session_id: str, items: Sequence[ConversationItem]) -> None:
        """Seeded history at positions 1..n (a later append's seq, and so its anchor, is above them)."""
        pk = keys.session_pk(session_id)
        prefix = keys.session_blob_prefix(session_id)
        rows = []
        for position, conv_item in enumerate(items, start=1):
            rows.append(
                codec.to_item(
                    {
                        "pk": pk,
                        "sk": keys.item_sk(position, position, 0),
                        "id": conv_item.id,
                        "type": conv_item.type,
                        "response_id": conv_item.response_id,
                        "created_at": conv_item.created_at,
                        "position": position,
                        **self._text_out("data", codec.dumps(conv_item.data), prefix),
                    }
                )
            )
        self._put_rows(rows)

    def list_child_sessions(self, parent_id: str) -> list[Session]:
        """The sessions forked from ``parent_id``, oldest first (a deleted fork's link is gone with it)."""
        links = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :c)",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.session_pk(parent_id)),
                    ":c": codec.attr(keys.CHILD_PREFIX),
                },
                "ConsistentRead": True,
            }
        )
        out = []
        for link in links:
            attrs = self._get(keys.session_key(str(link["child_id"])))
            if attrs is not None:  # a fork deleted between its link and its row's removal
                out.append((attrs.get(keys.CREATED_KEY, ""), session_from(attrs)))
        return [s for _, s in sorted(out, key=lambda pair: pair[0])]

    def get_session(self, session_id: str) -> Session:
        attrs = self._get(keys.session_key(session_id))
        if attrs is None:
            raise NotFoundError(f"Session not found: '{session_id}'")
        return session_from(attrs)

    def list_sessions(
        self,
        *,
        owner: str = keys.DEFAULT_OWNER,
        agent_name: str | None = None,
        agent_id: str | None = None,
        archived: bool | None = False,
        limit: int = 20,
        descending: bool = True,
        after: str | None = None,
    ) -> tuple[list[Session], bool]:
        """Sessions newest first (or oldest first); ``archived=None`` lists both; ``after`` is a session id."""
        if agent_name is not None:
            index, key_attr = keys.INDEX_BY_AGENT_NAME, keys.NAME_KEY
            value = keys.agent_name_index_value("session", owner, agent_name)
        else:
            index, key_attr = keys.INDEX_BY_OWNER, keys.OWNER_KEY
            value = keys.owner_index_value("session", owner)
        values: dict[str, Any] = {":v": codec.attr(value)}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": "#k = :v",
            "ExpressionAttributeNames": {"#k": key_attr},
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not descending,
        }
        filters = []
        if agent_id is not None:
            filters.append("agent_id = :aid")
            values[":aid"] = codec.attr(agent_id)
        if archived is False:
            filters.append("(attribute_not_exists(archived) OR archived = :false)")
            values[":false"] = codec.attr(False)
        elif archived is True:
            filters.append("archived = :true")
            values[":true"] = codec.attr(True)
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
        if after:
            cursor = self._get(keys.session_key(after))
            if cursor is None:
                raise NotFoundError(f"Session not found: '{after}'")
            if cursor.get(key_attr) != value:
                raise InvalidInputError(f"cursor session '{after}' is not in this list")
            kwargs["ExclusiveStartKey"] = codec.to_item(
                {**keys.session_key(after), key_attr: value, keys.CREATED_KEY: cursor[keys.CREATED_KEY]}
            )
        raw = self._query_page(kwargs, limit)
        return [session_from(codec.from_item(i)) for i in raw[:limit]], len(raw) > limit

    def list_running_sessions(self) -> list[Session]:
        """Every session whose status is ``running`` (what the reconciler checks), from the sparse index."""
        out: list[Session] = []
        for shard in keys.RUNNING_SHARDS:
            rows = self._query_all(
                {
                    "TableName": self.table,
                    "IndexName": keys.INDEX_RUNNING,
                    "KeyConditionExpression": "#k = :v",
                    "ExpressionAttributeNames": {"#k": keys.RUNNING_KEY},
                    "ExpressionAttributeValues": {":v": codec.attr(f"running#{shard}")},
                }
            )
            out += [session_from(r) for r in rows]
        return out

    def update_session(self, session_id: str, changes: dict[str, object]) -> Session:
        """Plain field updates (title, labels, runner...) that publish no event; ``None`` removes a field."""
        names: dict[str, str] = {"#updated_at": "updated_at"}
        values: dict[str, Any] = {":now": codec.attr(int(time.time()))}
        sets = ["#updated_at = :now"]
        removes: list[str] = []
        for i, (key, value) in enumerate(changes.items()):
            names[f"#f{i}"] = key
            if value is None:
                removes.append(f"#f{i}")
                continue
            values[f":v{i}"] = codec.attr(codec.dumps(value) if key in JSON_FIELDS else value)
            sets.append(f"#f{i} = :v{i}")
        expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            r = self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.session_key(session_id)),
                UpdateExpression=expr,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"Session not found: '{session_id}'") from exc
            raise
        return session_from(codec.from_item(r["Attributes"]))

    def delete_session(self, session_id: str) -> None:
        """Remove the session row first (appends then fail their condition), then everything under it."""
        try:
            old = self.client.delete_item(
                TableName=self.table,
                Key=codec.to_item(keys.session_key(session_id)),
                ConditionExpression="attribute_exists(pk)",
                ReturnValues="ALL_OLD",
            ).get("Attributes", {})
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"Session not found: '{session_id}'") from exc
            raise
        parent = codec.from_item(old).get("parent_session_id") if old else None
        if parent:
            self.client.delete_item(
                TableName=self.table, Key=codec.to_item(keys.child_key(str(parent), session_id))
            )
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": codec.attr(keys.session_pk(session_id))},
            "ProjectionExpression": "pk, sk",
        }
        while True:
            r = self.client.query(**kwargs)
            self._delete_keys([{"pk": i["pk"], "sk": i["sk"]} for i in r.get("Items", [])])
            if "LastEvaluatedKey" not in r:
                break
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]
        if self.blobs is not None:
            self.blobs.delete_prefix(keys.session_blob_prefix(session_id))
