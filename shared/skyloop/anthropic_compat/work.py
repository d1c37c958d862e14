"""The work queue of a self-hosted environment (``client.beta.environments.work``): what the SDK's worker polls.

A message posted to a session of a ``self_hosted`` environment queues a work item for it
(:func:`after_message`), unless one is still open; the SDK's environment worker (``work.worker`` or
``work.poller``) polls the queue with its environment key (any skyloop token of the environment's
owner), acknowledges the item, holds its lease with heartbeats while its session tool runner answers
the session's client tools, then stops it.

==========  ============================================================================================
state       how an item gets there
==========  ============================================================================================
queued      :func:`after_message` (or a message that arrived while the previous item ran, once it stops)
starting    a poll claimed it (``acknowledged_at`` is set by the ack that follows)
active      the first heartbeat (``expected_last_heartbeat=NO_HEARTBEAT``) took the lease
stopping    ``stop`` without ``force`` while a worker holds it: its next heartbeat says to shut down
stopped     ``stop`` (forced, or of an item nobody held); an item superseded after its lease expired
==========  ============================================================================================

Items are rows of the environment's partition (:func:`skyloop.store.keys.claude_work_key`). Every
change is a write conditional on the row's revision, so two pollers never claim one item and a
heartbeat cannot extend a lease another worker took. A poll also takes back an item whose claim was
never acknowledged within ``reclaim_older_than_ms`` or whose lease expired. A session's newest item is
named by a row beside the session, moved in the same transaction that writes a new item, so two
messages racing queue one item. ``secret`` is always null: the worker then calls with its environment
key, which is a skyloop token already.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from skyloop.anthropic_compat.errors import HeartbeatPreconditionFailedError
from skyloop.anthropic_compat.requests import MetadataPatch  # noqa: TC001  (pydantic needs it at runtime)
from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, cancellation_codes, error_code

if TYPE_CHECKING:
    from skyloop.anthropic_compat.environments import Environment
    from skyloop.anthropic_compat.requests import PageQuery
    from skyloop.models.session import Session
    from skyloop.store import Store

State = Literal["queued", "starting", "active", "stopping", "stopped"]
OPEN_STATES = ("queued", "starting", "active")
HELD_STATES = ("starting", "active")
KIND = "anthropic_work"
NO_HEARTBEAT = "NO_HEARTBEAT"
DEFAULT_TTL_S = (
    300  # the lease a heartbeat (or an ack) gives when the worker asks for none: the SDK's default
)
MIN_TTL_S, MAX_TTL_S = 5, 3600
DEFAULT_RECLAIM_MS = 5000  # an unacknowledged claim older than this goes to the next poll
KEEP_STOPPED_S = 7 * 24 * 3600  # a stopped item stays listable this long
POLLING_WINDOW_S = 30  # stats count the workers that polled this recently
POLL_STEP_S = 0.2  # how often a blocking poll looks again
ATTEMPTS = 5  # read-modify-write rounds before a 409
MAX_WORKER_ID = 200


def _now() -> float:
    return time.time()


def stamp(epoch: float | None) -> str | None:
    """RFC 3339 with microseconds: a heartbeat's value must differ from the one before it."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# ------------------------------------------------------------------------------------ shapes
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PollQuery(_Strict):
    block_ms: int | None = Field(default=None, ge=1, le=999)
    reclaim_older_than_ms: int | None = Field(default=None, ge=0, le=24 * 3600 * 1000)


class HeartbeatQuery(_Strict):
    desired_ttl_seconds: int | None = Field(default=None, ge=1)
    expected_last_heartbeat: str | None = None


class StopBody(_Strict):
    force: bool = False


class WorkUpdate(_Strict):
    metadata: MetadataPatch


