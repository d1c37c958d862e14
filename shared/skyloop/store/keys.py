"""Every key, index and attribute name of the single table: the only place that knows them.

Key design (one table, ``pk``/``sk`` strings, two sparse GSIs)::

    record              pk                  sk                                  GSIs
    agent version       AGENT#<id>          AGENT                               by_owner:      agent#<owner> / <ts>#<id>
                                                                                by_agent_name: agent#<owner>#<name> / <ts>#<id>
    session             SESSION#<id>        META                                by_owner:      session#<owner> / <ts>#<id>
                                                                                by_agent_name: session#<owner>#<agent name> / <ts>#<id>
                                                                                running_sessions: running#<id[0]> / <ts>#<id> (while running)
    conversation item   SESSION#<id>        ITEM#<anchor:012>#<seq:012>#<idx:03>
    stream event        SESSION#<id>        EVENT#<seq:012>                     (TTL expires_at)
    dedupe marker       SESSION#<id>        DEDUPE#<key>                        (TTL expires_at)
    turn                SESSION#<id>        TURN#<response id>
    pending call        SESSION#<id>        CALL#<response id>#<call id>
    fork link           SESSION#<parent>    CHILD#<child id>
    session file        SESSION#<id>        FILE#<file id>
    hosted environment  SESSION#<id>        ENVIRONMENT                         due_schedules: idle#<id[0]> / <idle from:012>#<id> (cloud: while its interpreter session runs)
    file totals         SESSION#<id>        FILES                               (count and bytes of FILE# rows)
    MCP tool listing    AGENT#<id>          TOOLS#<server name>
    bearer token        TOKEN#<sha256>      TOKEN                               by_owner:      token#<owner> / <ts>#<id>
    quota window        QUOTA#<owner>       WINDOW#<minute>                     (TTL expires_at)
    live connection     LIVE#<connection>   CONNECTION                          (TTL expires_at: its 2-hour life)
    live subscription   SESSION#<id>        LIVE#<connection>                   (TTL expires_at, as its connection)
    webhook endpoint    WEBHOOK#<id>        ENDPOINT                            by_owner:      webhook#<owner> / <ts>#<id>
                                                                                (webhook-all#* when it takes every session's events)
    webhook delivery    WEBHOOK#<id>        DELIVERY#<event id>                 (TTL expires_at; event ids sort by time)
    scheduled task      SCHEDULE#<id>       TASK                                by_owner:      scheduled_task#<owner> / <ts>#<id>
                                                                                due_schedules: due#<id[0]> / <next run:012>#<id> (while armed)
    scheduled run       SCHEDULE#<id>       RUN#<run id>                        (run ids sort by time)
    Claude environment  ENVIRONMENT#<id>    ENVIRONMENT                         by_owner:      environment#<owner> / <ts>#<id>
    Claude work item    ENVIRONMENT#<id>    WORK#<work id>                      (TTL expires_at once stopped; work ids sort by time)
    Claude work poller  ENVIRONMENT#<id>    WORKER#<worker id>                  (TTL expires_at: its last poll's sighting)
    session's work      SESSION#<id>        WORK                                (the id of the session's newest work item)

Indexes are named after what they index: ``by_owner`` lists a principal's
agents, sessions or tokens newest last; ``by_agent_name`` lists the versions of
one agent name, or the sessions of one agent name, newest last;
``running_sessions`` holds exactly the sessions whose status is ``running``
(key ``running#<first hex digit of the id>``, so 16 partitions), which the
reconciler reads; ``due_schedules`` holds exactly the scheduled tasks that are
active and have a next occurrence, by that occurrence (16 partitions, as
above), which the local stack's scheduler reads to fire what is due, and (``idle#``
partitions) the cloud's interpreter sessions by when they count as idle, which
the reconciler reads to stop them. All are
sparse: a record is in an index only when it carries that index's key.

A scheduled task and its runs share a partition, so a task's history is one
Query (newest first: run ids begin with their time) and deleting a task is a
single-partition operation; the sessions its runs opened are ordinary
sessions and stay.

Everything under a session shares its partition, so deleting a session and
reading its log are single-partition operations; sequence numbers are 12
digits wide so they sort as strings.

The live channel (:mod:`skyloop.live`) keeps one row per WebSocket
connection (who it authenticated as) and one per subscription, in the
watched session's partition: the fan-out of a new event is one Query of
``LIVE#`` rows beside it, and deleting the session drops its subscriptions.
Both expire with the connection (API Gateway ends every connection within
two hours), so a lost ``$disconnect`` leaves nothing behind for long. The
table's stream carries every new ``EVENT#`` row to the fan-out function
(an event-source filter on that prefix drops everything else).

A webhook endpoint's deliveries share its partition, so deleting an
endpoint and listing its deliveries (newest first: an event id starts with
its time) are single-partition operations, and a delivery's key is the
event's id, so deriving one event twice enqueues it once. Routing an event
reads the ``by_owner`` index for the session owner's endpoints and for
those an admin opened to every session (``webhook-all#*``).

A self-hosted Claude environment's work queue lives in the environment's
partition: polling is one Query of ``WORK#`` rows (oldest first: a work id
starts with its time) and a claim is a conditional write on the row's
revision, so two pollers never take one item. The ``WORK`` row beside a
session names its newest work item; queueing writes the item and moves that
pointer in one transaction, so two messages racing queue one item. Stopped
items expire; so do the ``WORKER#`` sightings the queue's stats count.
"""

