"""The event log and conversation items: every state change of a session is one append.

Sequence numbers: the session row carries ``last_seq``. Every append is one
``TransactWriteItems`` that moves ``last_seq`` from N to N+k *on the condition
that it is still N* and puts the k events (and whatever else the unit of work
holds) in the same transaction. Events therefore become visible atomically and
in seq order, so a reader tailing ``seq > cursor`` can never skip one that
commits later with a lower number (the failure of "reserve a range, then
write"). Losing writers re-read and retry. An optional dedupe key makes an
append idempotent: a retried turn step writes the same key, its transaction
fails on that put, and the append is reported as already done.

Conversation items take the seq of the event that publishes them as their
``position`` (the snapshot's consistency cut), and sort by an *anchor* first:
a user message anchors at its own seq, while what a model call produced (its
text, its calls and their outputs) anchors at the last seq that call read. So
a message posted while the model was busy sorts after the reply the model was
writing, the order in which the model will see them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from skyloop.models.session import ConversationItem
from skyloop.store import codec, keys, notifier
from skyloop.store.dynamodb.base import TableBase, cancellation_codes, error_code
from skyloop.store.records import AppendResult, ConditionFailedError, ContentionError, StoredEvent

if TYPE_CHECKING:
    from skyloop.models.session import PendingCall
    from skyloop.store.records import (
        Append,
        ApprovalResolution,
        Guard,
        SessionChange,
        TurnDecision,
        TurnEnd,
    )

MAX_APPEND_ATTEMPTS = 50
MAX_TRANSACTION_ITEMS = 100


class _SeqMoved(Exception):
    """Another writer advanced ``last_seq`` first; retry from the value just read (``seq``)."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


def guard_condition(guard: Guard | None, names: dict[str, str], values: dict[str, Any]) -> str:
    parts = []
    if guard is None:
        return ""
    if guard.running is not None:
        names["#st"] = "status"
        values[":running"] = codec.attr("running")
        parts.append("#st = :running" if guard.running else "#st <> :running")
    if guard.active_turn is not None:
        values[":active"] = codec.attr(guard.active_turn)
        parts.append("active_response_id = :active")
    if guard.input_seen_through is not None:
        values[":seen"] = codec.attr(guard.input_seen_through)
        parts.append("input_seq <= :seen")
    return " AND ".join(parts)


def change_expressions(
    change: SessionChange | None, names: dict[str, str], values: dict[str, Any], session_id: str = ""
) -> tuple[list[str], list[str]]:
    """``SET`` and ``REMOVE`` clauses for a session change (after ``last_seq``/``updated_at``)."""
    sets: list[str] = []
    removes: list[str] = []
    if change is None:
        return sets, removes
    fields: dict[str, Any] = {
        "status": change.status,
        "active_response_id": change.active_turn,
        "last_response_id": change.last_response_id,
        "last_task_error": codec.dumps(change.last_task_error) if change.last_task_error else None,
    }
    for i, (name, value) in enumerate(fields.items()):
        if value is not None:
            names[f"#c{i}"] = name
            values[f":c{i}"] = codec.attr(value)
            sets.append(f"#c{i} = :c{i}")
    if change.status == "running":  # in the reconciler's index exactly while running
        names["#running"] = keys.RUNNING_KEY
        values[":running_key"] = codec.attr(keys.running_index_value(session_id))
        sets.append("#running = :running_key")
    elif change.status is not None:
        removes.append(keys.RUNNING_KEY)
    if change.mark_input:
        names["#input_seq"] = "input_seq"
        sets.append("#input_seq = :new")
    if change.end_active_turn:
        removes.append("active_response_id")
    if change.clear_task_error:
        removes.append("last_task_error")
    return sets, removes