class Work(BaseModel):
    """A work item as stored (times as epoch seconds)."""

    id: str
    environment_id: str
    session_id: str
    state: State = "queued"
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: float
    claimed_at: float | None = None  # the poll that handed it out
    worker_id: str | None = None  # that poll's Anthropic-Worker-ID
    acknowledged_at: float | None = None
    started_at: float | None = None
    latest_heartbeat_at: float | None = None
    last_heartbeat: str | None = None  # exactly what the last heartbeat answered (the next one echoes it)
    lease_expires_at: float | None = None  # set by an ack or a heartbeat; None while merely claimed
    ttl_seconds: int = DEFAULT_TTL_S
    stop_requested_at: float | None = None
    stopped_at: float | None = None
    followup: bool = False  # a message came while a worker held it: queue the session again once it stops
    revision: int = 1

    @classmethod
    def new(cls, environment_id: str, session_id: str, now: float) -> Work:
        return cls(
            id=f"work_{int(now * 1000):012x}{uuid.uuid4().hex[:20]}",  # sorts by time
            environment_id=environment_id,
            session_id=session_id,
            created_at=now,
        )

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    def lease_expired(self, now: float) -> bool:
        return self.lease_expires_at is not None and self.lease_expires_at <= now

    def live(self, now: float) -> bool:
        """Open and not abandoned: a worker has it, or one will take it."""
        return self.is_open and not self.lease_expired(now)

    def claimable(self, now: float, reclaim_s: float) -> bool:
        """Whether a poll may hand it out: queued, or its holder is gone (claim not acked, lease expired)."""
        if self.state == "queued":
            return True
        if self.state not in HELD_STATES:
            return False
        if self.lease_expires_at is not None:
            return self.lease_expired(now)
        return self.claimed_at is None or self.claimed_at + reclaim_s <= now

    def lease_state(self) -> dict[str, Any]:
        """``BetaWorkLeaseState``: the lease as stored, in a 412."""
        return {
            "last_heartbeat": self.last_heartbeat,
            "lease_extended": False,
            "state": self.state,
            "ttl_seconds": self.ttl_seconds,
        }

    def heartbeat_response(self, extended: bool) -> dict[str, Any]:
        """``BetaSelfHostedWorkHeartbeatResponse``."""
        return {
            "type": "work_heartbeat",
            "last_heartbeat": self.last_heartbeat or "",
            "lease_extended": extended,
            "state": self.state,
            "ttl_seconds": self.ttl_seconds,
        }

    def to_claude(self) -> dict[str, Any]:
        """``BetaSelfHostedWork`` (``secret`` null: the worker uses its environment key)."""
        return {
            "id": self.id,
            "type": "work",
            "environment_id": self.environment_id,
            "data": {"type": "session", "id": self.session_id},
            "state": self.state,
            "metadata": dict(self.metadata),
            "secret": None,
            "created_at": stamp(self.created_at),
            "acknowledged_at": stamp(self.acknowledged_at),
            "started_at": stamp(self.started_at),
            "latest_heartbeat_at": stamp(self.latest_heartbeat_at),
            "stop_requested_at": stamp(self.stop_requested_at),
            "stopped_at": stamp(self.stopped_at),
        }


# ----------------------------------------------------------------------------------- records
def _attrs(work: Work) -> dict[str, Any]:
    stopped = work.state == "stopped" and work.stopped_at is not None
    return {
        **keys.claude_work_key(work.environment_id, work.id),
        "kind": KIND,
        "state": work.state,
        "doc": codec.dumps(work.model_dump(mode="json")),
        "revision": work.revision,
        keys.TTL_ATTRIBUTE: int((work.stopped_at or 0) + KEEP_STOPPED_S) if stopped else None,
    }


def _work_of(attrs: dict[str, Any]) -> Work:
    return Work.model_validate(codec.loads(attrs["doc"], {}))


