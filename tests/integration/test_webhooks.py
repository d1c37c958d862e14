"""The cloud's lifecycle functions on moto: ``lifecycle_events`` (table-stream batches built from the rows
the event log really wrote) and ``webhook_delivery`` (messages of moto's FIFO queue), with moto's
EventBridge bus, and a real receiver on loopback.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps, principals
from skyloop import events as ev
from skyloop.local.handlers import LocalContext, handler_for
from skyloop.principals import Principal
from skyloop.settings import get_settings
from skyloop.store import Append, keys
from skyloop.webhooks.models import Endpoint
from skyloop.webhooks.records import webhook_records
from tests.webhook_receiver import WebhookReceiver

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Stack

ACCOUNT = "123456789012"
BUS = "skyloop-it-lifecycle"
_stream_seq = iter(range(10**20, 10**21))


@pytest.fixture
def alice() -> str:
    """A principal of the test's own (the module's table keeps earlier tests' endpoints)."""
    return f"alice-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def lifecycle(aws: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The bus, the FIFO delivery queue and its dead-letter queue, a rule capturing the bus in a queue."""
    sqs, events = deps.client("sqs"), deps.client("events")
    suffix = uuid.uuid4().hex[:8]
    with _ignore_exists():
        events.create_event_bus(Name=BUS)
    queue = sqs.create_queue(QueueName=f"deliveries-{suffix}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    dead = sqs.create_queue(QueueName=f"dead-{suffix}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    captured = sqs.create_queue(QueueName=f"bus-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=captured, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=f"all-{suffix}", EventBusName=BUS, EventPattern=json.dumps({"source": ["skyloop"]}))
    events.put_targets(Rule=f"all-{suffix}", EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
    monkeypatch.setenv("SKYLOOP_EVENT_BUS", BUS)
    monkeypatch.setenv("SKYLOOP_WEBHOOK_QUEUE_URL", queue)
    monkeypatch.setenv("SKYLOOP_WEBHOOK_DLQ_URL", dead)
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")
    monkeypatch.setenv("SKYLOOP_WEBHOOK_RETRY_SCHEDULE", "1,1")
    get_settings.cache_clear()
    yield {"queue": queue, "dead": dead, "bus": captured}
    events.remove_targets(Rule=f"all-{suffix}", EventBusName=BUS, Ids=["q"])
    events.delete_rule(Name=f"all-{suffix}", EventBusName=BUS)
    get_settings.cache_clear()


class _ignore_exists:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return exc is not None and "Exists" in type(exc).__name__ + str(exc)


def context(name: str) -> LocalContext:
    return LocalContext(
        name,
        "$LATEST",
        f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{name}",
        256,
        uuid.uuid4().hex,
        f"/aws/lambda/{name}",
        "local",
        time.time() + 60,
    )


def as_principal(name: str) -> Principal:
    return Principal(name=name, scopes=frozenset({"read", "write"}))


def endpoint(owner: str, url: str, **extra: Any) -> Endpoint:
    from skyloop.webhooks.delivery import new_secret

    now = int(time.time())
    made = Endpoint(
        id=uuid.uuid4().hex,
        owner=owner,
        url=url,
        secret=new_secret(),
        created_at=now,
        updated_at=now,
        **extra,
    )
    webhook_records().put_endpoint(made)
    return made


def record(name: str, image: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "ApproximateCreationDateTime": time.time(),
            "Keys": {"pk": image["pk"], "sk": image["sk"]},
            "NewImage": image,
            "SequenceNumber": str(next(_stream_seq)),
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t/stream/2026-01-01T00:00:00.000",
    }


def stream_records(
    stack: Stack, session_id: str, *, after: int = 0, created: bool = False
) -> list[dict[str, Any]]:
    """What the stream brings: the session row's insert (``created``) and a MODIFY of it, then new events."""
    rows = stack.rows(session_id)
    out = [record("INSERT", rows[keys.META])] if created else []
    out.append(record("MODIFY", rows[keys.META]))
    for sk in sorted(rows):
        if sk.startswith(keys.EVENT_PREFIX) and int(sk.removeprefix(keys.EVENT_PREFIX)) > after:
            out.append(record("INSERT", rows[sk]))
    return out


def call_event(call_id: str) -> dict[str, Any]:
    item = ev.function_call_item(
        item_id=f"i_{call_id}",
        call_id=call_id,
        name="Read",
        arguments='{"f": 1}',
        status="action_required",
        agent="a",
        response_id="resp_it",
    )
    return ev.item_done(item)


def client_tool_turn(stack: Stack, session_id: str) -> None:
    """A turn's log as the steps write it: start, two calls parked in one append, the end."""
    start = Append(session_id)
    start.event(ev.SESSION_STATUS, ev.session_status(session_id, "running", response_id="resp_it"))
    start.event(ev.RESPONSE_TEXT_DELTA, ev.text_delta("x", response_id="resp_it"))
    stack.store.append(start)
    park = Append(session_id)
    park.event(ev.RESPONSE_ITEM_DONE, call_event("c1"))
    park.event(ev.RESPONSE_ITEM_DONE, call_event("c2"))
    stack.store.append(park)
    end = Append(session_id)
    end.event(
        ev.RESPONSE_COMPLETED, ev.response_event(ev.response_object("resp_it", status="completed", model="a"))
    )
    end.event(ev.SESSION_STATUS, ev.session_status(session_id, "idle", response_id="resp_it"))
    stack.store.append(end)


def publish(records: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(handler_for("lifecycle_events")({"Records": records}, context("lifecycle_events")))


def drain(queue_url: str) -> list[dict[str, Any]]:
    sqs = deps.client("sqs")
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])
        messages = got.get("Messages", [])
        if not messages:
            return out
        for m in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        out += messages


# -------------------------------------------------------------------------------- publishing
def test_a_stream_batch_becomes_lifecycle_events_on_the_bus_and_one_delivery_per_endpoint(
    aws: Stack, lifecycle: dict[str, str], alice: str
) -> None:
    # GIVEN alice's endpoint, one for in_progress only, and bob's; alice's session runs a client-tool turn
    mine = endpoint(alice, "http://127.0.0.1:9/a")
    only = endpoint(alice, "http://127.0.0.1:9/b", events=["agent.session.in_progress"])
    bob = endpoint(f"bob-{alice}", "http://127.0.0.1:9/c")
    with principals.acting_as(as_principal(alice)):
        session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
    client_tool_turn(aws, session.id)
    records = stream_records(aws, session.id, created=True)
    # WHEN the stream delivers it in two batches that cut the run of calls in the middle
    cut = next(i for i, r in enumerate(records) if "c1" in json.dumps(r)) + 1
    assert publish(records[:cut]) == {"batchItemFailures": []}
    assert publish(records[cut:]) == {"batchItemFailures": []}
    # THEN alice's endpoint has one delivery per lifecycle event, the two calls in one action_required
    found, _ = webhook_records().list_deliveries(mine.id, limit=50)
    by_type = {d.event_type: json.loads(d.body) for d in found}
    assert sorted(by_type) == [
        "agent.session.action_required",
        "agent.session.created",
        "agent.session.idle",
        "agent.session.in_progress",
    ]
    calls = by_type["agent.session.action_required"]["data"]["required_action"]["calls"]
    assert [c["call_id"] for c in calls] == ["c1", "c2"]
    assert [d.event_type for d in webhook_records().list_deliveries(only.id)[0]] == [
        "agent.session.in_progress"
    ]
    assert webhook_records().list_deliveries(bob.id)[0] == []
    # AND each delivery is one message of the FIFO queue, grouped by endpoint and session
    messages = drain(lifecycle["queue"])
    assert len(messages) == 5
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {
        f"{mine.id}:{session.id}",
        f"{only.id}:{session.id}",
    }
    # AND the bus got every event once, as EventBridge detail
    on_bus = [json.loads(m["Body"]) for m in drain(lifecycle["bus"])]
    assert sorted(e["detail-type"] for e in on_bus) == sorted(by_type)
    assert all(e["source"] == "skyloop" and e["detail"]["data"]["id"] == session.id for e in on_bus)


def test_the_publisher_may_mark_a_delivery_queued_and_without_the_grant_aws_refuses_it(
    aws: Stack, lifecycle: dict[str, str], alice: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The local stack checks the publisher's calls against its deployed role: with the grant it had
    before (GetItem, Query, PutItem), marking a delivery queued fails after its message was sent."""
    from skyloop.local import iam

    mine = endpoint(alice, "http://127.0.0.1:9/a")
    with principals.acting_as(as_principal(alice)):
        session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
    client_tool_turn(aws, session.id)
    records = stream_records(aws, session.id, created=True)
    # Given the role as it was: no dynamodb:UpdateItem
    document = json.loads(iam.POLICIES_PATH.read_text())
    for statement in document["functions"]["lifecycle_events"]["statements"]:
        if isinstance(statement["Action"], list) and "dynamodb:UpdateItem" in statement["Action"]:
            statement["Action"].remove("dynamodb:UpdateItem")
    planted = tmp_path / "policies.json"
    planted.write_text(json.dumps(document))
    monkeypatch.setenv(iam.POLICIES_ENV, str(planted))
    # When the stream delivers the batch, Then it fails as on AWS (AccessDenied on UpdateItem), after
    # its first delivery's message was sent: the stream retries the batch and sends it again
    failed = publish(records)["batchItemFailures"]
    assert failed
    assert len(drain(lifecycle["queue"])) >= 1
    assert not any(d.queued for d in webhook_records().list_deliveries(mine.id, limit=50)[0])
    # And with the role the stack deploys now, the same batch goes through (each delivery marked queued)
    monkeypatch.delenv(iam.POLICIES_ENV)
    assert publish(records) == {"batchItemFailures": []}
    found, _ = webhook_records().list_deliveries(mine.id, limit=50)
    assert found
    assert all(d.queued for d in found)


def test_a_batch_retried_after_a_failure_delivers_each_event_once(
    aws: Stack, lifecycle: dict[str, str], monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    # GIVEN an endpoint and a turn's records, and EventBridge failing the first time it is called
    hook = endpoint(alice, "http://127.0.0.1:9/a")
    with principals.acting_as(as_principal(alice)):
        session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
    client_tool_turn(aws, session.id)
    records = stream_records(aws, session.id)
    events = deps.client("events")
    real = events.put_events
    calls = {"n": 0}

    def flaky(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("EventBridge is down")
        return real(**kwargs)

    monkeypatch.setattr(events, "put_events", flaky)
    sqs = deps.client("sqs")
    real_send, sends = sqs.send_message, []

    def counted(**kwargs: Any) -> Any:
        sends.append(kwargs["MessageDeduplicationId"])
        return real_send(**kwargs)

    monkeypatch.setattr(sqs, "send_message", counted)
    # WHEN the function fails on the batch, then Lambda retries it from the record it names
    failed = publish(records)["batchItemFailures"]
    assert failed == [{"itemIdentifier": records[1]["dynamodb"]["SequenceNumber"]}]  # its first event
    assert publish(records) == {"batchItemFailures": []}
    assert publish(records) == {"batchItemFailures": []}  # and once more (at least once)
    # THEN every lifecycle event is one delivery and one message: nothing lost, nothing twice
    found, _ = webhook_records().list_deliveries(hook.id, limit=50)
    assert sorted(d.event_type for d in found) == [
        "agent.session.action_required",
        "agent.session.idle",
        "agent.session.in_progress",
    ]
    assert len(drain(lifecycle["queue"])) == 3
    # and the publisher itself sent each once (not only the FIFO queue's five-minute deduplication)
    assert len(sends) == 3


# -------------------------------------------------------------------------------- delivering
def deliver(queue_url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Receive what is visible and hand it to the delivery function as Lambda would, one at a time."""
    messages = (
        deps.client("sqs")
        .receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, AttributeNames=["All"])
        .get("Messages", [])
    )
    event = {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "eventSourceARN": f"arn:aws:sqs:us-east-1:{ACCOUNT}:q.fifo",
            }
            for m in messages
        ]
    }
    result = dict(handler_for("webhook_delivery")(event, context("webhook_delivery")))
    for m in messages:  # Lambda deletes what was not reported failed
        if {"itemIdentifier": m["MessageId"]} not in result["batchItemFailures"]:
            deps.client("sqs").delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return result, messages


