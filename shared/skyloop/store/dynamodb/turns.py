"""Turn records (one per execution) and the client calls a parked turn waits on."""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from skyloop.errors import NotFoundError
from skyloop.models.session import PendingCall, Turn, turn_order
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code
from skyloop.store.records import TurnDecision

# What a turn listing reads of each row (no tools, no task token)
TURN_LISTING = (
    "session_id",
    "response_id",
    "agent_id",
    "created_at",
    "start_seq",
    "input_tokens",
    "output_tokens",
    "spend_micros",
    "status",
    "completed_at",
    "turn_error",
    "await_iteration",
    "unanswered",
    "resumed_iteration",
    "last_decision",
)


def _turn_from(attrs: dict[str, Any]) -> Turn:
    attrs = dict(attrs)
    decision = codec.loads(attrs.get("last_decision"))
    attrs["decided_iteration"] = decision["iteration"] if decision else None
    attrs["error"] = codec.loads(attrs.pop("turn_error", None))
    return Turn.model_validate({k: v for k, v in attrs.items() if k in Turn.model_fields})


class TurnRecords(TableBase):
    def get_turn(self, session_id: str, response_id: str) -> Turn:
        attrs = self._get(keys.turn_key(session_id, response_id))
        if attrs is None:
            raise NotFoundError(f"Turn not found: '{response_id}'")
        attrs["tools"] = codec.loads(self._text_in(attrs, "tools"), [])
        return _turn_from(attrs)

    def list_turns(self, session_id: str) -> list[Turn]:
        """Every turn of a session, oldest first (without their tools: a listing shows none)."""
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :t)",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.session_pk(session_id)),
                    ":t": codec.attr(keys.TURN_PREFIX),
                },
                "ProjectionExpression": ", ".join(f"#a{i}" for i in range(len(TURN_LISTING))),
                "ExpressionAttributeNames": {f"#a{i}": name for i, name in enumerate(TURN_LISTING)},
                "ConsistentRead": True,
            }
        )
        turns = [_turn_from(attrs) for attrs in rows]
        return sorted(turns, key=turn_order)

    def get_decision(self, session_id: str, response_id: str) -> TurnDecision | None:
        """The decision the turn's last landed model call recorded, if any."""
        attrs = self._get(keys.turn_key(session_id, response_id), projection=["last_decision"])
        raw = codec.loads((attrs or {}).get("last_decision"))
        return TurnDecision(response_id=response_id, **raw) if raw else None

    def _update_turn(
        self,
        session_id: str,
        response_id: str,
        expression: str,
        values: dict[str, Any],
        condition: str = "attribute_exists(pk)",
        names: dict[str, str] | None = None,
    ) -> bool:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Key": codec.to_item(keys.turn_key(session_id, response_id)),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {k: codec.attr(v) for k, v in values.items()},
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self.client.update_item(**kwargs)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def park_turn(self, session_id: str, response_id: str, *, task_token: str, iteration: int) -> None:
        """Keep the token the parked execution waits on (stored before any call is published)."""
        if not self._update_turn(
            session_id,
            response_id,
            "SET task_token = :t, await_iteration = :i",
            {":t": task_token, ":i": iteration},
        ):
            raise NotFoundError(f"Turn not found: '{response_id}'")

    def claim_resume(self, session_id: str, response_id: str, iteration: int) -> bool:
        """Claim the one wake-up of a parked iteration; False when another caller holds it."""
        return self._update_turn(
            session_id,
            response_id,
            "SET resumed_iteration = :i",
            {":i": iteration},
            "attribute_exists(pk) AND (attribute_not_exists(resumed_iteration) OR resumed_iteration < :i)",
        )

    def release_resume(self, session_id: str, response_id: str, iteration: int) -> None:
        """Give a claimed wake-up back (the wake-up failed), so a retry can claim it again."""
        self._update_turn(
            session_id,
            response_id,
            "REMOVE resumed_iteration",
            {":i": iteration},
            "resumed_iteration = :i",
        )

    def _call_from(self, attrs: dict[str, Any]) -> PendingCall:
        attrs = dict(attrs)
        attrs["arguments"] = self._text_in(attrs, "arguments") or "{}"
        attrs["output"] = self._text_in(attrs, "output")
        attrs["details"] = (
            codec.loads(attrs.get("details")) if isinstance(attrs.get("details"), str) else None
        )
        return PendingCall.model_validate({k: v for k, v in attrs.items() if k in PendingCall.model_fields})

    def get_call(self, session_id: str, response_id: str, call_id: str) -> PendingCall | None:
        attrs = self._get(keys.call_key(session_id, response_id, call_id))
        return self._call_from(attrs) if attrs is not None else None

    def list_calls(
        self, session_id: str, response_id: str, *, iteration: int | None = None
    ) -> list[PendingCall]:
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :c)",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.session_pk(session_id)),
                    ":c": codec.attr(keys.calls_prefix(response_id)),
                },
                "ConsistentRead": True,
            }
        )
        calls = [self._call_from(attrs) for attrs in rows]
        if iteration is not None:
            calls = [c for c in calls if c.iteration == iteration]
        return sorted(calls, key=lambda c: (c.iteration, c.index))

    def answer_call(
        self,
        call: PendingCall,
        output: str,
        *,
        count_down: bool = True,
        details: dict[str, Any] | None = None,
    ) -> bool:
        """Record the output once; a client call's answer also counts it down on the turn, atomically.

        Only while the call's turn is the session's running turn. Returns False
        when the call already had an output or its turn has ended (the caller
        then compares outputs to answer idempotently or with 409). A server
        tool's output (``count_down=False``) is not waited for by a parked turn.
        """
        session_key = keys.session_key(call.session_id)
        stored = self._text_out("output", output, keys.session_blob_prefix(call.session_id))
        ((attr, value),) = stored.items()
        ops: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": codec.to_item(keys.call_key(call.session_id, call.response_id, call.call_id)),
                    "UpdateExpression": "SET #a = :o, answered_at = :t"
                    + (", details = :d" if details is not None else ""),
                    "ConditionExpression": (
                        "attribute_exists(pk) AND attribute_not_exists(#o) AND attribute_not_exists(#ob)"
                    ),
                    "ExpressionAttributeNames": {"#a": attr, "#o": "output", "#ob": "output_blob"},
                    "ExpressionAttributeValues": {
                        ":o": codec.attr(value),
                        ":t": codec.attr(int(time.time())),
                        **({":d": codec.attr(codec.dumps(details))} if details is not None else {}),
                    },
                }
            },
            {
                "ConditionCheck": {  # only the running turn takes outputs
                    "TableName": self.table,
                    "Key": codec.to_item(session_key),
                    "ConditionExpression": "active_response_id = :r",
                    "ExpressionAttributeValues": {":r": codec.attr(call.response_id)},
                }
            },
        ]
        if count_down:
            ops.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": codec.to_item(keys.turn_key(call.session_id, call.response_id)),
                        "UpdateExpression": "SET unanswered = unanswered - :one",
                        "ConditionExpression": "unanswered > :zero",
                        "ExpressionAttributeValues": {":one": codec.attr(1), ":zero": codec.attr(0)},
                    }
                }
            )
        try:
            self.client.transact_write_items(TransactItems=ops)
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return False
            raise
        return True