class WorkRecords(TableBase):
    """Work items, the session pointers and the workers' sightings (see :mod:`skyloop.store.keys`)."""

    def get(self, environment_id: str, work_id: str) -> Work | None:
        attrs = self._get(keys.claude_work_key(environment_id, work_id))
        return _work_of(attrs) if attrs is not None and attrs.get("kind") == KIND else None

    def items(self, environment_id: str, *, open_only: bool = False) -> list[Work]:
        """The environment's items, oldest first."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :w)",
            "ExpressionAttributeValues": {
                ":p": codec.attr(keys.claude_environment_pk(environment_id)),
                ":w": codec.attr(keys.WORK_PREFIX),
            },
            "ConsistentRead": True,
        }
        if open_only:
            kwargs["FilterExpression"] = "#s IN (:q, :st, :ac)"
            kwargs["ExpressionAttributeNames"] = {"#s": "state"}
            kwargs["ExpressionAttributeValues"].update(
                {":q": codec.attr("queued"), ":st": codec.attr("starting"), ":ac": codec.attr("active")}
            )
        return [_work_of(a) for a in self._query_all(kwargs) if a.get("kind") == KIND]

    def replace(self, work: Work, *, revision: int) -> Work | None:
        """Store ``work`` (its revision one more) only if the row still has ``revision``; what was stored."""
        stored = work.model_copy(update={"revision": revision + 1})
        try:
            self.client.put_item(
                TableName=self.table,
                Item=codec.to_item(_attrs(stored)),
                ConditionExpression="revision = :r",
                ExpressionAttributeValues={":r": codec.attr(revision)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        return stored

    def current(self, session_id: str) -> str | None:
        """The id of the session's newest work item."""
        attrs = self._get(keys.session_work_key(session_id))
        return str(attrs["work_id"]) if attrs else None

    def create(self, work: Work, *, replacing: str | None) -> bool:
        """Write a new item and point its session at it, if the pointer still names ``replacing``."""
        pointer = {
            **keys.session_work_key(work.session_id),
            "work_id": work.id,
            "environment_id": work.environment_id,
        }
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if replacing is not None:
            condition = {
                "ConditionExpression": "work_id = :old",
                "ExpressionAttributeValues": {":old": codec.attr(replacing)},
            }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": codec.to_item(_attrs(work)),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {"Put": {"TableName": self.table, "Item": codec.to_item(pointer), **condition}},
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and "ConditionalCheckFailed" in (
                cancellation_codes(exc)
            ):
                return False
            raise
        return True

    def saw_worker(self, environment_id: str, worker_id: str, now: float) -> None:
        self.client.put_item(
            TableName=self.table,
            Item=codec.to_item(
                {
                    **keys.claude_worker_key(environment_id, worker_id[:MAX_WORKER_ID]),
                    "polled_at": now,
                    keys.TTL_ATTRIBUTE: int(now + 3600),
                }
            ),
        )

    def workers_since(self, environment_id: str, since: float) -> int:
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :w)",
                "FilterExpression": "polled_at >= :t",
                "ExpressionAttributeValues": {
                    ":p": codec.attr(keys.claude_environment_pk(environment_id)),
                    ":w": codec.attr(keys.WORKER_PREFIX),
                    ":t": codec.attr(since),
                },
            }
        )
        return len(rows)


def records(store: Store | None = None) -> WorkRecords:
    """The work rows: in ``store``'s table when it is the DynamoDB store, else in the configured table."""
    if isinstance(store, TableBase):
        return WorkRecords(store.table, store.client)
    from skyloop import deps

    return WorkRecords(deps.get_settings().table_name, deps.client("dynamodb"))


# -------------------------------------------------------------------------------- operations
def after_message(store: Store, session: Session) -> None:
    """A message reached a session of a self-hosted environment: queue work for a worker if none is open."""
    from skyloop.anthropic_compat import environments as envs

    if not session.environment_id:
        return
    env = envs.records().get(session.environment_id)
    if env is None or env.kind != "self_hosted":
        return
    queue(records(store), env.id, session.id)


def queue(recs: WorkRecords, environment_id: str, session_id: str) -> Work:
    """The session's open item: a new queued one unless a live one exists (that one then owes a follow-up)."""
    for _ in range(ATTEMPTS):
        now = _now()
        current_id = recs.current(session_id)
        old = recs.get(environment_id, current_id) if current_id else None
        if old is not None and old.live(now):
            if old.state != "active" or old.followup:
                return old  # its worker has not started serving yet: it will see the message
            if recs.replace(old.model_copy(update={"followup": True}), revision=old.revision):
                return old
            continue
        if old is not None and old.is_open and not _supersede(recs, old, now):
            continue  # its worker came back meanwhile: look again
        work = Work.new(environment_id, session_id, now)
        if recs.create(work, replacing=current_id):
            return work
    raise ConflictError("the session's work item changed too often while queueing; try again")


