"""The live channel's cloud functions on moto: the ``live`` handler and the ``push_fanout`` handler.

Both run as Lambda would run them: ``functions/live/handler.py`` gets API
Gateway WebSocket events (``$connect``, ``$disconnect``, ``$default``) and
``functions/push_fanout/handler.py`` gets DynamoDB stream batches built from
the rows the event log really wrote. Posts go to moto's
``apigatewaymanagementapi``, which appends each ``PostToConnection`` body to
the connection's ``data``: the frames a client would have received, in
order. moto never answers ``GoneException`` nor fails a post, so the tests
that need those wrap the management client.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

from skyloop import auth, deps, principals
from skyloop.live import poster
from skyloop.local.handlers import LocalContext, handler_for
from skyloop.principals import Principal
from skyloop.settings import get_settings
from skyloop.store import Append, keys

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Stack

API_ID = "abc123live"
STAGE = "live"
DOMAIN = f"{API_ID}.execute-api.us-east-1.amazonaws.com"
ENDPOINT = f"https://{DOMAIN}/{STAGE}"
ACCOUNT = "123456789012"


# ------------------------------------------------------------------------------ helpers
@pytest.fixture
def live(aws: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The module's moto stack with the live endpoint configured and fresh live caches."""
    monkeypatch.setenv("SKYLOOP_LIVE_ENDPOINT", ENDPOINT)
    _fresh()
    yield aws
    monkeypatch.delenv("SKYLOOP_REQUIRE_TOKEN", raising=False)
    monkeypatch.delenv("SKYLOOP_LIVE_ENDPOINT", raising=False)
    _fresh()


def _fresh() -> None:
    get_settings.cache_clear()
    deps.live_records.cache_clear()
    poster.for_endpoint.cache_clear()


def require_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLOOP_REQUIRE_TOKEN", "true")
    get_settings.cache_clear()


def ws_event(route: str, connection_id: str, body: str | None = None) -> dict[str, Any]:
    """What API Gateway sends a WebSocket route's Lambda proxy integration."""
    kind = {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}.get(route, "MESSAGE")
    now_ms = int(time.time() * 1000)
    event: dict[str, Any] = {
        "requestContext": {
            "routeKey": route,
            "eventType": kind,
            "messageDirection": "IN",
            "connectionId": connection_id,
            "connectedAt": now_ms,
            "requestTimeEpoch": now_ms,
            "requestId": uuid.uuid4().hex,
            "extendedRequestId": uuid.uuid4().hex,
            "apiId": API_ID,
            "domainName": DOMAIN,
            "stage": STAGE,
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "pytest"},
        },
        "isBase64Encoded": False,
    }
    if kind == "MESSAGE":
        event["requestContext"]["messageId"] = uuid.uuid4().hex
        event["body"] = body
    else:
        event["headers"] = {"Host": DOMAIN, "Sec-WebSocket-Version": "13"}
    return event


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


def invoke_live(route: str, connection_id: str, frame: dict[str, Any] | str | None = None) -> dict[str, Any]:
    body = frame if isinstance(frame, str) or frame is None else json.dumps(frame)
    return dict(handler_for("live")(ws_event(route, connection_id, body), context("live")))


def connect(*frames: dict[str, Any]) -> str:
    """A new connection, then each frame sent on it; returns its id."""
    connection_id = f"conn{uuid.uuid4().hex[:12]}="
    assert invoke_live("$connect", connection_id) == {"statusCode": 200}
    for frame in frames:
        invoke_live("$default", connection_id, frame)
    return connection_id


def received(connection_id: str) -> list[dict[str, Any]]:
    """Every frame posted to the connection so far, in order (moto keys connections by the id as
    the request path carries it: URL-encoded, as API Gateway's ``=``-ended ids need)."""
    backend = apigatewaymanagementapi_backends[ACCOUNT]["us-east-1"]
    data = backend.connections[quote(connection_id, safe="")].data.decode()
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(data):
        frame, at = decoder.raw_decode(data, at)
        out.append(frame)
    return out


def events_of(frames: list[dict[str, Any]]) -> list[int]:
    return [f["id"] for f in frames if f["type"] == "event"]


