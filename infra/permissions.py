"""What each function of the manifest may do, beyond writing its own logs and traces.

Every function of ``skyloop.manifest.FUNCTIONS`` must appear here: the stack
refuses to synthesize a function whose access nobody decided.

* ``TABLE_ACCESS``: the exact DynamoDB actions each function's code calls on the
  table, and the indexes it queries (read from ``skyloop.store.dynamodb``;
  nothing is granted on ``index/*``). The store calls ``TransactWriteItems``,
  which IAM has no action for: each item of a transaction is authorized as its
  own action (``Put`` -> ``PutItem``, ``Update`` -> ``UpdateItem``,
  ``ConditionCheck`` -> ``ConditionCheckItem``). Who calls what:

  - ``api``: reads (GetItem, Query; the ``by_owner`` and ``by_agent_name``
    indexes list sessions and agents and find an agent by name), creates
    sessions and agents (PutItem), edits sessions and claims wake-ups
    (UpdateItem), appends events and answers client calls in transactions
    (PutItem, UpdateItem, ConditionCheckItem), and deletes sessions
    (DeleteItem on the session row, Query for what is under it, BatchWriteItem).
  - turn steps (``run_tool`` too): reads by key and base-table queries (GetItem, Query), dedupe
    claims (PutItem), parking and decisions (UpdateItem), appends
    (transactions: PutItem, UpdateItem, ConditionCheckItem). They never delete.
  - ``stream``: the bearer-token lookup and the session row (GetItem) and the
    event pages (Query). Read only.

  Nobody gets Scan: only the operator's ``skyloop token list`` (own
  credentials) and the local stack's TTL sweep scan the table.
* ``TURN_ACCESS``: actions on the turn state machine. ``start``: StartExecution
  (post a message); ``stop``: StopExecution on its executions (interrupt,
  delete); ``resume``: SendTaskSuccess (the last client-tool output wakes a
  parked turn, and a parked step resumes or wakes its own turn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skyloop.store.keys import INDEX_BY_AGENT_NAME, INDEX_BY_OWNER

TurnAction = Literal["start", "stop", "resume"]


@dataclass(frozen=True)
class TableAccess:
    """IAM actions on the table (``dynamodb:...``) and the GSIs the function queries."""

    actions: tuple[str, ...]
    indexes: tuple[str, ...] = ()


TABLE_ACCESS: dict[str, TableAccess] = {
    "api": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        ),
        indexes=(INDEX_BY_OWNER, INDEX_BY_AGENT_NAME),
    ),
    "stream": TableAccess(actions=("dynamodb:GetItem", "dynamodb:Query")),
    "prepare_turn": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),
    "call_model": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),
    "await_client": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),
    "finish_turn": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),
    "fail_turn": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),  # a server tool call: reads the call and its agent, keeps an MCP listing (PutItem), records
    # the output (transaction) and announces the call (append); never deletes
    "run_tool": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
        )
    ),
}

TURN_ACCESS: dict[str, tuple[TurnAction, ...]] = {
    "api": ("start", "stop", "resume"),
    "await_client": ("resume",),
}
