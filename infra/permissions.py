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

  - ``live``: the bearer-token lookup, the session row and its connection row (GetItem), the
    replay's event pages (Query), a new connection row (PutItem), the principal and the set of
    watched sessions on it (UpdateItem), a subscription with that set in one transaction (PutItem,
    UpdateItem), an unsubscribe (DeleteItem) and a disconnect's cleanup (BatchWriteItem).
  - ``push_fanout``: the subscriptions of a session (Query) and a gone connection's rows
    (DeleteItem). Its stream reads are the event source mapping's, granted by the live construct.

  - ``lifecycle_events``: the session row and a delivery (GetItem), the event log around a run of calls
    (Query) and the endpoints of a session's owner (Query on ``by_owner``), a new delivery (PutItem), and
    the delivery marked queued once its message is sent (UpdateItem, ``WebhookRecords.mark_queued``).
    Its stream reads are the event source mapping's, granted by the lifecycle construct.
  - ``webhook_delivery``: the endpoint and the delivery (GetItem), an attempt recorded, the endpoint's
    failure state and its disabling (UpdateItem). The API manages endpoints with the actions it has.

  - ``schedule_run`` (a scheduled task's occurrence came due): the task, its runs and the agent
    (GetItem, Query), the task's next occurrence and the run record (PutItem, conditional on the
    revision or status), the run's session and its first message (PutItem, and the append's
    transaction: PutItem, UpdateItem, ConditionCheckItem), the per-hour and per-minute quota counters
    (UpdateItem), the owner index to count the owner's sessions and running turns, and the agent-name
    index to find an OpenAI automation's agent's newest version. Never deletes.
  - ``reconcile_turns``: the sparse ``running_sessions`` index (Query), the session and its turn
    (GetItem), the wake-up claim and its release (UpdateItem), and the failure it records for a
    dead execution (a transaction: PutItem, UpdateItem, ConditionCheckItem). Its schedule repair
    pass reads the sparse ``due_schedules`` index (Query) and the task (GetItem), records missed
    runs (PutItem, conditional on their absence) and moves the task on (PutItem, conditional on its
    revision). In the cloud it also reads the ``idle#`` entries of that index and stops each idle
    interpreter session (the hosted environment row: GetItem, UpdateItem). Never deletes.

  Nobody gets Scan: only the operator's ``skyloop token list`` (own
  credentials) and the local stack's TTL sweep scan the table.