from __future__ import annotations

from skyloop.ids import DEFAULT_OWNER as DEFAULT_OWNER  # the keys fill it in; principals need it too

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expires_at"
EVENT_AT = "at"  # an event row's write time (epoch s): Claude's processed_at

INDEX_BY_OWNER = "by_owner"
INDEX_BY_AGENT_NAME = "by_agent_name"
INDEX_RUNNING = "running_sessions"
INDEX_DUE = "due_schedules"
OWNER_KEY = "owner_key"
NAME_KEY = "name_key"
RUNNING_KEY = "running_key"
CREATED_KEY = "created_key"
DUE_KEY = "due_key"
DUE_AT_KEY = "due_at_key"
INDEXES: dict[str, tuple[str, str]] = {
    INDEX_BY_OWNER: (OWNER_KEY, CREATED_KEY),
    INDEX_BY_AGENT_NAME: (NAME_KEY, CREATED_KEY),
    INDEX_RUNNING: (RUNNING_KEY, CREATED_KEY),
    INDEX_DUE: (DUE_KEY, DUE_AT_KEY),
}
RUNNING_SHARDS = "0123456789abcdef"  # running sessions spread over 16 index partitions by id

SEQ_WIDTH = 12
MAX_SEQ = 10**SEQ_WIDTH - 1
META = "META"
EVENT_PREFIX = "EVENT#"  # the stream's event-source filter passes only these rows to the fan-out
SESSION_PREFIX = "SESSION#"
LIVE_PREFIX = "LIVE#"


def created_key(ts_ns: int, ident: str) -> str:
    return f"{ts_ns:020d}#{ident}"


def agent_key(agent_id: str) -> dict[str, str]:
    return {PK: f"AGENT#{agent_id}", SK: "AGENT"}


def tool_listing_key(agent_id: str, server: str) -> dict[str, str]:
    """An agent version's listing of one MCP server's tools (listed once, then read)."""
    return {PK: f"AGENT#{agent_id}", SK: f"TOOLS#{server}"}


def session_pk(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"


def session_key(session_id: str) -> dict[str, str]:
    return {PK: session_pk(session_id), SK: META}


def event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:0{SEQ_WIDTH}d}"


def item_sk(anchor: int, seq: int, index: int) -> str:
    return f"ITEM#{anchor:0{SEQ_WIDTH}d}#{seq:0{SEQ_WIDTH}d}#{index:03d}"


ITEM_PREFIX = "ITEM#"
ITEM_CEILING = "ITEM#~"  # past every item key ("~" sorts after the digits)


def item_anchor_floor(anchor: int) -> str:
    """The least key of an item anchored at ``anchor``: items from there on sort at or after it."""
    return f"ITEM#{anchor:0{SEQ_WIDTH}d}"


def session_id_of(pk: str) -> str:
    """The session id of a ``SESSION#<id>`` partition key."""
    return pk.removeprefix(SESSION_PREFIX)


def live_connection_key(connection_id: str) -> dict[str, str]:
    """A live WebSocket connection: who it authenticated as, and which sessions it watches."""
    return {PK: f"{LIVE_PREFIX}{connection_id}", SK: "CONNECTION"}


def live_subscription_key(session_id: str, connection_id: str) -> dict[str, str]:
    """A connection's subscription to a session, beside the session's events (one Query fans out)."""
    return {PK: session_pk(session_id), SK: f"{LIVE_PREFIX}{connection_id}"}


def dedupe_key(session_id: str, key: str) -> dict[str, str]:
    return {PK: session_pk(session_id), SK: f"DEDUPE#{key}"}


TURN_PREFIX = "TURN#"


def turn_key(session_id: str, response_id: str) -> dict[str, str]:
    return {PK: session_pk(session_id), SK: f"{TURN_PREFIX}{response_id}"}


def call_key(session_id: str, response_id: str, call_id: str) -> dict[str, str]:
    return {PK: session_pk(session_id), SK: f"CALL#{response_id}#{call_id}"}


def calls_prefix(response_id: str) -> str:
    return f"CALL#{response_id}#"


def child_key(parent_id: str, child_id: str) -> dict[str, str]:
    """The link from a session to a fork of it, in the parent's partition (listed by prefix)."""
    return {PK: session_pk(parent_id), SK: f"{CHILD_PREFIX}{child_id}"}


CHILD_PREFIX = "CHILD#"


def file_key(session_id: str, file_id: str) -> dict[str, str]:
    return {PK: session_pk(session_id), SK: f"{FILE_PREFIX}{file_id}"}