def _supersede(recs: WorkRecords, work: Work, now: float) -> bool:
    """Stop an item whose lease expired (its worker is gone) before queueing the session anew."""
    stopped = work.model_copy(update={"state": "stopped", "stopped_at": now, "followup": False})
    return recs.replace(stopped, revision=work.revision) is not None


def claim(recs: WorkRecords, environment_id: str, worker_id: str | None, reclaim_s: float) -> Work | None:
    """Hand the oldest claimable item to this poll (``starting``), or None; a lost race tries the next."""
    now = _now()
    for work in recs.items(environment_id, open_only=True):
        if not work.claimable(now, reclaim_s):
            continue
        claimed = work.model_copy(
            update={
                "state": "starting",
                "claimed_at": now,
                "worker_id": worker_id,
                "acknowledged_at": None,
                "last_heartbeat": None,
                "lease_expires_at": None,
            }
        )
        stored = recs.replace(claimed, revision=work.revision)
        if stored is not None:
            return stored
    return None


def _item(recs: WorkRecords, environment_id: str, work_id: str) -> Work:
    work = recs.get(environment_id, work_id) if work_id.startswith("work_") else None
    if work is None:
        raise NotFoundError(f"Work not found: '{work_id}'")
    return work


def _change(recs: WorkRecords, environment_id: str, work_id: str, change: Any) -> Work:
    """Read, ``change(work)`` (the new item, or the old one for no write), write on the revision; retried."""
    for _ in range(ATTEMPTS):
        work = _item(recs, environment_id, work_id)
        new = change(work)
        if new is work:
            return work
        stored = recs.replace(new, revision=work.revision)
        if stored is not None:
            return stored
    raise ConflictError(f"work '{work_id}' changed too often; try again")


def ack(recs: WorkRecords, environment_id: str, work_id: str) -> Work:
    """The worker has the item: ``acknowledged_at``, and a lease until its first heartbeat."""

    def change(work: Work) -> Work:
        if not work.is_open:
            raise ConflictError(f"work '{work_id}' is {work.state}: it cannot be acknowledged")
        if work.acknowledged_at is not None and work.state != "queued":
            return work
        now = _now()
        return work.model_copy(
            update={
                "state": "starting" if work.state == "queued" else work.state,
                "claimed_at": work.claimed_at or now,
                "acknowledged_at": now,
                "lease_expires_at": work.lease_expires_at or now + work.ttl_seconds,
            }
        )

    return _change(recs, environment_id, work_id, change)


def heartbeat(recs: WorkRecords, environment_id: str, work_id: str, q: HeartbeatQuery) -> dict[str, Any]:
    """Extend the lease if ``expected_last_heartbeat`` is the stored one (412 if not); the first claims it."""
    extended = True

    def change(work: Work) -> Work:
        nonlocal extended
        if not work.is_open:
            extended = False  # stopping or stopped: not compared, the worker shuts down
            return work
        current = work.last_heartbeat or NO_HEARTBEAT
        if q.expected_last_heartbeat is not None and q.expected_last_heartbeat != current:
            raise HeartbeatPreconditionFailedError(
                f"expected_last_heartbeat {q.expected_last_heartbeat!r} is not the stored heartbeat "
                f"{current!r}: another worker may hold work '{work_id}'",
                current_state=work.lease_state(),
            )
        now = _now()
        ttl = min(max(q.desired_ttl_seconds or work.ttl_seconds, MIN_TTL_S), MAX_TTL_S)
        value = stamp(now)
        if value == work.last_heartbeat:  # the same microsecond: the next must still differ
            value = stamp(now + 1e-6)
        return work.model_copy(
            update={
                "state": "active",
                "last_heartbeat": value,
                "latest_heartbeat_at": now,
                "lease_expires_at": now + ttl,
                "ttl_seconds": ttl,
                "started_at": now if current == NO_HEARTBEAT else work.started_at,
            }
        )

    return _change(recs, environment_id, work_id, change).heartbeat_response(extended)