* ``TURN_ACCESS``: actions on the turn state machine. ``start``: StartExecution
  (post a message); ``stop``: StopExecution on its executions (interrupt,
  delete); ``resume``: SendTaskSuccess (the last client-tool output wakes a
  parked turn, and a parked step resumes or wakes its own turn); ``heartbeat``: SendTaskHeartbeat (a
  client still there while a turn waits for it, ``limits.client_heartbeat_s``); ``describe``: DescribeExecution
  on its executions (the reconciler asks whether a running session's execution still runs).
* ``BLOB_ACCESS``: S3 actions on the blob bucket (``SKYLOOP_BLOB_BUCKET``: texts over 32 KB, and
  session files), by key prefix. ``skyloop.store.blobs`` writes content-addressed objects under
  ``sessions/<id>/`` (events, items, call outputs) and ``agents/<id>/`` (specs, MCP listings);
  session files live under ``files/``. Readers (``stream``) may only get; ``reconcile_turns`` also
  puts (a workspace snapshot before it stops an idle interpreter session);
  the turn steps get and put (appends and outputs; an MCP listing under ``agents/``) but never
  delete; the ``api`` also deletes and lists, because deleting a session deletes its prefix
  (ListObjectsV2 + DeleteObjects, which IAM authorizes as ``s3:DeleteObject`` per key) and
  session files are listed and removed (and a test delivery's body under ``webhooks/``). The
  lifecycle publisher reads events from the bucket and puts a large delivery body under
  ``webhooks/``, which the delivery function reads. The live channel's functions (``live``, ``push_fanout``) only
  get: an event too large for its row is read back to be pushed.
* ``SECRET_ACCESS``: Secrets Manager actions, by secret name pattern under the stack's prefix
  (``SKYLOOP_SECRETS_PREFIX``, ``skyloop.secrets``). The ``api`` creates the key secret of an
  agent on register and writes a new value when the key changes (CreateSecret, then
  PutSecretValue when it exists) and deletes it, without a recovery window, when the agent is
  removed (DeleteSecret); ``turn`` (its model calls) reads agents' model keys
  (``<prefix>/<agent id>/api_key``); ``turn`` (listing an MCP server's tools) and ``run_tool`` (calling
  them) read the secrets MCP headers name, which must live under ``<stack>/tools/`` (beside the prefix).
  Nobody else touches a secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skyloop.store.keys import INDEX_BY_AGENT_NAME, INDEX_BY_OWNER, INDEX_DUE, INDEX_RUNNING

TurnAction = Literal["start", "stop", "resume", "heartbeat", "describe"]
SchedulerAction = Literal[
    "scheduler:GetSchedule",
    "scheduler:CreateSchedule",
    "scheduler:UpdateSchedule",
    "scheduler:DeleteSchedule",
]


@dataclass(frozen=True)
class TableAccess:
    """IAM actions on the table (``dynamodb:...``) and the GSIs the function queries."""

    actions: tuple[str, ...]
    indexes: tuple[str, ...] = ()


# What every turn step does on the table (see the module docstring): no deletes, no index.
_TURN_STEP = TableAccess(
    actions=(
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    )
)

TABLE_ACCESS: dict[str, TableAccess] = {
    "api": TableAccess(
        actions=(*_TURN_STEP.actions, "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"),
        indexes=(INDEX_BY_OWNER, INDEX_BY_AGENT_NAME),
    ),
    "stream": TableAccess(actions=("dynamodb:GetItem", "dynamodb:Query")),
    "turn": _TURN_STEP,
    # a server tool call: reads the call and its agent, keeps an MCP listing (PutItem), records
    # the output (transaction) and announces the call (append); never deletes
    "run_tool": _TURN_STEP,
    # the turn steps' access, the sparse index of running sessions it sweeps, and the index of armed
    # scheduled tasks its repair pass reads
    "reconcile_turns": TableAccess(actions=_TURN_STEP.actions, indexes=(INDEX_RUNNING, INDEX_DUE)),
    # the owner's sessions and running turns (quotas), and an OpenAI automation's agent: its newest
    # version, found by name (skyloop.openai_compat.agents.resolve)
    "schedule_run": TableAccess(actions=_TURN_STEP.actions, indexes=(INDEX_BY_OWNER, INDEX_BY_AGENT_NAME)),
    "live": TableAccess(
        actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        )
    ),
    "push_fanout": TableAccess(actions=("dynamodb:Query", "dynamodb:DeleteItem")),
    "lifecycle_events": TableAccess(
        actions=("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"),
        indexes=(INDEX_BY_OWNER,),
    ),
    "webhook_delivery": TableAccess(actions=("dynamodb:GetItem", "dynamodb:UpdateItem")),
}

TURN_ACCESS: dict[str, tuple[TurnAction, ...]] = {
    "api": ("start", "stop", "resume", "heartbeat"),
    "turn": ("resume",),  # parking resumes (or wakes) its own turn when every call was answered
    "reconcile_turns": ("describe", "resume"),
    "schedule_run": ("start",),  # a run's turn
}

# ------------------------------------------------------------------------------- schedules
# EventBridge Scheduler actions on the schedules of the stack's group only (schedule/<group>/*), and
# iam:PassRole of the role schedules invoke the run function with (only to scheduler.amazonaws.com).
# The API puts a task's schedule (an update, or a create when there is none) and deletes it; the run
# function re-arms a one-time schedule the same way and deletes a schedule whose task is gone. The
# reconciler's repair pass (skyloop.schedules.repair) reads a schedule to compare it with its task and
# puts it again, and deletes the schedules whose task is gone; it lists the group's schedules
# (scheduler:ListSchedules, which takes no resource: SCHEDULE_LISTERS get it on "*", acknowledged in
# cdk-nag) and invokes the run function for an occurrence it catches up on (SCHEDULE_DISPATCHERS).
_PUT_AND_DELETE: tuple[SchedulerAction, ...] = (
    "scheduler:CreateSchedule",
    "scheduler:UpdateSchedule",
    "scheduler:DeleteSchedule",
)
SCHEDULER_ACCESS: dict[str, tuple[SchedulerAction, ...]] = {
    "api": _PUT_AND_DELETE,
    "schedule_run": _PUT_AND_DELETE,
    "reconcile_turns": ("scheduler:GetSchedule", *_PUT_AND_DELETE),
}
SCHEDULE_LISTERS: tuple[str, ...] = ("reconcile_turns",)
SCHEDULE_DISPATCHERS: tuple[str, ...] = ("reconcile_turns",)

# ------------------------------------------------------------------------------------ blobs
# Key prefixes of the blob bucket (skyloop.store.keys.session_blob_prefix / agent_blob_prefix;
# session files under files/). tests/infra checks they match the store's.
SESSIONS_PREFIX = "sessions/"
AGENTS_PREFIX = "agents/"
FILES_PREFIX = "files/"
WEBHOOKS_PREFIX = "webhooks/"  # webhook delivery bodies too large for their row


@dataclass(frozen=True)
class BlobAccess:
    """``s3:`` object actions on keys under ``prefixes``; ``s3:ListBucket`` limited to ``list_prefixes``."""

    actions: tuple[str, ...]
    prefixes: tuple[str, ...]
    list_prefixes: tuple[str, ...] = ()


_READ = BlobAccess(actions=("s3:GetObject",), prefixes=(SESSIONS_PREFIX, AGENTS_PREFIX))
_READ_WRITE = BlobAccess(actions=("s3:GetObject", "s3:PutObject"), prefixes=(SESSIONS_PREFIX, AGENTS_PREFIX))

BLOB_ACCESS: dict[str, BlobAccess] = {
    "api": BlobAccess(
        actions=("s3:GetObject", "s3:PutObject", "s3:DeleteObject"),
        prefixes=(SESSIONS_PREFIX, AGENTS_PREFIX, FILES_PREFIX, WEBHOOKS_PREFIX),
        list_prefixes=(SESSIONS_PREFIX, FILES_PREFIX),
    ),
    "stream": _READ,
    "turn": _READ_WRITE,
    "run_tool": _READ_WRITE,
    "reconcile_turns": _READ_WRITE,  # stopping an idle interpreter session snapshots its workspace first
    "schedule_run": _READ_WRITE,  # a run's first message (a long prompt goes to the bucket), the agent's spec
    "live": _READ,  # a replay reads events whose payload lives in the bucket
    "push_fanout": _READ,  # as does a new event's
    # reads events stored in the bucket; a delivery body too large for its row goes under webhooks/
    "lifecycle_events": BlobAccess(
        actions=("s3:GetObject", "s3:PutObject"), prefixes=(SESSIONS_PREFIX, WEBHOOKS_PREFIX)
    ),
    "webhook_delivery": BlobAccess(actions=("s3:GetObject",), prefixes=(WEBHOOKS_PREFIX,)),
}

# ---------------------------------------------------------------------------------- secrets
# Secret name patterns, filled in by the stack: "{agents}" is SKYLOOP_SECRETS_PREFIX
# (<stack>/agents), "{tools}" its sibling <stack>/tools. Secrets Manager appends "-" and 6 random
# characters to every secret's ARN.
AGENT_KEY_SECRETS = "{agents}/*/api_key"  # skyloop.secrets.api_key_secret_name
TOOL_SECRETS = "{tools}/*"  # what MCP headers may name (SecretRef)


@dataclass(frozen=True)
class SecretAccess:
    actions: tuple[str, ...]
    names: tuple[str, ...]


SECRET_ACCESS: dict[str, SecretAccess] = {
    "api": SecretAccess(
        actions=(
            "secretsmanager:CreateSecret",
            "secretsmanager:PutSecretValue",
            "secretsmanager:DeleteSecret",
        ),
        names=(AGENT_KEY_SECRETS,),
    ),
    # model keys, and the MCP header secrets of the servers it lists tools from
    "turn": SecretAccess(actions=("secretsmanager:GetSecretValue",), names=(AGENT_KEY_SECRETS, TOOL_SECRETS)),
    "run_tool": SecretAccess(actions=("secretsmanager:GetSecretValue",), names=(TOOL_SECRETS,)),
}

# ------------------------------------------------------------------------ hosted environments
# AgentCore Code Interpreter data-plane actions on the stack's two interpreters
# (infra/constructs/environments.py; skyloop.environments.agentcore): run_tool runs hosted calls (starts a
# session's interpreter session, invokes its tools, stops the one it started when another call's won the
# race); turn snapshots the workspace at a turn's end (invokes the session it has, never starts one);
# api forks (snapshots the source first) and deletes (stops the session's); reconcile_turns stops the
# interpreter sessions idle past SKYLOOP_HOSTED_IDLE_S (snapshots each first); run_tool also moves a session
# past ROTATE_AFTER_S to a new one (snapshot, stop, start). The files API reads snapshots from the bucket
# (its sessions/ grant).
HOSTED_ACCESS: dict[str, tuple[str, ...]] = {
    "run_tool": (
        "bedrock-agentcore:StartCodeInterpreterSession",
        "bedrock-agentcore:InvokeCodeInterpreter",
        "bedrock-agentcore:StopCodeInterpreterSession",
    ),
    "turn": ("bedrock-agentcore:InvokeCodeInterpreter",),
    "api": ("bedrock-agentcore:InvokeCodeInterpreter", "bedrock-agentcore:StopCodeInterpreterSession"),
    "reconcile_turns": (
        "bedrock-agentcore:InvokeCodeInterpreter",
        "bedrock-agentcore:StopCodeInterpreterSession",
    ),
}
