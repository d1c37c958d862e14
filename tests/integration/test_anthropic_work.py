"""A self-hosted environment's work queue (:mod:`skyloop.anthropic_compat.work`) on moto.

The races and the lease are driven through the module's operations on the table (the clock is the
module's ``_now``, moved by the test); the routes through the pinned ``anthropic`` SDK, whose HTTP
goes straight into the API function's real entry point (as the API function: its role is checked),
every response validated strictly against the SDK's types. The worker itself runs in the suite's
``environment_worker`` scenario (``tests/anthropic_suite``).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
import pytest
from anthropic.types.beta.environments import BetaHeartbeatPreconditionFailedError

from skyloop import deps
from skyloop.anthropic_compat import environments as envs
from skyloop.anthropic_compat import work
from skyloop.anthropic_compat.requests import EnvironmentBody
from skyloop.local import lambda_hook
from skyloop.models.session import Session
from tests.integration.conftest import http_event

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Stack


# ------------------------------------------------------------------------------------ helpers
class Clock:
    """The work module's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(work, "_now", c)
    return c


@pytest.fixture
def recs(aws: Stack) -> work.WorkRecords:
    return work.records(deps.store())


def environment(kind: str = "self_hosted") -> str:
    env = envs.new(EnvironmentBody.model_validate({"name": f"w-{kind}", "config": {"type": kind}}), "local")
    envs.records().create(env)
    return env.id


def session_in(environment_id: str) -> Session:
    """Only what ``after_message`` reads of a session."""
    return Session.model_construct(id=uuid.uuid4().hex, environment_id=environment_id)


def queued(recs: work.WorkRecords) -> tuple[str, work.Work]:
    env_id = environment()
    return env_id, work.queue(recs, env_id, uuid.uuid4().hex)


def first_heartbeat(recs: work.WorkRecords, env_id: str, work_id: str, **q: Any) -> dict[str, Any]:
    return work.heartbeat(
        recs, env_id, work_id, work.HeartbeatQuery(expected_last_heartbeat="NO_HEARTBEAT", **q)
    )


def sdk_client(aws: Stack) -> anthropic.Anthropic:
    """The SDK, its HTTP answered in-process by the API function's entry point."""
    handler = lambda_hook.handler_for("api")

    def answer(request: httpx2.Request) -> httpx2.Response:
        event = http_event(
            request.method, request.url.path, headers=dict(request.headers), body=request.content or None
        )
        event["rawQueryString"] = request.url.query.decode()
        context = lambda_hook.LocalContext(
            "skyloop-api",
            "$LATEST",
            "arn:aws:lambda:us-east-1:123456789012:function:skyloop-api",
            512,
            str(uuid.uuid4()),
            "/aws/lambda/skyloop-api",
            "local",
            time.time() + 29,
        )
        out = handler(event, context)
        return httpx2.Response(
            int(out["statusCode"]), headers=out.get("headers") or {}, content=out.get("body") or ""
        )

    return anthropic.Anthropic(
        api_key="unused",
        base_url="http://api.local/anthropic",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        _strict_response_validation=True,
    )


@pytest.fixture
def client(aws: Stack) -> Iterator[anthropic.Anthropic]:
    c = sdk_client(aws)
    yield c
    c.close()