def stop(recs: WorkRecords, environment_id: str, work_id: str, *, force: bool) -> Work:
    """Forced (or nobody holds it): stopped. Else stopping, which the holder's next heartbeat hears."""
    followup = False

    def change(work: Work) -> Work:
        nonlocal followup
        if work.state == "stopped":
            raise ConflictError(f"work '{work_id}' is already stopped")
        graceful = not force and work.state in HELD_STATES
        if not force and work.state == "stopping":
            return work
        now = _now()
        followup = work.followup and not graceful
        return work.model_copy(
            update={
                "state": "stopping" if graceful else "stopped",
                "stop_requested_at": work.stop_requested_at or now,
                "stopped_at": None if graceful else now,
                "followup": work.followup and graceful,
            }
        )

    stopped = _change(recs, environment_id, work_id, change)
    if followup:
        queue(recs, environment_id, stopped.session_id)  # a message came while it ran
    return stopped


def update_metadata(recs: WorkRecords, environment_id: str, work_id: str, body: WorkUpdate) -> Work:
    from skyloop.anthropic_compat.common import patch_metadata

    def change(work: Work) -> Work:
        return work.model_copy(update={"metadata": patch_metadata(work.metadata, body.metadata)})

    return _change(recs, environment_id, work_id, change)


def queue_stats(recs: WorkRecords, environment_id: str) -> dict[str, Any]:
    """``BetaSelfHostedWorkQueueStats``: queued items, claimed-but-unacknowledged ones, recent pollers."""
    items = recs.items(environment_id, open_only=True)
    queued = [w for w in items if w.state == "queued"]
    pending = [w for w in items if w.state == "starting" and w.acknowledged_at is None]
    waiting = [w.created_at for w in queued + pending]
    return {
        "type": "work_queue_stats",
        "depth": len(queued),
        "pending": len(pending),
        "oldest_queued_at": stamp(min(waiting)) if waiting else None,
        "workers_polling": recs.workers_since(environment_id, _now() - POLLING_WINDOW_S),
    }


# ------------------------------------------------------------------------------ for the routes
def _queue_of(environment_id: str) -> tuple[WorkRecords, Environment]:
    """The caller's self-hosted environment (404 for another's, 400 for a cloud one) and the work rows."""
    from skyloop.anthropic_compat import environments as envs

    env = envs.get_owned(environment_id)
    if env.kind != "self_hosted":
        raise InvalidInputError(
            f"environment '{environment_id}' is {env.kind}: only a self_hosted environment has a work queue",
            param="environment_id",
        )
    return records(), env


def poll(environment_id: str, q: PollQuery, worker_id: str | None) -> dict[str, Any] | None:
    """Claim an item, waiting up to ``block_ms`` for one; None (JSON ``null``) when there is none."""
    recs, env = _queue_of(environment_id)
    if worker_id:
        recs.saw_worker(env.id, worker_id, _now())
    reclaim_s = (
        q.reclaim_older_than_ms if q.reclaim_older_than_ms is not None else DEFAULT_RECLAIM_MS
    ) / 1000
    deadline = time.monotonic() + (q.block_ms or 0) / 1000
    while True:
        work = claim(recs, env.id, worker_id, reclaim_s)
        left = deadline - time.monotonic()
        if work is not None or left <= 0:
            return work.to_claude() if work is not None else None
        time.sleep(min(POLL_STEP_S, left))


def acknowledge(environment_id: str, work_id: str) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return ack(recs, env.id, work_id).to_claude()


def beat(environment_id: str, work_id: str, q: HeartbeatQuery) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return heartbeat(recs, env.id, work_id, q)


def stop_work(environment_id: str, work_id: str, body: StopBody) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return stop(recs, env.id, work_id, force=body.force).to_claude()


def retrieve(environment_id: str, work_id: str) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return _item(recs, env.id, work_id).to_claude()


def update(environment_id: str, work_id: str, body: WorkUpdate) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return update_metadata(recs, env.id, work_id, body).to_claude()


def list_work(environment_id: str, q: PageQuery) -> dict[str, Any]:
    """The environment's items, newest first, paged."""
    from skyloop.anthropic_compat.common import slice_rows

    recs, env = _queue_of(environment_id)
    rows = [w.to_claude() for w in reversed(recs.items(env.id))]
    return slice_rows(rows, q.page, q.limit)


def stats(environment_id: str) -> dict[str, Any]:
    recs, env = _queue_of(environment_id)
    return queue_stats(recs, env.id)
