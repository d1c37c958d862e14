"""DynamoDB store: the only module that knows keys, attribute names and types.

Key design (one table, ``pk``/``sk`` strings, two GSIs)::

    item                pk                  sk                          GSIs
    agent version       AGENT#<id>          AGENT                       gsi1: AGENTNAME#<name> / <ts>#<id>
                                                                        gsi2: AGENTS / <ts>#<id>
    session             SESSION#<id>        META                        gsi1: OWNER#<owner> / <ts>#<id>
                                                                        gsi2: SESSIONS_OF#<agent name> / <ts>#<id>
    conversation item   SESSION#<id>        ITEM#<anchor:012>#<seq:012>#<idx:03>
    stream event        SESSION#<id>        EVENT#<seq:012>             TTL expires_at
    append dedupe key   SESSION#<id>        DEDUPE#<key>                TTL expires_at
    turn                SESSION#<id>        TURN#<response id>
    pending call        SESSION#<id>        CALL#<response id>#<call id>

Sequence numbers: the session row carries ``last_seq``. Every append is one
``TransactWriteItems`` that moves ``last_seq`` from N to N+k *on the condition
that it is still N* and puts the k events (and any items) in the same
transaction. Events therefore become visible atomically and in seq order, so a
reader tailing ``seq > cursor`` can never skip one that commits later with a
lower number (the failure of "reserve a range, then write"). Losing writers
re-read and retry. An optional dedupe key makes an append idempotent: a
retried turn step writes the same key, its transaction fails on that put, and
the append is reported as already done.

Conversation items take the seq of the event that publishes them as their
``position`` (the snapshot's consistency cut), and sort by an *anchor* first:
a user message anchors at its own seq, while what a model call produced
(its text, its calls and their outputs) anchors at the last seq that call
read. So a message posted while the model was busy sorts after the reply the
model was writing, the order in which the model will see them.

moto caveats: Query walks the whole table and TTL never deletes, so reads
filter expired events themselves and the local stack sweeps.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import ConversationItem, PendingCall, Session, TaskError, Turn
from skyloop.store import notifier
from skyloop.store.schema import GSI_BY_NAME, GSI_BY_OWNER, TTL_ATTRIBUTE

if TYPE_CHECKING:
    from collections.abc import Iterable

_ser = TypeSerializer()
_de = TypeDeserializer()

MAX_APPEND_ATTEMPTS = 50
SEQ_WIDTH = 12
DEFAULT_OWNER = "local"


def _s(value: Any) -> dict[str, Any]:
    return _ser.serialize(value)


def _item(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in attrs.items() if v is not None}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out = {k: _de.deserialize(v) for k, v in item.items()}
    for k, v in out.items():
        if hasattr(v, "as_integer_ratio") and not isinstance(v, (int, float, bool)):  # Decimal
            out[k] = int(v) if v == int(v) else float(v)
    return out


def _ts_key(ts_ns: int, ident: str) -> str:
    return f"{ts_ns:020d}#{ident}"


def _session_pk(session_id: str) -> str:
    return f"SESSION#{session_id}"


def _event_sk(seq: int) -> str:
    return f"EVENT#{seq:0{SEQ_WIDTH}d}"


def _item_sk(anchor: int, seq: int, index: int) -> str:
    return f"ITEM#{anchor:0{SEQ_WIDTH}d}#{seq:0{SEQ_WIDTH}d}#{index:03d}"


@dataclass
class StoredEvent:
    """An event as read back from the log, with its assigned sequence number."""

    seq: int
    type: str
    data: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        return {**self.data, "type": self.type, "sequence_number": self.seq}


@dataclass
class NewItem:
    """A conversation item to persist with an append; published by ``event_index``."""

    id: str
    type: str
    data: dict[str, Any]
    response_id: str | None
    event_index: int = -1  # which event of the batch publishes it (default: the last)
    anchor_seq: int | None = None  # conversation order; default: the publishing event's seq


@dataclass
class Append:
    """A unit of work on one session: events, items and guarded session changes.

    Nothing is written until :meth:`DynamoStore.append` flushes it as one
    transaction; a failed condition writes nothing at all.
    """

    session_id: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    items: list[NewItem] = field(default_factory=list)
    dedupe_key: str | None = None
    set_session: dict[str, Any] = field(default_factory=dict)
    remove_session: list[str] = field(default_factory=list)
    session_condition: str | None = None
    condition_values: dict[str, Any] = field(default_factory=dict)
    condition_names: dict[str, str] = field(default_factory=dict)
    extra: list[dict[str, Any]] = field(default_factory=list)  # raw TransactItems
    set_input_seq: bool = False  # record this append's last seq as the newest user input

    def event(self, type_: str, data: dict[str, Any] | None = None) -> int:
        self.events.append((type_, dict(data or {})))
        return len(self.events) - 1


@dataclass
class AppendResult:
    first_seq: int
    last_seq: int
    duplicate: bool = False


class ConditionFailedError(ConflictError):
    """A session condition of an append did not hold; nothing was written."""


class DynamoStore:
    """Repository over the single table.

    Args:
        table_name: the table.
        client: a ready ``boto3`` DynamoDB client (tests pass a moto-backed one).
        event_ttl_s: how long stream events stay replayable.
    """

    def __init__(self, table_name: str, client: Any, *, event_ttl_s: int = 24 * 3600) -> None:
        self.table = table_name
        self.client = client
        self.event_ttl_s = event_ttl_s

    # ----------------------------------------------------------------- agents
    def put_agent(self, agent: Agent) -> None:
        ts = time.time_ns()
        spec_json = agent.spec.model_dump_json()  # api_key dumps masked; kept in its own attribute
        secret = None
        if agent.spec.executor.auth and agent.spec.executor.auth.api_key is not None:
            secret = agent.spec.executor.auth.api_key.get_secret_value()
        self.client.put_item(
            TableName=self.table,
            Item=_item(
                {
                    "pk": f"AGENT#{agent.id}",
                    "sk": "AGENT",
                    "kind": "agent",
                    "id": agent.id,
                    "name": agent.name,
                    "created_at": agent.created_at,
                    "spec": spec_json,
                    "api_key": secret,
                    "gsi1pk": f"AGENTNAME#{agent.name}",
                    "gsi1sk": _ts_key(ts, agent.id),
                    "gsi2pk": "AGENTS",
                    "gsi2sk": _ts_key(ts, agent.id),
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def _agent_from(self, raw: dict[str, Any]) -> Agent:
        attrs = _plain(raw)
        spec = json.loads(attrs["spec"])
        if attrs.get("api_key") is not None:
            spec.setdefault("executor", {}).setdefault("auth", {})["api_key"] = attrs["api_key"]
        return Agent(
            id=attrs["id"],
            name=attrs["name"],
            created_at=int(attrs["created_at"]),
            spec=AgentSpec.model_validate(spec),
        )

    def get_agent(self, agent_id: str) -> Agent:
        r = self.client.get_item(
            TableName=self.table, Key=_item({"pk": f"AGENT#{agent_id}", "sk": "AGENT"}), ConsistentRead=True
        )
        if "Item" not in r:
            raise NotFoundError(f"Agent not found: '{agent_id}'")
        return self._agent_from(r["Item"])

    def find_agent_by_name(self, name: str) -> Agent | None:
        r = self.client.query(
            TableName=self.table,
            IndexName=GSI_BY_OWNER,
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues={":p": _s(f"AGENTNAME#{name}")},
            ScanIndexForward=False,
            Limit=1,
        )
        items = r.get("Items", [])
        return self._agent_from(items[0]) if items else None

    def list_agents(
        self, *, limit: int = 20, descending: bool = True, after: str | None = None
    ) -> tuple[list[Agent], bool]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": GSI_BY_NAME,
            "KeyConditionExpression": "gsi2pk = :p",
            "ExpressionAttributeValues": {":p": _s("AGENTS")},
            "ScanIndexForward": not descending,
        }
        if after:
            cursor = self.client.get_item(
                TableName=self.table, Key=_item({"pk": f"AGENT#{after}", "sk": "AGENT"})
            ).get("Item")
            if cursor is None:
                raise NotFoundError(f"Agent not found: '{after}'")
            kwargs["ExclusiveStartKey"] = {k: cursor[k] for k in ("pk", "sk", "gsi2pk", "gsi2sk")}
        raw = self._query_page(kwargs, limit)
        return [self._agent_from(i) for i in raw[:limit]], len(raw) > limit

    def _query_page(self, kwargs: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` raw items (the extra one tells ``has_more``), across pages and filters."""
        out: list[dict[str, Any]] = []
        while True:
            r = self.client.query(**kwargs, Limit=limit + 1 - len(out))
            out.extend(r.get("Items", []))
            if len(out) > limit or "LastEvaluatedKey" not in r:
                return out
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    # --------------------------------------------------------------- sessions
    def create_session(self, session: Session, *, owner: str = DEFAULT_OWNER) -> None:
        ts = time.time_ns()
        self.client.put_item(
            TableName=self.table,
            Item=_item(
                {
                    **self._session_attrs(session),
                    "pk": _session_pk(session.id),
                    "sk": "META",
                    "kind": "session",
                    "owner": owner,
                    "gsi1pk": f"OWNER#{owner}",
                    "gsi1sk": _ts_key(ts, session.id),
                    "gsi2pk": f"SESSIONS_OF#{session.agent_name}",
                    "gsi2sk": _ts_key(ts, session.id),
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )

    @staticmethod
    def _session_attrs(session: Session) -> dict[str, Any]:
        data = session.model_dump(mode="json")
        data["labels"] = json.dumps(data["labels"])
        data["last_task_error"] = json.dumps(data["last_task_error"]) if data["last_task_error"] else None
        return data

    @staticmethod
    def _session_from(raw: dict[str, Any]) -> Session:
        attrs = _plain(raw)
        attrs["labels"] = json.loads(attrs.get("labels") or "{}")
        err = attrs.get("last_task_error")
        attrs["last_task_error"] = TaskError.model_validate(json.loads(err)) if err else None
        return Session.model_validate({k: v for k, v in attrs.items() if k in Session.model_fields})

    def get_session(self, session_id: str) -> Session:
        r = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": _session_pk(session_id), "sk": "META"}),
            ConsistentRead=True,
        )
        if "Item" not in r:
            raise NotFoundError(f"Session not found: '{session_id}'")
        return self._session_from(r["Item"])

    def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        agent_id: str | None = None,
        include_archived: bool = False,
        owner: str = DEFAULT_OWNER,
        limit: int = 20,
        descending: bool = True,
        after: str | None = None,
    ) -> tuple[list[Session], bool]:
        """Sessions newest first (or oldest first); ``after`` is a session id cursor."""
        if agent_name is not None:
            index, pk_attr, pk = GSI_BY_NAME, "gsi2pk", f"SESSIONS_OF#{agent_name}"
        else:
            index, pk_attr, pk = GSI_BY_OWNER, "gsi1pk", f"OWNER#{owner}"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": f"{pk_attr} = :p",
            "ExpressionAttributeValues": {":p": _s(pk)},
            "ScanIndexForward": not descending,
        }
        filters = []
        if agent_id is not None:
            filters.append("agent_id = :aid")
            kwargs["ExpressionAttributeValues"][":aid"] = _s(agent_id)
        if not include_archived:
            filters.append("(attribute_not_exists(archived) OR archived = :false)")
            kwargs["ExpressionAttributeValues"][":false"] = _s(False)
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
        if after:
            cursor = self.client.get_item(
                TableName=self.table, Key=_item({"pk": _session_pk(after), "sk": "META"})
            ).get("Item")
            if cursor is None:
                raise NotFoundError(f"Session not found: '{after}'")
            sk_attr = pk_attr[:-2] + "sk"
            if cursor.get(pk_attr) != _s(pk):
                raise InvalidInputError(f"cursor session '{after}' is not in this list")
            kwargs["ExclusiveStartKey"] = {
                "pk": cursor["pk"],
                "sk": cursor["sk"],
                pk_attr: _s(pk),
                sk_attr: cursor[sk_attr],
            }
        raw = self._query_page(kwargs, limit)
        return [self._session_from(i) for i in raw[:limit]], len(raw) > limit

    def delete_session(self, session_id: str) -> None:
        """Remove the session row first (appends then fail their condition), then everything under it."""
        pk = _session_pk(session_id)
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=_item({"pk": pk, "sk": "META"}),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise NotFoundError(f"Session not found: '{session_id}'") from exc
            raise
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": _s(pk)},
            "ProjectionExpression": "pk, sk",
        }
        while True:
            r = self.client.query(**kwargs)
            self._delete_keys([{"pk": i["pk"], "sk": i["sk"]} for i in r.get("Items", [])])
            if "LastEvaluatedKey" not in r:
                return
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    def sweep_expired(self, now: int | None = None) -> int:
        """Delete items whose TTL has passed; only the local stack needs this (moto has no TTL reaper)."""
        now = int(time.time()) if now is None else now
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "#ttl < :now",
            "ExpressionAttributeNames": {"#ttl": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":now": _s(now)},
            "ProjectionExpression": "pk, sk",
        }
        deleted = 0
        while True:
            r = self.client.scan(**kwargs)
            keys = [{"pk": i["pk"], "sk": i["sk"]} for i in r.get("Items", [])]
            self._delete_keys(keys)
            deleted += len(keys)
            if "LastEvaluatedKey" not in r:
                return deleted
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    def _delete_keys(self, keys: list[dict[str, Any]]) -> None:
        for start in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
            while requests:
                out = self.client.batch_write_item(RequestItems={self.table: requests})
                requests = out.get("UnprocessedItems", {}).get(self.table, [])

    def update_session(
        self, session_id: str, changes: dict[str, Any], *, condition: str | None = None
    ) -> Session:
        """Plain field updates (title, labels, runner) that publish no event."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {":now": _s(int(time.time()))}
        sets = ["#updated_at = :now"]
        names["#updated_at"] = "updated_at"
        removes: list[str] = []
        for i, (key, value) in enumerate(changes.items()):
            names[f"#f{i}"] = key
            if value is None:
                removes.append(f"#f{i}")
            else:
                if key == "labels":
                    value = json.dumps(value)
                values[f":v{i}"] = _s(value)
                sets.append(f"#f{i} = :v{i}")
        expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        cond = "attribute_exists(pk)" + (f" AND ({condition})" if condition else "")
        try:
            r = self.client.update_item(
                TableName=self.table,
                Key=_item({"pk": _session_pk(session_id), "sk": "META"}),
                UpdateExpression=expr,
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                self.get_session(session_id)  # raises NotFoundError if it is gone
                raise ConflictError(f"Session '{session_id}' changed concurrently") from exc
            raise
        return self._session_from(r["Attributes"])

    # ------------------------------------------------------------ event log
    def append(self, batch: Append) -> AppendResult:
        """Write a batch atomically with the next sequence numbers (see module docstring)."""
        if len(batch.events) + len(batch.items) + len(batch.extra) + 2 > 100:
            raise ValueError("append batch too large for one transaction")
        for _ in range(MAX_APPEND_ATTEMPTS):
            session = self.get_session(batch.session_id)
            try:
                result = self._try_append(batch, session.last_seq)
            except _SeqMoved:
                continue
            notifier.notify(batch.session_id)
            return result
        raise ConflictError(f"Too much contention appending to session '{batch.session_id}'")

    def _try_append(self, batch: Append, last_seq: int) -> AppendResult:
        pk = _session_pk(batch.session_id)
        now = int(time.time())
        expires = now + self.event_ttl_s
        n = len(batch.events)
        first, last = last_seq + 1, last_seq + n
        names = {"#last_seq": "last_seq", "#updated_at": "updated_at", **batch.condition_names}
        values: dict[str, Any] = {":old": _s(last_seq), ":new": _s(last), ":now": _s(now)}
        sets = ["#last_seq = :new", "#updated_at = :now"]
        for i, (key, value) in enumerate(batch.set_session.items()):
            names[f"#s{i}"] = key
            if key == "last_task_error" and value is not None:
                value = json.dumps(value)
            values[f":s{i}"] = _s(value)
            sets.append(f"#s{i} = :s{i}")
        if batch.set_input_seq:
            names["#input_seq"] = "input_seq"
            sets.append("#input_seq = :new")
        removes = []
        for i, key in enumerate(batch.remove_session):
            names[f"#r{i}"] = key
            removes.append(f"#r{i}")
        for k, v in batch.condition_values.items():
            values[k] = _s(v)
        cond = "#last_seq = :old"
        if batch.session_condition:
            cond += f" AND ({batch.session_condition})"
        update_expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        ops: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": _item({"pk": pk, "sk": "META"}),
                    "UpdateExpression": update_expr,
                    "ConditionExpression": cond,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        if batch.dedupe_key:
            ops.append(
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": _item(
                            {
                                "pk": pk,
                                "sk": f"DEDUPE#{batch.dedupe_key}",
                                "seq": first,
                                TTL_ATTRIBUTE: expires,
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        for i, (type_, data) in enumerate(batch.events):
            ops.append(
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": _item(
                            {
                                "pk": pk,
                                "sk": _event_sk(first + i),
                                "seq": first + i,
                                "type": type_,
                                "data": json.dumps(data, separators=(",", ":")),
                                TTL_ATTRIBUTE: expires,
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        for idx, item in enumerate(batch.items):
            seq = first + (item.event_index if item.event_index >= 0 else n - 1) if n else last_seq
            ops.append(
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": _item(
                            {
                                "pk": pk,
                                "sk": _item_sk(
                                    item.anchor_seq if item.anchor_seq is not None else seq, seq, idx
                                ),
                                "id": item.id,
                                "type": item.type,
                                "response_id": item.response_id,
                                "created_at": now,
                                "position": seq,
                                "data": json.dumps(item.data, separators=(",", ":")),
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        ops.extend(batch.extra)
        try:
            self.client.transact_write_items(TransactItems=ops)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            if batch.dedupe_key and self._dedupe_exists(pk, batch.dedupe_key):
                return AppendResult(first_seq=0, last_seq=0, duplicate=True)
            current = self.get_session(batch.session_id)
            if current.last_seq != last_seq:
                raise _SeqMoved from exc
            raise ConditionFailedError(
                f"Session '{batch.session_id}' is not in the state this change requires"
            ) from exc
        return AppendResult(first_seq=first, last_seq=last)

    def _dedupe_exists(self, pk: str, key: str) -> bool:
        r = self.client.get_item(
            TableName=self.table, Key=_item({"pk": pk, "sk": f"DEDUPE#{key}"}), ConsistentRead=True
        )
        return "Item" in r

    def dedupe_exists(self, session_id: str, key: str) -> bool:
        """Whether an append with this dedupe key has landed."""
        return self._dedupe_exists(_session_pk(session_id), key)

    def claim_marker(self, session_id: str, key: str) -> bool:
        """Put a dedupe marker unless it exists; True when this caller put it."""
        try:
            self.client.put_item(**self.dedupe_put_op(session_id, key)["Put"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def dedupe_put_op(self, session_id: str, key: str) -> dict[str, Any]:
        """Claim a dedupe key inside another append, so the step that owns it becomes a no-op."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": _item(
                    {
                        "pk": _session_pk(session_id),
                        "sk": f"DEDUPE#{key}",
                        TTL_ATTRIBUTE: int(time.time()) + self.event_ttl_s,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def read_events(self, session_id: str, after: int, *, limit: int = 500) -> list[StoredEvent]:
        """Retained events with seq > ``after``, in order (strongly consistent)."""
        return self.read_event_page(session_id, after, limit=limit)[0]

    def read_event_page(
        self, session_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredEvent], int, bool]:
        """One page: the retained events, the last seq the page covered, and whether it was full.

        Expired events (past their TTL but not yet deleted: moto never deletes,
        DynamoDB lags) are skipped, yet still move the cursor, so a reader
        never re-reads them forever.
        """
        r = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
            ExpressionAttributeValues={
                ":p": _s(_session_pk(session_id)),
                ":a": _s(_event_sk(after + 1)),
                ":b": _s(_event_sk(10**SEQ_WIDTH - 1)),
            },
            ConsistentRead=True,
            Limit=limit,
        )
        now = int(time.time())
        out = []
        covered = after
        raw_items = r.get("Items", [])
        for raw in raw_items:
            attrs = _plain(raw)
            covered = int(attrs["seq"])
            if int(attrs.get(TTL_ATTRIBUTE, now + 1)) < now:
                continue
            out.append(StoredEvent(seq=covered, type=attrs["type"], data=json.loads(attrs["data"])))
        return out, covered, len(raw_items) >= limit

    # ------------------------------------------------------------------ items
    def list_items(self, session_id: str, *, through_seq: int | None = None) -> list[ConversationItem]:
        """All items of a session in order, optionally only those published by seq <= ``through_seq``."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :i)",
            "ExpressionAttributeValues": {":p": _s(_session_pk(session_id)), ":i": _s("ITEM#")},
            "ConsistentRead": True,
        }
        out: list[ConversationItem] = []
        while True:
            r = self.client.query(**kwargs)
            for raw in r.get("Items", []):
                attrs = _plain(raw)
                if through_seq is not None and int(attrs["position"]) > through_seq:
                    continue
                out.append(
                    ConversationItem(
                        id=attrs["id"],
                        type=attrs["type"],
                        response_id=attrs.get("response_id"),
                        created_at=int(attrs["created_at"]),
                        position=int(attrs["position"]),
                        data=json.loads(attrs["data"]),
                    )
                )
            if "LastEvaluatedKey" not in r:
                return out
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    # ------------------------------------------------------------------ turns
    def turn_put_op(self, turn: Turn) -> dict[str, Any]:
        """The transaction op that creates a turn record (used inside an append)."""
        data = turn.model_dump(mode="json")
        data["tools"] = json.dumps(data["tools"])
        return {
            "Put": {
                "TableName": self.table,
                "Item": _item({**data, "pk": _session_pk(turn.session_id), "sk": f"TURN#{turn.response_id}"}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def get_turn(self, session_id: str, response_id: str) -> Turn:
        r = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": _session_pk(session_id), "sk": f"TURN#{response_id}"}),
            ConsistentRead=True,
        )
        if "Item" not in r:
            raise NotFoundError(f"Turn not found: '{response_id}'")
        attrs = _plain(r["Item"])
        attrs["tools"] = json.loads(attrs.get("tools") or "[]")
        return Turn.model_validate({k: v for k, v in attrs.items() if k in Turn.model_fields})

    def get_turn_attribute(self, session_id: str, response_id: str, name: str) -> Any:
        r = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": _session_pk(session_id), "sk": f"TURN#{response_id}"}),
            ConsistentRead=True,
            ProjectionExpression="#a",
            ExpressionAttributeNames={"#a": name},
        )
        return _plain(r.get("Item", {})).get(name)

    def update_turn(
        self,
        session_id: str,
        response_id: str,
        changes: dict[str, Any],
        *,
        condition: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> bool:
        """Conditional field update; returns False when the condition did not hold."""
        names = {f"#f{i}": k for i, k in enumerate(changes)}
        vals = {f":v{i}": _s(v) for i, v in enumerate(changes.values())}
        vals.update({k: _s(v) for k, v in (values or {}).items()})
        expr = "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(changes)))
        cond = "attribute_exists(pk)" + (f" AND ({condition})" if condition else "")
        try:
            self.client.update_item(
                TableName=self.table,
                Key=_item({"pk": _session_pk(session_id), "sk": f"TURN#{response_id}"}),
                UpdateExpression=expr,
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=vals,
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # ------------------------------------------------------------------ calls
    def call_put_ops(self, calls: Iterable[PendingCall]) -> list[dict[str, Any]]:
        return [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": _item(
                        {
                            **c.model_dump(mode="json"),
                            "pk": _session_pk(c.session_id),
                            "sk": f"CALL#{c.response_id}#{c.call_id}",
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for c in calls
        ]

    def get_call(self, session_id: str, response_id: str, call_id: str) -> PendingCall | None:
        r = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": _session_pk(session_id), "sk": f"CALL#{response_id}#{call_id}"}),
            ConsistentRead=True,
        )
        if "Item" not in r:
            return None
        attrs = _plain(r["Item"])
        return PendingCall.model_validate({k: v for k, v in attrs.items() if k in PendingCall.model_fields})

    def list_calls(
        self, session_id: str, response_id: str, *, iteration: int | None = None
    ) -> list[PendingCall]:
        r = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND begins_with(sk, :c)",
            ExpressionAttributeValues={
                ":p": _s(_session_pk(session_id)),
                ":c": _s(f"CALL#{response_id}#"),
            },
            ConsistentRead=True,
        )
        calls = [
            PendingCall.model_validate({k: v for k, v in _plain(i).items() if k in PendingCall.model_fields})
            for i in r.get("Items", [])
        ]
        if iteration is not None:
            calls = [c for c in calls if c.iteration == iteration]
        return sorted(calls, key=lambda c: (c.iteration, c.index))

    def cancel_call_op(self, call: PendingCall, output: str) -> dict[str, Any]:
        """Give an unanswered call its cancellation output (fails if an answer won the race)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": _item(
                    {"pk": _session_pk(call.session_id), "sk": f"CALL#{call.response_id}#{call.call_id}"}
                ),
                "UpdateExpression": "SET #o = :o, cancelled = :t, answered_at = :now",
                "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#o)",
                "ExpressionAttributeNames": {"#o": "output"},
                "ExpressionAttributeValues": {":o": _s(output), ":t": _s(True), ":now": _s(int(time.time()))},
            }
        }

    def answer_call(self, call: PendingCall, output: str) -> bool:
        """Record the output once: set it on the call and count it down on the turn, atomically.

        Only while the call's turn is the session's running turn. Returns False
        when the call already had an output or its turn has ended (the caller
        then compares outputs to answer idempotently or with 409).
        """
        pk = _session_pk(call.session_id)
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": _item({"pk": pk, "sk": f"CALL#{call.response_id}#{call.call_id}"}),
                            "UpdateExpression": "SET #o = :o, answered_at = :t",
                            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#o)",
                            "ExpressionAttributeNames": {"#o": "output"},
                            "ExpressionAttributeValues": {":o": _s(output), ":t": _s(int(time.time()))},
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": _item({"pk": pk, "sk": f"TURN#{call.response_id}"}),
                            "UpdateExpression": "SET unanswered = unanswered - :one",
                            "ConditionExpression": "unanswered > :zero",
                            "ExpressionAttributeValues": {":one": _s(1), ":zero": _s(0)},
                        }
                    },
                    {
                        "ConditionCheck": {  # only the running turn takes outputs
                            "TableName": self.table,
                            "Key": _item({"pk": pk, "sk": "META"}),
                            "ConditionExpression": "active_response_id = :r",
                            "ExpressionAttributeValues": {":r": _s(call.response_id)},
                        }
                    },
                ]
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "TransactionCanceledException":
                return False
            raise
        return True


class _SeqMoved(Exception):
    """Another writer advanced ``last_seq`` first; re-read and retry."""