# ---------------------------------------------------------------------------- claim and lease
def test_two_pollers_racing_for_one_item_claim_it_once(recs: work.WorkRecords) -> None:
    """Both pollers read the item as claimable before either writes: the revision lets one win."""
    env_id, item = queued(recs)
    both_read = threading.Barrier(2, timeout=10)

    class Racing(work.WorkRecords):
        def items(self, environment_id: str, *, open_only: bool = False) -> list[work.Work]:
            out = super().items(environment_id, open_only=open_only)
            both_read.wait()
            return out

    racing = Racing(recs.table, recs.client)
    got: dict[str, work.Work | None] = {}

    def poller(name: str) -> None:
        got[name] = work.claim(racing, env_id, name, reclaim_s=5.0)

    threads = [threading.Thread(target=poller, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    winners = [name for name, claimed in got.items() if claimed is not None]
    assert len(got) == 2
    assert len(winners) == 1, got
    stored = recs.get(env_id, item.id)
    assert stored is not None
    assert (stored.state, stored.worker_id) == ("starting", winners[0])


def test_an_unacknowledged_claim_goes_to_another_poller_after_the_reclaim_window(
    recs: work.WorkRecords, clock: Clock
) -> None:
    env_id, item = queued(recs)
    first = work.claim(recs, env_id, "a", reclaim_s=5.0)
    assert first is not None
    assert first.id == item.id
    assert work.claim(recs, env_id, "b", reclaim_s=5.0) is None  # a still may ack it
    clock.now += 6
    again = work.claim(recs, env_id, "b", reclaim_s=5.0)
    assert again is not None
    assert (again.id, again.state, again.worker_id) == (item.id, "starting", "b")


def test_an_expired_lease_is_reclaimed_and_the_old_holder_gets_412(
    recs: work.WorkRecords, clock: Clock
) -> None:
    env_id, item = queued(recs)
    assert work.claim(recs, env_id, "a", reclaim_s=5.0) is not None
    work.ack(recs, env_id, item.id)
    beat = first_heartbeat(recs, env_id, item.id, desired_ttl_seconds=10)
    assert (beat["lease_extended"], beat["state"], beat["ttl_seconds"]) == (True, "active", 10)
    clock.now += 9  # acked and held: not even a zero reclaim window takes it
    assert work.claim(recs, env_id, "b", reclaim_s=0.0) is None
    clock.now += 2  # the lease (10 s from the heartbeat) is over
    taken = work.claim(recs, env_id, "b", reclaim_s=5.0)
    assert taken is not None
    assert (taken.id, taken.worker_id, taken.acknowledged_at) == (item.id, "b", None)
    assert first_heartbeat(recs, env_id, item.id)["lease_extended"] is True  # b's claim
    with pytest.raises(work.HeartbeatPreconditionFailedError) as lost:
        work.heartbeat(
            recs, env_id, item.id, work.HeartbeatQuery(expected_last_heartbeat=beat["last_heartbeat"])
        )
    assert lost.value.error_details["current_state"]["state"] == "active"


def test_two_first_heartbeats_claim_the_lease_once(recs: work.WorkRecords) -> None:
    env_id, item = queued(recs)
    assert work.claim(recs, env_id, "a", reclaim_s=5.0) is not None
    held = first_heartbeat(recs, env_id, item.id)
    with pytest.raises(work.HeartbeatPreconditionFailedError):
        first_heartbeat(recs, env_id, item.id)
    again = work.heartbeat(
        recs, env_id, item.id, work.HeartbeatQuery(expected_last_heartbeat=held["last_heartbeat"])
    )
    assert again["last_heartbeat"] != held["last_heartbeat"]


def test_a_graceful_stop_reaches_the_holder_through_its_heartbeat(recs: work.WorkRecords) -> None:
    env_id, item = queued(recs)
    assert work.claim(recs, env_id, "a", reclaim_s=5.0) is not None
    held = first_heartbeat(recs, env_id, item.id)
    assert work.stop(recs, env_id, item.id, force=False).state == "stopping"
    told = work.heartbeat(
        recs, env_id, item.id, work.HeartbeatQuery(expected_last_heartbeat=held["last_heartbeat"])
    )
    assert (told["lease_extended"], told["state"]) == (False, "stopping")
    assert work.stop(recs, env_id, item.id, force=True).state == "stopped"


# ------------------------------------------------------------------------------- after_message
def test_after_message_queues_once_while_an_item_is_open(aws: Stack, recs: work.WorkRecords) -> None:
    env_id = environment()
    session = session_in(env_id)
    work.after_message(deps.store(), session)
    work.after_message(deps.store(), session)
    items = recs.items(env_id)
    assert [(w.state, w.session_id) for w in items] == [("queued", session.id)]
    assert work.claim(recs, env_id, "a", reclaim_s=5.0) is not None
    first_heartbeat(recs, env_id, items[0].id)
    work.after_message(deps.store(), session)  # while a worker serves it: no second item...
    assert len(recs.items(env_id)) == 1
    work.stop(recs, env_id, items[0].id, force=True)  # ...but it is queued again once it stops
    after = recs.items(env_id)
    assert [w.state for w in after] == ["stopped", "queued"]
    work.after_message(deps.store(), session)
    assert len(recs.items(env_id)) == 2


def test_after_message_racing_itself_queues_one_item(aws: Stack, recs: work.WorkRecords) -> None:
    """Both see no item, both write one: the pointer's condition lets one transaction through."""
    env_id = environment()
    session = session_in(env_id)
    both_looked = threading.Barrier(2, timeout=10)

    class Racing(work.WorkRecords):
        def current(self, session_id: str) -> str | None:
            out = super().current(session_id)
            if out is None:
                both_looked.wait()
            return out

    racing = Racing(recs.table, recs.client)
    made: list[str] = []
    threads = [
        threading.Thread(target=lambda: made.append(work.queue(racing, env_id, session.id).id))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(made) == 2
    assert len(set(made)) == 1, made
    assert len(recs.items(env_id)) == 1


def test_after_message_replaces_an_item_whose_lease_expired(
    aws: Stack, recs: work.WorkRecords, clock: Clock
) -> None:
    env_id = environment()
    session = session_in(env_id)
    work.after_message(deps.store(), session)
    (item,) = recs.items(env_id)
    assert work.claim(recs, env_id, "a", reclaim_s=5.0) is not None
    first_heartbeat(recs, env_id, item.id, desired_ttl_seconds=10)
    clock.now += 11
    work.after_message(deps.store(), session)
    old, new = recs.items(env_id)
    assert (old.id, old.state, new.state) == (item.id, "stopped", "queued")


def test_after_message_ignores_cloud_environments(aws: Stack, recs: work.WorkRecords) -> None:
    env_id = environment("cloud")
    work.after_message(deps.store(), session_in(env_id))
    assert recs.items(env_id) == []


# ---------------------------------------------------------------------------------- the routes
def test_the_routes_through_the_sdk(aws: Stack, client: anthropic.Anthropic) -> None:
    w = client.beta.environments.work
    env_id = client.beta.environments.create(name="laptop", config={"type": "self_hosted"}).id
    assert w.poll(env_id, block_ms=1, anthropic_worker_id="worker-1") is None  # 200 and `null`
    work.after_message(deps.store(), session_in(env_id))
    stats = w.stats(env_id)
    assert (stats.depth, stats.pending, stats.workers_polling) == (1, 0, 1)
    assert stats.oldest_queued_at is not None

    item = w.poll(env_id, block_ms=999, anthropic_worker_id="worker-1")
    assert item is not None
    assert (item.state, item.secret, item.data.type) == ("starting", None, "session")
    assert (w.stats(env_id).depth, w.stats(env_id).pending) == (0, 1)
    acked = w.ack(item.id, environment_id=env_id)
    assert acked.acknowledged_at is not None
    assert w.stats(env_id).pending == 0
    beat = w.heartbeat(item.id, environment_id=env_id, expected_last_heartbeat="NO_HEARTBEAT")
    assert (beat.type, beat.lease_extended, beat.state, beat.ttl_seconds) == (
        "work_heartbeat",
        True,
        "active",
        300,
    )

    with pytest.raises(BetaHeartbeatPreconditionFailedError) as err:
        w.heartbeat(item.id, environment_id=env_id, expected_last_heartbeat="NO_HEARTBEAT")
    assert err.value.status_code == 412
    assert err.value.error_code == "heartbeat_precondition_failed"
    state = err.value.details.current_state
    assert (state.last_heartbeat, state.lease_extended, state.state) == (beat.last_heartbeat, False, "active")

    patched = w.update(item.id, environment_id=env_id, metadata={"host": "laptop"})
    assert patched.metadata == {"host": "laptop"}
    assert w.update(item.id, environment_id=env_id, metadata={"host": None}).metadata == {}
    stopped = w.stop(item.id, environment_id=env_id, force=True)
    assert stopped.state == "stopped"
    assert stopped.stopped_at is not None
    with pytest.raises(anthropic.ConflictError) as again:
        w.stop(item.id, environment_id=env_id, force=True)
    assert again.value.response.headers["x-should-retry"] == "false"  # the SDK's stop takes 409 as done
    assert w.retrieve(item.id, environment_id=env_id).state == "stopped"
    assert [x.id for x in w.list(env_id)] == [item.id]


def test_the_queue_is_the_callers_self_hosted_environments_only(
    aws: Stack, client: anthropic.Anthropic
) -> None:
    w = client.beta.environments.work
    cloud = client.beta.environments.create(name="cloud", config={"type": "cloud"}).id
    with pytest.raises(anthropic.BadRequestError) as bad:
        w.poll(cloud)
    assert "self_hosted" in bad.value.message
    with pytest.raises(anthropic.NotFoundError):
        w.stats("env_nosuchenvironment")
    local = client.beta.environments.create(name="laptop", config={"type": "self_hosted"}).id
    with pytest.raises(anthropic.NotFoundError):
        w.retrieve("work_nosuchitem", environment_id=local)
    with pytest.raises(anthropic.BadRequestError):
        w.poll(local, block_ms=1000)
    raw = w.with_raw_response.poll(local)
    assert (raw.status_code, raw.http_response.text) == (200, "null")


def test_deleting_an_environment_deletes_its_work_and_workers(recs: work.WorkRecords, clock: Clock) -> None:
    env_id, item = queued(recs)
    work.claim(recs, env_id, "worker-1", 5.0)
    rows = lambda: deps.client("dynamodb").query(  # noqa: E731
        TableName=deps.get_settings().table_name,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"ENVIRONMENT#{env_id}"}},
    )["Items"]
    assert len(rows()) >= 2  # the environment, its item (and the worker's sighting)
    envs.records().delete(env_id)
    assert rows() == []
    assert envs.records().get(env_id) is None
    assert item.id