class EventLog(TableBase):
    def append(self, batch: Append) -> AppendResult:
        """Write a batch atomically with the next sequence numbers (see the module docstring)."""
        ops = 2 + len(batch.events) + len(batch.items) + len(batch.new_calls) + len(batch.cancel_calls)
        ops += len(batch.approvals) + (1 if batch.approvals else 0)
        ops += len(batch.claims) + (1 if batch.new_turn else 0) + (1 if batch.decision else 0)
        ops += 1 if batch.turn_end is not None and batch.turn_end != _same_turn(batch) else 0
        if ops > MAX_TRANSACTION_ITEMS:
            raise ValueError("append batch too large for one transaction")
        last_seq = batch.after_seq
        for _ in range(MAX_APPEND_ATTEMPTS):
            if last_seq is None:
                last_seq = self._last_seq(batch.session_id)
            try:
                result = self._try_append(batch, last_seq)
            except _SeqMoved as moved:
                last_seq = moved.seq  # read fresh by the cancellation's explanation
                continue
            if not result.duplicate:
                notifier.notify(batch.session_id)
            return result
        raise ContentionError(f"Too much contention appending to session '{batch.session_id}'")

    def _last_seq(self, session_id: str) -> int:
        attrs = self._get(keys.session_key(session_id), projection=["last_seq"])
        if attrs is None:
            from skyloop.errors import NotFoundError

            raise NotFoundError(f"Session not found: '{session_id}'")
        return int(attrs.get("last_seq", 0))

    def _try_append(self, batch: Append, last_seq: int) -> AppendResult:
        ops = self._transaction(batch, last_seq, int(time.time()))
        try:
            self.client.transact_write_items(TransactItems=ops)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            self._explain_cancellation(batch, last_seq, exc)
            return AppendResult(first_seq=0, last_seq=0, duplicate=True)
        n = len(batch.events)
        turn_items: _TurnItems | None = self.__dict__.get("_turn_items")
        if turn_items is not None and n:
            turn_items.appended(batch.session_id, last_seq, self._item_rows_of(batch, last_seq))
        return AppendResult(first_seq=last_seq + 1, last_seq=last_seq + n)

    def _item_rows_of(self, batch: Append, last_seq: int) -> tuple[int, list[_ItemRow]]:
        """The rows an append of ``batch`` after ``last_seq`` put (as :meth:`_conversation_items` keys them)."""
        now = int(time.time())
        rows = []
        for item, (sk, seq) in zip(batch.items, _item_keys(batch, last_seq), strict=True):
            text = codec.dumps(item.data)  # parsed again: the caller's dict stays the caller's
            conversation_item = ConversationItem(
                id=item.id,
                type=item.type,  # type: ignore[arg-type]
                response_id=item.response_id,
                created_at=now,
                position=seq,
                data=codec.loads(text, {}),
            )
            rows.append(_ItemRow(sk, conversation_item, len(text)))
        return last_seq + len(batch.events), rows

    def _transaction(self, batch: Append, last_seq: int, now: int) -> list[dict[str, Any]]:
        """The append's ``TransactItems``: the session row first, then every record it puts or changes."""
        expires = now + self.event_ttl_s
        first = last_seq + 1
        ops = [self._session_op(batch, last_seq, now)]
        if batch.dedupe_key:
            marker = {
                **keys.dedupe_key(batch.session_id, batch.dedupe_key),
                "seq": first,
                keys.TTL_ATTRIBUTE: expires,
            }
            ops.append(self._new_item_op(marker))
        ops += [self._new_item_op(item) for item in self._event_items(batch, first, expires)]
        ops += [self._new_item_op(item) for item in self._conversation_items(batch, last_seq, now)]
        if batch.new_turn is not None:
            turn = {**batch.new_turn.model_dump(mode="json"), "start_seq": first}
            prefix = keys.session_blob_prefix(batch.session_id)
            tools = self._text_out("tools", codec.dumps(turn.pop("tools")), prefix)
            turn_key = keys.turn_key(batch.session_id, batch.new_turn.response_id)
            ops.append(self._new_item_op({**turn, **tools, **turn_key}))
        ops += [self._new_item_op(self._call_item(call)) for call in batch.new_calls]
        if batch.decision is not None:
            ops.append(self._decision_op(batch.session_id, batch.decision, batch.turn_end))
        if batch.turn_end is not None and _same_turn(batch) != batch.turn_end:
            ops.append(self._turn_end_op(batch.session_id, batch.turn_end))
        ops += [self._cancel_call_op(call, output) for call, output in batch.cancel_calls]
        if batch.approvals:
            ops += [self._approval_op(resolution) for resolution in batch.approvals]
            ops.append(
                self._count_down_op(
                    batch.session_id, batch.approvals[0].call.response_id, len(batch.approvals)
                )
            )
        ops += [
            self._new_item_op({**keys.dedupe_key(batch.session_id, claim), keys.TTL_ATTRIBUTE: expires})
            for claim in batch.claims
        ]
        return ops

    def _session_op(self, batch: Append, last_seq: int, now: int) -> dict[str, Any]:
        """Move ``last_seq`` on (only from the value read) and apply the batch's guard and change."""
        names = {"#last_seq": "last_seq", "#updated_at": "updated_at"}
        values: dict[str, Any] = {
            ":old": codec.attr(last_seq),
            ":new": codec.attr(last_seq + len(batch.events)),
            ":now": codec.attr(now),
        }
        sets = ["#last_seq = :new", "#updated_at = :now"]
        more_sets, removes = change_expressions(batch.change, names, values, batch.session_id)
        sets += more_sets
        guard = guard_condition(batch.guard, names, values)
        adds = _token_adds(batch.decision, values, ":s")
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.to_item(keys.session_key(batch.session_id)),
                "UpdateExpression": "SET "
                + ", ".join(sets)
                + (" REMOVE " + ", ".join(removes) if removes else "")
                + adds,
                "ConditionExpression": "#last_seq = :old" + (f" AND {guard}" if guard else ""),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _event_items(self, batch: Append, first: int, expires: int) -> list[dict[str, Any]]:
        pk = keys.session_pk(batch.session_id)
        prefix = keys.session_blob_prefix(batch.session_id)
        return [
            {
                "pk": pk,
                "sk": keys.event_sk(first + i),
                "seq": first + i,
                "type": type_,
                **self._text_out("data", codec.dumps(data), prefix),
                keys.TTL_ATTRIBUTE: expires,
                keys.EVENT_AT: expires - self.event_ttl_s,
            }
            for i, (type_, data) in enumerate(batch.events)
        ]

    def _conversation_items(self, batch: Append, last_seq: int, now: int) -> list[dict[str, Any]]:
        pk = keys.session_pk(batch.session_id)
        out = []
        for item, (sk, seq) in zip(batch.items, _item_keys(batch, last_seq), strict=True):
            out.append(
                {
                    "pk": pk,
                    "sk": sk,
                    "id": item.id,
                    "type": item.type,
                    "response_id": item.response_id,
                    "created_at": now,
                    "position": seq,
                    **self._text_out(
                        "data", codec.dumps(item.data), keys.session_blob_prefix(batch.session_id)
                    ),
                }
            )
        return out

    def _explain_cancellation(self, batch: Append, last_seq: int, exc: ClientError) -> None:
        """Return when the append had landed before (its dedupe key exists); else raise why it failed."""
        reasons = cancellation_codes(exc)
        if batch.dedupe_key and (
            (len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed")
            or (not reasons and self.dedupe_exists(batch.session_id, batch.dedupe_key))
        ):
            return
        if reasons and reasons[0] != "ConditionalCheckFailed":
            raise ConditionFailedError(
                f"Session '{batch.session_id}' changed under a write: {', '.join(reasons)}"
            ) from exc
        current = self._last_seq(batch.session_id)
        if current != last_seq:
            raise _SeqMoved(current) from exc
        raise ConditionFailedError(
            f"Session '{batch.session_id}' is not in the state this change requires"
        ) from exc

    def _new_item_op(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": codec.to_item(item),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _call_item(self, call: PendingCall) -> dict[str, Any]:
        item = call.model_dump(mode="json")
        item["details"] = codec.dumps(item["details"]) if item.get("details") else None
        prefix = keys.session_blob_prefix(call.session_id)
        item.update(self._text_out("arguments", item.pop("arguments"), prefix))
        if item.get("output") is not None:
            item.update(self._text_out("output", item.pop("output"), prefix))
        return {**item, **keys.call_key(call.session_id, call.response_id, call.call_id)}

    def _turn_end_op(self, session_id: str, end: TurnEnd) -> dict[str, Any]:
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        expression = "SET " + ", ".join(_turn_end_sets(end, names, values))
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.to_item(keys.turn_key(session_id, end.response_id)),
                "UpdateExpression": expression,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _decision_op(
        self, session_id: str, decision: TurnDecision, end: TurnEnd | None = None
    ) -> dict[str, Any]:
        recorded = {
            "iteration": decision.iteration,
            "next": decision.next,
            "consumed_seq": decision.consumed_seq,
            "unanswered": decision.unanswered,
            "input_tokens": decision.input_tokens,
            "output_tokens": decision.output_tokens,
            "cost_micros": decision.cost_micros,
            "decided_at": decision.decided_at or int(time.time()),
        }
        values = {
            ":u": codec.attr(decision.unanswered),
            ":i": codec.attr(decision.iteration),
            ":d": codec.attr(codec.dumps(recorded)),
        }
        adds = _token_adds(decision, values, ":t")
        names: dict[str, str] = {}
        sets = ["unanswered = :u", "await_iteration = :i", "last_decision = :d"]
        if end is not None:  # the same model call's result ends the turn: one update of the row
            sets += _turn_end_sets(end, names, values)
        update: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
        return {
            "Update": {
                **update,
                "TableName": self.table,
                "Key": codec.to_item(keys.turn_key(session_id, decision.response_id)),
                "UpdateExpression": "SET " + ", ".join(sets) + adds,
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": values,
            }
        }

    def _approval_op(self, resolution: ApprovalResolution) -> dict[str, Any]:
        """Approve or deny a call still awaiting approval (fails if another answer won the race)."""
        call = resolution.call
        sets = ["approval = :a", "answered_at = :now"]
        values: dict[str, Any] = {
            ":a": codec.attr("approved" if resolution.approved else "denied"),
            ":pending": codec.attr("pending"),
            ":now": codec.attr(int(time.time())),
        }
        if resolution.output is not None:
            sets.append("#o = :o")
            values[":o"] = codec.attr(resolution.output)
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.to_item(keys.call_key(call.session_id, call.response_id, call.call_id)),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": "approval = :pending AND attribute_not_exists(#o)",
                "ExpressionAttributeNames": {"#o": "output"},
                "ExpressionAttributeValues": values,
            }
        }

    def _count_down_op(self, session_id: str, response_id: str, n: int) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.to_item(keys.turn_key(session_id, response_id)),
                "UpdateExpression": "SET unanswered = unanswered - :n",
                "ConditionExpression": "unanswered >= :n",
                "ExpressionAttributeValues": {":n": codec.attr(n)},
            }
        }

    def _cancel_call_op(self, call: PendingCall, output: str) -> dict[str, Any]:
        """Give an unanswered call its cancellation output (fails if an answer won the race)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.to_item(keys.call_key(call.session_id, call.response_id, call.call_id)),
                "UpdateExpression": "SET #o = :o, cancelled = :t, answered_at = :now",
                "ConditionExpression": (
                    "attribute_exists(pk) AND attribute_not_exists(#o) AND attribute_not_exists(output_blob)"
                ),
                "ExpressionAttributeNames": {"#o": "output"},
                "ExpressionAttributeValues": {
                    ":o": codec.attr(output),
                    ":t": codec.attr(True),
                    ":now": codec.attr(int(time.time())),
                },
            }
        }

    def dedupe_exists(self, session_id: str, key: str) -> bool:
        """Whether an append (or claim) with this dedupe key has landed."""
        return self._get(keys.dedupe_key(session_id, key), projection=["pk"]) is not None

    def claim(self, session_id: str, key: str) -> bool:
        """Put a dedupe marker unless it exists; True when this caller put it."""
        expires = int(time.time()) + self.event_ttl_s
        return self._put_new({**keys.dedupe_key(session_id, key), keys.TTL_ATTRIBUTE: expires})

    def read_event_page(
        self, session_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredEvent], int, bool]:
        """One page: the retained events with seq > ``after``, the last seq it covered, whether more may follow.

        Expired events (past their TTL but not yet deleted: moto never deletes,
        DynamoDB lags) are skipped, yet still move the cursor, so a reader
        never re-reads them forever. A page is also cut short when its items
        reach DynamoDB's 1 MB per Query, well before ``limit``: the
        ``LastEvaluatedKey`` says so, and the reader then reads on at once
        instead of waiting a poll interval as if it had caught up.
        """
        r = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
            ExpressionAttributeValues={
                ":p": codec.attr(keys.session_pk(session_id)),
                ":a": codec.attr(keys.event_sk(after + 1)),
                ":b": codec.attr(keys.event_sk(keys.MAX_SEQ)),
            },
            ConsistentRead=True,
            Limit=limit,
        )
        now = int(time.time())
        out = []
        covered = after
        raw_items = r.get("Items", [])
        for raw in raw_items:
            attrs = codec.from_item(raw)
            covered = int(attrs["seq"])
            if int(attrs.get(keys.TTL_ATTRIBUTE, now + 1)) < now:
                continue
            out.append(
                StoredEvent(
                    seq=covered,
                    type=attrs["type"],
                    data=codec.loads(self._text_in(attrs, "data"), {}),
                    at=int(attrs[keys.EVENT_AT]) if keys.EVENT_AT in attrs else None,
                )
            )
        return out, covered, len(raw_items) >= limit or "LastEvaluatedKey" in r

    def list_items(
        self,
        session_id: str,
        *,
        through_seq: int | None = None,
        newest: int | None = None,
        for_turn: bool = False,
        pending_anchor: int | None = None,
    ) -> list[ConversationItem]:
        """A session's items in order, optionally only those published by seq <= ``through_seq``.

        ``newest=N`` reads only the last N such items (a descending query that stops once it has
        them), so a snapshot of a long session reads a page, not the whole history.
        ``for_turn``: the caller is the session's running turn (see :class:`_TurnItems`): only what
        was published since this process last read the session's items is read, and the items are
        the ones handed out before (a model call's input is built from them, not written to them).
        ``pending_anchor``: the caller still appends items anchored there, after this cut (a model
        call's outputs, appended while the model is called): a later read must look from there.
        """
        if for_turn and through_seq is not None and newest is None:
            rows = self._turn_items.read(self, session_id, through_seq, pending_anchor)
        else:
            rows = self._item_rows(session_id, through_seq=through_seq, newest=newest)
        return [row.item for row in rows]

    @cached_property
    def _turn_items(self) -> _TurnItems:
        return _TurnItems()

    def _item_rows(
        self,
        session_id: str,
        *,
        through_seq: int | None = None,
        newest: int | None = None,
        from_anchor: int | None = None,
    ) -> list[_ItemRow]:
        """The session's item rows in conversation order (``from_anchor``: those anchored there or later)."""
        pk = codec.attr(keys.session_pk(session_id))
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :i)",
            "ExpressionAttributeValues": {":p": pk, ":i": codec.attr(keys.ITEM_PREFIX)},
            "ConsistentRead": True,
        }
        if from_anchor is not None:
            query["KeyConditionExpression"] = "pk = :p AND sk BETWEEN :lo AND :hi"
            query["ExpressionAttributeValues"] = {
                ":p": pk,
                ":lo": codec.attr(keys.item_anchor_floor(from_anchor)),
                ":hi": codec.attr(keys.ITEM_CEILING),
            }

        def visible(attrs: dict[str, Any]) -> bool:
            return through_seq is None or int(attrs["position"]) <= through_seq

        if newest is None:
            rows = [a for a in self._query_all(query) if visible(a)]
        else:
            rows = []
            query["ScanIndexForward"] = False
            while len(rows) < newest:
                r = self.client.query(**query, Limit=newest - len(rows) + 1)
                rows.extend(a for a in map(codec.from_item, r.get("Items", [])) if visible(a))
                if "LastEvaluatedKey" not in r:
                    break
                query = {**query, "ExclusiveStartKey": r["LastEvaluatedKey"]}
            rows = rows[:newest][::-1]
        return [self._item_row(attrs) for attrs in rows]

    def _item_row(self, attrs: dict[str, Any]) -> _ItemRow:
        text = self._text_in(attrs, "data")
        item = ConversationItem(
            id=attrs["id"],
            type=attrs["type"],
            response_id=attrs.get("response_id"),
            created_at=int(attrs["created_at"]),
            position=int(attrs["position"]),
            data=codec.loads(text, {}),
        )
        return _ItemRow(str(attrs["sk"]), item, len(text or ""))