def append(stack: Stack, session_id: str, n: int, *, text: str = "x") -> None:
    batch = Append(session_id=session_id)
    for i in range(n):
        batch.event("response.output_text.delta", {"delta": f"{text}{i}", "response_id": "resp_live"})
    stack.store.append(batch)


def subscription_rows(stack: Stack, session_id: str) -> dict[str, dict[str, Any]]:
    return {sk: row for sk, row in stack.rows(session_id).items() if sk.startswith(keys.LIVE_PREFIX)}


_stream_seq = iter(range(10**20, 10**21))


def stream_records(stack: Stack, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
    """The table stream's INSERT records of the session's events after ``after`` (as Lambda gets them),
    with a MODIFY of the session row and an INSERT of a non-event row mixed in, as the real stream has."""
    rows = stack.rows(session_id)
    out = [_record("MODIFY", rows[keys.META])]
    for sk in sorted(rows):
        if sk.startswith(keys.EVENT_PREFIX) and int(sk.removeprefix(keys.EVENT_PREFIX)) > after:
            out.append(_record("INSERT", rows[sk]))
    out.insert(1, _record("INSERT", {"pk": {"S": keys.session_pk(session_id)}, "sk": {"S": "ITEM#x"}}))
    return out


def _record(name: str, image: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": time.time(),
            "Keys": {"pk": image["pk"], "sk": image["sk"]},
            "NewImage": image,
            "SequenceNumber": str(next(_stream_seq)),
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t/stream/2026-01-01T00:00:00.000",
    }


def fan_out(records: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(handler_for("push_fanout")({"Records": records}, context("push_fanout")))


def new_session(stack: Stack, owner: str = "local") -> str:
    principal = Principal(name=owner, scopes=frozenset({"read", "write"}))
    with principals.acting_as(principal):
        return stack.new_session(stack.mock_llm.script({"text": "unused"})).id


# ------------------------------------------------------------------------------ the live function
def test_subscribe_after_n_replays_exactly_the_events_after_n_then_live(live: Stack) -> None:
    # Given a session with 5 events
    session_id = new_session(live)
    append(live, session_id, 5)
    # When a connection subscribes after 2
    conn = connect({"action": "subscribe", "session_id": session_id, "after": 2})
    # Then it gets exactly events 3..5 (the SSE payloads), then "subscribed" saying where it stands
    frames = received(conn)
    assert events_of(frames) == [3, 4, 5]
    assert frames[0]["event"] == {
        "type": "response.output_text.delta",
        "delta": "x2",
        "response_id": "resp_live",
        "sequence_number": 3,
    }
    assert frames[-1] == {
        "type": "subscribed",
        "session_id": session_id,
        "after": 2,
        "last_event_id": 5,
        "complete": True,
    }
    # And its subscription row sits in the session's partition, expiring with the connection
    rows = subscription_rows(live, session_id)
    assert list(rows) == [f"{keys.LIVE_PREFIX}{conn}"]
    assert int(rows[f"{keys.LIVE_PREFIX}{conn}"]["expires_at"]["N"]) > time.time() + 7000
    # When two more events commit and the table stream brings them to the fan-out
    append(live, session_id, 2, text="y")
    assert fan_out(stream_records(live, session_id, after=5)) == {"batchItemFailures": []}
    # Then they follow live, once each
    assert events_of(received(conn)) == [3, 4, 5, 6, 7]


def test_subscribe_without_a_cursor_is_a_live_tail(live: Stack) -> None:
    session_id = new_session(live)
    append(live, session_id, 3)
    conn = connect({"action": "subscribe", "session_id": session_id, "after": None})
    assert received(conn) == [
        {"type": "subscribed", "session_id": session_id, "after": 3, "last_event_id": 3, "complete": True}
    ]
    append(live, session_id, 1)
    fan_out(stream_records(live, session_id, after=3))
    assert events_of(received(conn)) == [4]


def test_subscription_is_written_before_the_replay_reads(
    live: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a session, and an event that commits between the subscription write and the replay's read
    session_id = new_session(live)
    append(live, session_id, 2)
    store = live.store
    original = type(store).read_event_page
    seen_rows: list[int] = []

    def read_after_commit(self: Any, sid: str, after: int, **kw: Any) -> Any:
        if not seen_rows:
            seen_rows.append(len(subscription_rows(live, session_id)))
            append(live, session_id, 1, text="racing")
        return original(self, sid, after, **kw)

    monkeypatch.setattr(type(store), "read_event_page", read_after_commit)
    conn = connect({"action": "subscribe", "session_id": session_id, "after": 0})
    # Then the subscription existed before the log was read, and the racing event is replayed
    assert seen_rows == [1]
    assert events_of(received(conn)) == [1, 2, 3]


def test_disconnect_removes_the_connection_and_its_subscriptions(live: Stack) -> None:
    a, b = new_session(live), new_session(live)
    conn = connect(
        {"action": "subscribe", "session_id": a, "after": None},
        {"action": "subscribe", "session_id": b, "after": None},
    )
    assert len(subscription_rows(live, a)) == len(subscription_rows(live, b)) == 1
    invoke_live("$disconnect", conn)
    assert subscription_rows(live, a) == subscription_rows(live, b) == {}
    assert (
        live.ddb.get_item(
            TableName=live.table_name,
            Key={"pk": {"S": f"{keys.LIVE_PREFIX}{conn}"}, "sk": {"S": "CONNECTION"}},
        ).get("Item")
        is None
    )


def test_unsubscribe_stops_delivery(live: Stack) -> None:
    session_id = new_session(live)
    conn = connect(
        {"action": "subscribe", "session_id": session_id, "after": None},
        {"action": "unsubscribe", "session_id": session_id},
    )
    assert received(conn)[-1] == {"type": "unsubscribed", "session_id": session_id}
    assert subscription_rows(live, session_id) == {}
    append(live, session_id, 1)
    fan_out(stream_records(live, session_id))
    assert events_of(received(conn)) == []


def test_ping_answers_pong(live: Stack) -> None:
    conn = connect({"action": "ping"})
    assert received(conn) == [{"type": "pong"}]


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        "",
        json.dumps({"action": "shout"}),
        json.dumps({"action": "subscribe"}),
        json.dumps({"action": "subscribe", "session_id": "a" * 32, "after": -1}),
        json.dumps({"action": "subscribe", "session_id": "a" * 32, "after": "7"}),
        json.dumps({"action": "subscribe", "session_id": "a" * 32, "extra": 1}),
        json.dumps([1, 2]),
    ],
    ids=["not-json", "empty", "unknown-action", "no-session", "negative", "string-cursor", "extra", "array"],
)
def test_bad_frames_answer_invalid_input_and_write_nothing(live: Stack, frame: str) -> None:
    session_id = new_session(live)
    conn = connect()
    invoke_live("$default", conn, frame.replace("a" * 32, session_id))
    (answer,) = received(conn)
    assert answer["type"] == "error"
    assert answer["code"] == "invalid_input"
    assert subscription_rows(live, session_id) == {}


def test_without_auth_a_subscribe_is_refused_and_nothing_subscribed(
    live: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = new_session(live)
    require_tokens(monkeypatch)
    conn = connect({"action": "subscribe", "session_id": session_id, "after": 0})
    (answer,) = received(conn)
    assert answer["type"] == "error"
    assert answer["code"] == "unauthorized"
    assert subscription_rows(live, session_id) == {}


def test_a_bad_token_is_refused_and_leaves_the_connection_unauthenticated(
    live: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = new_session(live)
    require_tokens(monkeypatch)
    conn = connect(
        {"action": "auth", "token": "sky_not-a-real-token"},
        {"action": "subscribe", "session_id": session_id, "after": 0},
    )
    assert [(f["type"], f.get("code")) for f in received(conn)] == [
        ("error", "unauthorized"),
        ("error", "unauthorized"),
    ]
    assert subscription_rows(live, session_id) == {}


def test_another_principals_session_is_not_found_and_an_admin_sees_it(
    live: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's session and tokens for bob and for an admin
    session_id = new_session(live, owner="alice")
    append(live, session_id, 2)
    bob, _ = auth.create_token(live.store, "bob", owner="bob")
    admin, _ = auth.create_token(live.store, "ops", owner="ops", scopes=("admin",))
    alice, _ = auth.create_token(live.store, "alice", owner="alice", scopes=("read",))
    require_tokens(monkeypatch)
    # When bob subscribes to it
    as_bob = connect(
        {"action": "auth", "token": bob}, {"action": "subscribe", "session_id": session_id, "after": 0}
    )
    # Then it is not found, exactly as an unknown id, and nothing is subscribed
    unknown = uuid.uuid4().hex
    invoke_live("$default", as_bob, {"action": "subscribe", "session_id": unknown, "after": 0})
    authenticated, refused, missing = received(as_bob)
    assert authenticated == {"type": "authenticated", "principal": "bob"}
    assert refused == {
        "type": "error",
        "code": "not_found",
        "message": f"Session not found: '{session_id}'",
        "session_id": session_id,
    }
    assert missing["code"] == "not_found"
    assert missing["message"] == f"Session not found: '{unknown}'"
    assert subscription_rows(live, session_id) == {}
    # And an admin, and alice with a read-only token, may watch it
    for token in (admin, alice):
        conn = connect(
            {"action": "auth", "token": token}, {"action": "subscribe", "session_id": session_id, "after": 0}
        )
        assert events_of(received(conn)) == [1, 2]
    assert len(subscription_rows(live, session_id)) == 2


def test_a_revoked_token_cannot_subscribe_any_more(live: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    session_id = new_session(live)
    token, record = auth.create_token(live.store, "short-lived")
    require_tokens(monkeypatch)
    conn = connect({"action": "auth", "token": token})
    auth.revoke_token(live.store, record.id)
    invoke_live("$default", conn, {"action": "subscribe", "session_id": session_id, "after": 0})
    assert received(conn)[-1]["code"] == "unauthorized"
    assert subscription_rows(live, session_id) == {}


def test_a_connection_watches_at_most_the_limit(live: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from skyloop.live import protocol

    monkeypatch.setattr(protocol, "MAX_SUBSCRIPTIONS", 2)
    a, b, c = (new_session(live) for _ in range(3))
    conn = connect(*({"action": "subscribe", "session_id": s, "after": None} for s in (a, b, c)))
    assert received(conn)[-1]["code"] == "quota_exceeded"
    assert subscription_rows(live, c) == {}


def test_a_replay_that_runs_out_of_time_says_so(live: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from skyloop.live import cloud

    session_id = new_session(live)
    append(live, session_id, 4)
    budget = iter([60.0, 60.0, 1.0])  # time left before each post: the third is too late
    monkeypatch.setattr(cloud, "REPLAY_RESERVE_S", 3.0)
    conn = connect()
    deps_store = deps.store()
    service = cloud.LiveService(
        deps_store, deps.live_records(), poster.for_endpoint(ENDPOINT), get_settings()
    )
    service.receive(
        conn,
        json.dumps({"action": "subscribe", "session_id": session_id, "after": 0}),
        remaining_s=lambda: next(budget, 0.0),
    )
    frames = received(conn)
    assert events_of(frames) == [1, 2]
    assert frames[-1] == {
        "type": "subscribed",
        "session_id": session_id,
        "after": 0,
        "last_event_id": 2,
        "complete": False,
    }


# ------------------------------------------------------------------------------ the fan-out
def test_fanout_posts_to_exactly_the_subscribed_connections(live: Stack) -> None:
    # Given two sessions, two watchers of the first, one of the second, one connection watching nothing
    first, second = new_session(live), new_session(live)
    w1 = connect({"action": "subscribe", "session_id": first, "after": None})
    w2 = connect({"action": "subscribe", "session_id": first, "after": None})
    w3 = connect({"action": "subscribe", "session_id": second, "after": None})
    idle = connect()
    # When events of both sessions come through the stream in one batch (with other rows' records)
    append(live, first, 2)
    append(live, second, 1)
    result = fan_out(stream_records(live, first) + stream_records(live, second))
    # Then each watcher gets its session's events, in order, and nobody else gets anything
    assert result == {"batchItemFailures": []}
    assert events_of(received(w1)) == events_of(received(w2)) == [1, 2]
    assert [f["session_id"] for f in received(w1) if f["type"] == "event"] == [first, first]
    assert events_of(received(w3)) == [1]
    assert received(idle) == []


def test_fanout_forgets_connections_that_are_gone(live: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    session_id = new_session(live)
    stays = connect({"action": "subscribe", "session_id": session_id, "after": None})
    left = connect({"action": "subscribe", "session_id": session_id, "after": None})
    gone_error = ClientError({"Error": {"Code": "GoneException", "Message": "gone"}}, "PostToConnection")
    _fail_posts(monkeypatch, {left: gone_error})
    append(live, session_id, 2)
    # When the fan-out meets the gone connection
    assert fan_out(stream_records(live, session_id)) == {"batchItemFailures": []}
    # Then the other still gets everything, and the gone one's rows are deleted at once
    assert events_of(received(stays)) == [1, 2]
    assert list(subscription_rows(live, session_id)) == [f"{keys.LIVE_PREFIX}{stays}"]


def test_a_failing_connection_does_not_stop_the_others_nor_lose_the_batch(
    live: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three watchers of a session, and PostToConnection failing (not gone) for one of them
    session_id = new_session(live)
    good = [connect({"action": "subscribe", "session_id": session_id, "after": None}) for _ in range(2)]
    broken = connect({"action": "subscribe", "session_id": session_id, "after": None})
    throttled = ClientError(
        {"Error": {"Code": "LimitExceededException", "Message": "slow down"}}, "PostToConnection"
    )
    _fail_posts(monkeypatch, {broken: throttled})
    append(live, session_id, 3)
    records = stream_records(live, session_id)
    event_records = [r for r in records if r["dynamodb"]["Keys"]["sk"]["S"].startswith(keys.EVENT_PREFIX)]
    # When the batch is fanned out
    result = fan_out(records)
    # Then the others got every event, in order
    for conn in good:
        assert events_of(received(conn)) == [1, 2, 3]
    # And the batch reports its event records as failed, earliest first, so Lambda retries from there
    failed = [f["itemIdentifier"] for f in result["batchItemFailures"]]
    assert failed == [r["dynamodb"]["SequenceNumber"] for r in event_records]
    # And the broken connection stays subscribed (it is not gone): the retry reaches it once it works
    assert f"{keys.LIVE_PREFIX}{broken}" in subscription_rows(live, session_id)
    monkeypatch.undo()
    monkeypatch.setenv("SKYLOOP_LIVE_ENDPOINT", ENDPOINT)
    _fresh()
    assert fan_out(records) == {"batchItemFailures": []}
    assert events_of(received(broken)) == [1, 2, 3]
    assert events_of(received(good[0])) == [1, 2, 3, 1, 2, 3]  # again: clients dedupe by id


def test_fanout_ignores_records_that_are_not_new_events(live: Stack) -> None:
    session_id = new_session(live)
    conn = connect({"action": "subscribe", "session_id": session_id, "after": None})
    append(live, session_id, 1)
    records = [
        r
        for r in stream_records(live, session_id)
        if not r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")
    ]
    records.append(
        _record("REMOVE", {"pk": {"S": keys.session_pk(session_id)}, "sk": {"S": keys.event_sk(1)}})
    )
    assert fan_out(records) == {"batchItemFailures": []}
    assert events_of(received(conn)) == []


def _fail_posts(monkeypatch: pytest.MonkeyPatch, failures: dict[str, Exception]) -> None:
    """Make PostToConnection raise for some connections (moto never does)."""
    client = poster.for_endpoint(ENDPOINT).client
    real = client.post_to_connection

    def post_to_connection(**kwargs: Any) -> Any:
        error = failures.get(kwargs["ConnectionId"])
        if error is not None:
            raise error
        return real(**kwargs)

    monkeypatch.setattr(client, "post_to_connection", post_to_connection)