def test_a_failed_attempt_comes_back_after_its_delay_under_the_same_id(
    aws: Stack, lifecycle: dict[str, str], alice: str
) -> None:
    with WebhookReceiver() as receiver:
        # GIVEN an endpoint answering 500 once, and one event enqueued for it
        hook = endpoint(alice, receiver.url, events=["agent.session.in_progress"])
        with principals.acting_as(as_principal(alice)):
            session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
        client_tool_turn(aws, session.id)
        publish(stream_records(aws, session.id))
        receiver.fail_next(500)
        # WHEN the delivery function gets the message
        result, (message,) = deliver(lifecycle["queue"])
        # THEN it failed, is hidden for the schedule's delay and reported failed (not deleted)
        assert result == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
        assert deliver(lifecycle["queue"])[1] == []  # hidden now
        time.sleep(1.3)
        result, (again,) = deliver(lifecycle["queue"])
        assert result == {"batchItemFailures": []}
        # AND the receiver saw it twice under one webhook-id; the delivery shows both attempts
        assert [r.webhook_id for r in receiver.received] == [receiver.received[0].webhook_id] * 2
        (delivery,) = webhook_records().list_deliveries(hook.id)[0]
        assert delivery.status == "succeeded"
        assert [(a.attempt, a.response_code) for a in delivery.attempts] == [(1, 500), (2, 200)]
        assert again["Body"] == message["Body"]