@dataclass(frozen=True, slots=True)
class _ItemRow:
    sk: str  # conversation order
    item: ConversationItem
    size: int  # bytes of its data as stored (what holding it costs, roughly)

    @property
    def position(self) -> int:
        return self.item.position


@dataclass
class _SessionItems:
    through: int  # every item published at seq <= through is in rows
    floor: int  # the last cut a model call read (or its pending outputs' anchor): later items anchor there or after
    rows: list[_ItemRow]
    size: int = 0  # the rows' bytes


class _TurnItems:
    """The items a warm environment last read for each session's turn, so the next model call reads
    only what was published since, not the whole history again (a long session's every call read
    every item: a turn's cost grew with its session's age).

    Why reading from the last cut's anchor on finds everything new: items are written once, each in
    the append that publishes it, and sort by (anchor, seq). A user message anchors at its own seq,
    which is past any earlier cut; what a model call produced anchors at the cut that call read.
    A session runs one turn at a time and its steps one after another, and only the active turn's
    appends land, so any model call whose results land after this read started after it, reading a
    cut at least this one. A reader that can overlap a running turn (the API, a stream) cannot
    reason so and reads the whole history. This process's own appends add their items at once
    (nothing else moved the session in between when it held everything through the append's
    starting seq), so a model call right after its own step's writes reads nothing; the anchor
    floor stays the last cut read, since outputs recorded later still anchor at that cut.
    """

    MAX_SESSIONS = 64
    MAX_ITEMS = 4000  # a longer history is read whole each time rather than held
    MAX_BYTES = 16 * 1024 * 1024  # what all sessions' items may hold in a Lambda environment, roughly

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _SessionItems] = OrderedDict()
        self._bytes = 0  # what every held session's rows add up to

    def read(
        self, log: EventLog, session_id: str, through_seq: int, pending_anchor: int | None = None
    ) -> list[_ItemRow]:
        """The items through ``through_seq``; ``pending_anchor``: the reader's own items still to come
        anchor there (earlier than this cut), so the floor a later read looks from goes down to it."""
        floor = through_seq if pending_anchor is None else min(through_seq, pending_anchor)
        with self._lock:
            known = self._sessions.get(session_id)
        if known is None or known.through > through_seq:
            rows = log._item_rows(session_id, through_seq=through_seq)
        elif known.through == through_seq:  # nothing published since, or only by this process's appends
            rows = known.rows
        else:
            fresh = [
                row
                for row in log._item_rows(session_id, through_seq=through_seq, from_anchor=known.floor)
                if row.position > known.through
            ]
            rows = sorted(known.rows + fresh, key=lambda row: row.sk) if fresh else known.rows
        with self._lock:
            current = self._sessions.get(session_id)
            if len(rows) <= self.MAX_ITEMS and (current is None or current.through <= through_seq):
                self._hold(session_id, _SessionItems(through_seq, floor, rows, _size(rows)))
        return rows

    def appended(self, session_id: str, before: int, rows_after: tuple[int, list[_ItemRow]]) -> None:
        """This process's append moved the session from ``before`` on: what it held stays whole when
        it held everything through ``before`` (then the append's own items are all that is new)."""
        after, rows = rows_after
        with self._lock:
            known = self._sessions.get(session_id)
            if known is not None and known.through == before:
                merged = sorted(known.rows + rows, key=lambda row: row.sk)
                if len(merged) <= self.MAX_ITEMS:  # what it appended comes after the cut a model call read
                    self._hold(
                        session_id, _SessionItems(after, known.floor, merged, known.size + _size(rows))
                    )

    def _hold(self, session_id: str, held: _SessionItems) -> None:
        """Under the lock: keep ``held``; the least recently read sessions go first, past the count or
        the bytes."""
        previous = self._sessions.pop(session_id, None)
        self._bytes += held.size - (previous.size if previous is not None else 0)
        self._sessions[session_id] = held
        while self._sessions and (len(self._sessions) > self.MAX_SESSIONS or self._bytes > self.MAX_BYTES):
            _, dropped = self._sessions.popitem(last=False)
            self._bytes -= dropped.size