FILE_PREFIX = "FILE#"


def file_totals_key(session_id: str) -> dict[str, str]:
    """The session's file count and bytes, moved in the same transaction as each FILE# row."""
    return {PK: session_pk(session_id), SK: "FILES"}


def file_blob_key(session_id: str, file_id: str) -> str:
    """A session file's bytes: under the session's blob prefix, so deleting the session removes them."""
    return f"{session_blob_prefix(session_id)}files/{file_id}"


def quota_key(owner: str, window: str) -> dict[str, str]:
    """One principal's counter for one quota window (turns started in one minute)."""
    return {PK: f"QUOTA#{owner}", SK: f"WINDOW#{window}"}


def token_key(token_hash: str) -> dict[str, str]:
    return {PK: f"TOKEN#{token_hash}", SK: "TOKEN"}


def owner_index_value(kind: str, owner: str) -> str:
    return f"{kind}#{owner}"


def agent_name_index_value(kind: str, owner: str, name: str) -> str:
    return f"{kind}#{owner}#{name}"


def session_blob_prefix(session_id: str) -> str:
    """Where a session's large texts live in the blob bucket (deleted with the session)."""
    return f"sessions/{session_id}/"


def agent_blob_prefix(agent_id: str) -> str:
    return f"agents/{agent_id}/"


def running_index_value(session_id: str) -> str:
    return f"running#{session_id[:1]}"


WEBHOOK_PREFIX = "WEBHOOK#"
DELIVERY_PREFIX = "DELIVERY#"
WEBHOOK_ALL_OWNERS = "webhook-all#*"  # the by_owner value of endpoints that take every session's events


def webhook_key(endpoint_id: str) -> dict[str, str]:
    return {PK: f"{WEBHOOK_PREFIX}{endpoint_id}", SK: "ENDPOINT"}


def delivery_key(endpoint_id: str, event_id: str) -> dict[str, str]:
    """One event's delivery to one endpoint, beside the endpoint (keyed by the event: enqueued once)."""
    return {PK: f"{WEBHOOK_PREFIX}{endpoint_id}", SK: f"{DELIVERY_PREFIX}{event_id}"}


def webhook_pk(endpoint_id: str) -> str:
    return f"{WEBHOOK_PREFIX}{endpoint_id}"


ENVIRONMENT_PREFIX = "ENVIRONMENT#"


def claude_environment_key(environment_id: str) -> dict[str, str]:
    """A Claude Managed Agents environment (skyloop.anthropic_compat.environments)."""
    return {PK: f"{ENVIRONMENT_PREFIX}{environment_id}", SK: "ENVIRONMENT"}


WORK_PREFIX = "WORK#"
WORKER_PREFIX = "WORKER#"


def claude_environment_pk(environment_id: str) -> str:
    return f"{ENVIRONMENT_PREFIX}{environment_id}"


def claude_work_key(environment_id: str, work_id: str) -> dict[str, str]:
    """A work item of a self-hosted Claude environment (skyloop.anthropic_compat.work), in its partition."""
    return {PK: claude_environment_pk(environment_id), SK: f"{WORK_PREFIX}{work_id}"}


def claude_worker_key(environment_id: str, worker_id: str) -> dict[str, str]:
    """The last poll of one worker (``Anthropic-Worker-ID``) of an environment: the queue's stats count them."""
    return {PK: claude_environment_pk(environment_id), SK: f"{WORKER_PREFIX}{worker_id}"}


def session_work_key(session_id: str) -> dict[str, str]:
    """Which work item is a session's newest (deleted with the session)."""
    return {PK: session_pk(session_id), SK: "WORK"}


SCHEDULE_PREFIX = "SCHEDULE#"
RUN_PREFIX = "RUN#"


def scheduled_task_key(task_id: str) -> dict[str, str]:
    return {PK: f"{SCHEDULE_PREFIX}{task_id}", SK: "TASK"}


def scheduled_run_key(task_id: str, run_id: str) -> dict[str, str]:
    return {PK: f"{SCHEDULE_PREFIX}{task_id}", SK: f"{RUN_PREFIX}{run_id}"}


def due_index_value(task_id: str) -> str:
    return f"due#{task_id[:1]}"


def due_at_value(next_run_at: int, task_id: str) -> str:
    return f"{next_run_at:0{SEQ_WIDTH}d}#{task_id}"


def idle_index_value(session_id: str) -> str:
    """A session's interpreter session in the ``due_schedules`` index, due when it has been idle long enough."""
    return f"idle#{session_id[:1]}"


def environment_key(session_id: str) -> dict[str, str]:
    """A session's hosted environment in the cloud: its interpreter session, its snapshot, its setup."""
    return {PK: session_pk(session_id), SK: "ENVIRONMENT"}


def workspace_blob_prefix(session_id: str) -> str:
    """A session's workspace snapshot (manifest and content-addressed files), deleted with the session."""
    return f"{session_blob_prefix(session_id)}workspace/"