def test_exhausted_deliveries_are_dead_lettered_and_a_failing_endpoint_is_disabled(
    aws: Stack, lifecycle: dict[str, str], monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    monkeypatch.setenv("SKYLOOP_WEBHOOK_DISABLE_AFTER_S", "0")
    get_settings.cache_clear()
    with WebhookReceiver() as receiver:
        hook = endpoint(alice, receiver.url, events=["agent.session.in_progress"])
        with principals.acting_as(as_principal(alice)):
            session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
        client_tool_turn(aws, session.id)
        publish(stream_records(aws, session.id))
        receiver.fail_next(500, 500, 500)
        # WHEN all three attempts of the schedule (1 s, 1 s) fail
        for _ in range(3):
            deadline = time.monotonic() + 5
            while not deliver(lifecycle["queue"])[1]:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        # THEN the delivery is dead, in the dead-letter queue, and the endpoint disabled with the reason
        (delivery,) = webhook_records().list_deliveries(hook.id)[0]
        assert delivery.status == "dead"
        assert len(delivery.attempts) == 3
        (dead,) = drain(lifecycle["dead"])
        assert json.loads(dead["Body"])["event_id"] == delivery.id
        disabled = webhook_records().get_endpoint(hook.id)
        assert disabled is not None
        assert disabled.status == "disabled"
        assert "HTTP 500" in (disabled.disabled_reason or "")
        assert drain(lifecycle["queue"]) == []
        # WHEN the owner re-enables it and redelivers the dead delivery (a second time is refused)
        from skyloop.errors import ConflictError
        from skyloop.webhooks import service
        from skyloop.webhooks.models import UpdateWebhookRequest
        from skyloop.webhooks.queue import SqsQueue

        queue = SqsQueue(deps.client("sqs"), lifecycle["queue"])
        with principals.acting_as(as_principal(alice)):
            with pytest.raises(ConflictError, match="disabled"):
                service.redeliver(webhook_records(), queue, hook.id, delivery.id)
            service.update(
                webhook_records(), get_settings(), hook.id, UpdateWebhookRequest(enabled=True), {"enabled"}
            )
            service.redeliver(webhook_records(), queue, hook.id, delivery.id)
            with pytest.raises(ConflictError, match="pending"):
                service.redeliver(webhook_records(), queue, hook.id, delivery.id)
        assert deliver(lifecycle["queue"])[0] == {"batchItemFailures": []}
        # THEN it arrives under the same webhook-id, and its attempts start again at 1
        assert receiver.received[-1].webhook_id == delivery.id
        (again,) = webhook_records().list_deliveries(hook.id)[0]
        assert again.status == "succeeded"
        assert [(a.attempt, a.response_code) for a in again.attempts] == [
            (1, 500),
            (2, 500),
            (3, 500),
            (1, 200),
        ]


def test_a_restarted_local_stack_resumes_the_deliveries_it_left_unfinished(
    lifecycle: dict[str, str], alice: str
) -> None:
    """skyloop dev's retry timers die with the process; the rows in its data directory do not."""
    from skyloop.webhooks.local import LocalDispatcher
    from skyloop.webhooks.models import Attempt, Delivery

    records = webhook_records()
    session_id = uuid.uuid4().hex
    with WebhookReceiver() as receiver:
        hook = endpoint(alice, receiver.url)
        now = int(time.time())

        def made(n: int, status: str) -> Delivery:
            body = {
                "id": f"evt_{now}_{n}_{uuid.uuid4().hex[:6]}",
                "object": "event",
                "type": "agent.session.idle",
            }
            body["created_at"], body["data"] = now, {"id": session_id, "n": n}  # type: ignore[assignment]
            delivery = Delivery(
                id=str(body["id"]),
                endpoint_id=hook.id,
                event_type="agent.session.idle",
                session_id=session_id,
                body=json.dumps(body),
                created_at=now + n,
            )
            assert records.create_delivery(delivery, ttl_s=3600)
            if status == "retrying":  # one attempt failed before the stop; its timer died with the stack
                failed = Attempt(attempt=1, at=now + n, status="failed", response_code=500, latency_ms=3)
                records.record_attempt(delivery, failed, "retrying", time.time() + 300)
            elif status == "succeeded":
                records.set_delivery_status(delivery, "succeeded")
            return delivery

        # Given what a stopped stack left: a retrying delivery, a pending one and one already delivered
        retrying, pending, done = made(0, "retrying"), made(1, "pending"), made(2, "succeeded")
        # When the restarted stack's dispatcher resumes
        dispatcher = LocalDispatcher(records, get_settings(), workers=2)
        try:
            resumed = dispatcher.resume()
            receiver.wait_for("agent.session.idle", count=2, timeout=20)
        finally:
            dispatcher.close()
    # Then the unfinished ones went out again, in their order, and the finished one did not
    assert resumed >= 2
    mine = [r.event["data"]["n"] for r in receiver.events(session_id=session_id)]
    assert mine == [0, 1]
    for delivery in (retrying, pending):
        found = records.get_delivery(hook.id, delivery.id)
        assert found is not None
        assert found.status == "succeeded", found
    assert done.id not in {r.webhook_id for r in receiver.events()}


# ------------------------------------------------------------------------- the local publisher
class _Collected:
    """The local dispatcher's place: what the publisher enqueued, in order."""

    def __init__(self) -> None:
        self.deliveries: list[Any] = []

    def enqueue(self, delivery: Any, *, redelivery: int = 0) -> None:
        self.deliveries.append(delivery)

    def to(self, endpoint_id: str) -> list[str]:
        return [d.event_type for d in self.deliveries if d.endpoint_id == endpoint_id]


def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_local_publisher_reads_routes_once_until_an_endpoint_is_written(
    aws: Stack, alice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.webhooks.local import LocalPublisher

    records = webhook_records()
    reads: list[str] = []
    real_routes = records.routes

    def routes(owner: str) -> list[Endpoint]:
        reads.append(owner)
        return real_routes(owner)

    monkeypatch.setattr(records, "routes", routes)
    queue = _Collected()
    first = endpoint(alice, "http://127.0.0.1:9/first")
    publisher = LocalPublisher(aws.store, records, queue, get_settings()).start()
    try:
        # Given alice's session and a client-tool turn, published to her endpoint
        with principals.acting_as(as_principal(alice)):
            session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
        client_tool_turn(aws, session.id)
        _until(lambda: "agent.session.idle" in queue.to(first.id))
        # Then her routes were read once for all of it (four publishes)
        assert len(queue.to(first.id)) == 4
        assert reads == [alice]
        # When she adds an endpoint (its write notifies) and the session runs again
        second = endpoint(alice, "http://127.0.0.1:9/second")
        again = Append(session.id)
        again.event(ev.SESSION_STATUS, ev.session_status(session.id, "running", response_id="resp_2"))
        aws.store.append(again)
        # Then the routes are read again and the new endpoint gets the session's next event
        _until(lambda: queue.to(second.id) == ["agent.session.in_progress"])
        assert reads == [alice, alice]
    finally:
        publisher.stop()


def test_the_local_publisher_reads_an_unheard_owners_turn_once_and_misses_nothing_once_heard(
    aws: Stack, alice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyloop.webhooks import local
    from skyloop.webhooks.local import LocalPublisher

    monkeypatch.setattr(local, "UNHEARD_DELAY_S", 0.5)
    records = webhook_records()
    reads: list[int] = []
    real_read = aws.store.read_event_page

    def read_event_page(session_id: str, after: int, **kwargs: Any) -> Any:
        reads.append(after)
        return real_read(session_id, after, **kwargs)

    monkeypatch.setattr(aws.store, "read_event_page", read_event_page)
    queue = _Collected()
    publisher = LocalPublisher(aws.store, records, queue, get_settings()).start()
    try:
        # Given alice's session, published once while nobody listens to her (no endpoint, no rule)
        with principals.acting_as(as_principal(alice)):
            session = aws.new_session(aws.mock_llm.script({"text": "unused"}))
        first = Append(session.id)
        first.event(ev.SESSION_STATUS, ev.session_status(session.id, "idle"))
        aws.store.append(first)
        _until(lambda: len(reads) >= 1)
        time.sleep(0.1)
        reads.clear()

        # When a whole client-tool turn is appended (three appends)
        client_tool_turn(aws, session.id)

        # Then its log is read once, after the delay, not once per append
        time.sleep(0.3)
        assert reads == []
        _until(lambda: len(reads) >= 1)
        time.sleep(0.2)
        assert len(reads) == 1, reads

        # And once she adds an endpoint, the session's next event reaches it at once, and only it
        heard = endpoint(alice, "http://127.0.0.1:9/heard")
        again = Append(session.id)
        again.event(ev.SESSION_STATUS, ev.session_status(session.id, "running", response_id="resp_2"))
        started = time.monotonic()
        aws.store.append(again)
        _until(lambda: queue.to(heard.id) == ["agent.session.in_progress"])
        assert time.monotonic() - started < 0.5
    finally:
        publisher.stop()


def test_the_local_bus_is_sent_to_only_while_it_has_a_rule(aws: Stack) -> None:
    from skyloop.webhooks.local import RuledBus

    events, sqs = deps.client("events"), deps.client("sqs")
    name = f"bus-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=name)
    sent: list[Any] = []

    class Counting:
        meta = events.meta

        def put_events(self, **kwargs: Any) -> Any:
            sent.append(kwargs)
            return events.put_events(**kwargs)

    bus = RuledBus(Counting(), name)
    entry = {
        "Source": "skyloop",
        "DetailType": "agent.session.idle",
        "Detail": '{"n": 1}',
        "EventBusName": name,
    }
    # Given a bus without rules: an event is accepted and moto is not asked
    answer = bus.put_events(Entries=[entry])
    assert answer["FailedEntryCount"] == 0
    assert len(answer["Entries"]) == 1
    assert sent == []
    # When a rule sends the bus's events to a queue (what `skyloop events tail` makes)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventBusName=name, EventPattern=json.dumps({"source": ["skyloop"]}))
    events.put_targets(Rule=name, EventBusName=name, Targets=[{"Id": "q", "Arn": arn}])
    bus.put_events(Entries=[entry])
    # Then the event goes to moto and reaches the queue
    assert len(sent) == 1
    got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
    assert [json.loads(m["Body"])["detail"] for m in got] == [{"n": 1}]