def _size(rows: list[_ItemRow]) -> int:
    return sum(row.size for row in rows)


def _item_keys(batch: Append, last_seq: int) -> list[tuple[str, int]]:
    """Each item's sort key and position when ``batch`` is appended after ``last_seq``."""
    n = len(batch.events)
    out = []
    for idx, item in enumerate(batch.items):
        seq = last_seq + 1 + (item.event_index if item.event_index >= 0 else n - 1) if n else last_seq
        anchor = item.anchor_seq if item.anchor_seq is not None else seq
        out.append((keys.item_sk(anchor, seq, idx), seq))
    return out


def _token_adds(decision: TurnDecision | None, values: dict[str, Any], prefix: str) -> str:
    """`` ADD`` clause summing a model call's tokens (and cost) into a row (atomic; the append's dedupe
    makes it once)."""
    if decision is None or not (decision.input_tokens or decision.output_tokens or decision.cost_micros):
        return ""
    values[prefix + "in"] = codec.attr(decision.input_tokens)
    values[prefix + "out"] = codec.attr(decision.output_tokens)
    adds = f" ADD input_tokens {prefix}in, output_tokens {prefix}out"
    if decision.cost_micros:
        values[prefix + "usd"] = codec.attr(decision.cost_micros)
        adds += f", spend_micros {prefix}usd"
    return adds


def _same_turn(batch: Append) -> TurnEnd | None:
    """The batch's turn end when its decision's update of the same row carries it (one op, not two)."""
    end = batch.turn_end
    if end is not None and batch.decision is not None and batch.decision.response_id == end.response_id:
        return end
    return None


def _turn_end_sets(end: TurnEnd, names: dict[str, str], values: dict[str, Any]) -> list[str]:
    """``SET`` clauses recording how a turn ended on its row (``status`` is a reserved word)."""
    names["#end_status"] = "status"
    values[":end_status"] = codec.attr(end.status)
    values[":end_at"] = codec.attr(end.completed_at)
    sets = ["#end_status = :end_status", "completed_at = :end_at"]
    if end.error is not None:
        values[":end_error"] = codec.attr(codec.dumps(end.error))
        sets.append("turn_error = :end_error")
    return sets
