"""Webhooks in Claude Managed Agents' format on moto: endpoints made through ``/v1/webhooks`` with
``format: anthropic``, turns run through ``/v1/sessions``, the cloud's path (table-stream batches ->
``lifecycle_events`` -> FIFO queue -> ``webhook_delivery``) and the local stack's (its publisher and
dispatcher), a real receiver on loopback, and every delivery checked with the pinned ``anthropic`` SDK.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import anthropic
import pytest
from anthropic.types.beta import BetaWebhookEvent
from standardwebhooks.webhooks import WebhookVerificationError

from skyloop import deps, sessions
from skyloop.lifecycle_events import parse
from skyloop.models.agent import AgentSpec
from skyloop.settings import get_settings
from skyloop.webhooks.records import webhook_records
from tests.integration.conftest import wait_until
from tests.integration.test_webhooks import deliver, publish, stream_records
from tests.webhook_receiver import Received, WebhookReceiver

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration.conftest import Api, Stack

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the user's machine",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
CLAUDE = anthropic.Anthropic(api_key="x")
SLOW_S = 90.0  # turns run through moto's Step Functions: slow when the machine is busy


@pytest.fixture
def lifecycle(aws: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The FIFO delivery queue (no bus: EventBridge is test_webhooks.py's); receivers on loopback."""
    suffix = uuid.uuid4().hex[:8]
    queue = deps.client("sqs").create_queue(
        QueueName=f"claude-{suffix}.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    monkeypatch.setenv("SKYLOOP_WEBHOOK_QUEUE_URL", queue)
    monkeypatch.setenv("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")
    monkeypatch.setenv("SKYLOOP_WEBHOOK_RETRY_SCHEDULE", "1,1")
    get_settings.cache_clear()
    yield queue
    get_settings.cache_clear()


@pytest.fixture
def hooks(api: Api) -> Iterator[list[str]]:
    """Endpoints the test made, deleted after it (the module's sessions all belong to one principal)."""
    made: list[str] = []
    yield made
    for endpoint_id in made:
        api.call("DELETE", f"/v1/webhooks/{endpoint_id}")


def add_endpoint(api: Api, hooks: list[str], url: str, **extra: Any) -> dict[str, Any]:
    created = api.post_json("/v1/webhooks", {"url": url, **extra})
    assert created.status == 201, created.body
    hooks.append(created.body["id"])
    return dict(created.body)


def new_session(aws: Stack, api: Api, *script: dict[str, Any]) -> str:
    agent = aws.register_agent(aws.mock_llm.script(*script))
    created = api.post_json("/v1/sessions", {"agent_id": agent.id})
    assert created.status == 201, created.body
    return str(created.body["id"])


def priced_session(aws: Stack, api: Api, limit_cents: int) -> str:
    """A session whose model call costs a cent (the mock LLM counts 10 input tokens) and its spend limit."""
    spec = AgentSpec.model_validate(
        {
            "name": f"priced-{uuid.uuid4().hex[:10]}",
            "prompt": "You are a test agent.",
            "executor": {
                "harness": "openai-agents",
                "model": aws.mock_llm.script({"text": "one cent"}),
                "pricing": {"input": 1000.0, "output": 0.0},
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": aws.mock_llm.base_url},
            },
        }
    )
    created = api.post_json("/v1/sessions", {"agent_id": sessions.register(spec).id})
    assert created.status == 201, created.body
    aws.store.update_session(created.body["id"], {"spend_limit_cents": limit_cents})
    return str(created.body["id"])


def unwrap(received: Received, secret: str) -> BetaWebhookEvent:
    """What a receiver written for Claude does: verify and parse with the SDK; then validate strictly."""
    body = received.body.decode()
    event = CLAUDE.beta.webhooks.unwrap(body, headers=received.headers, key=secret)
    assert isinstance(event, BetaWebhookEvent)
    strict = BetaWebhookEvent.model_validate(json.loads(body))
    assert strict.id == event.id == received.webhook_id
    assert strict.data.type == event.data.type
    return strict


def deliver_all(queue: str) -> None:
    """Hand every visible message to the delivery function, one at a time, as Lambda would."""
    while deliver(queue)[1]:
        pass


# ------------------------------------------------------------------------------ the cloud's path
def test_a_turn_reaches_an_anthropic_endpoint_in_claudes_shape_and_a_skyloop_one_unchanged(
    aws: Stack, api: Api, lifecycle: str, hooks: list[str]
) -> None:
    with WebhookReceiver() as claude_rx, WebhookReceiver() as skyloop_rx:
        # GIVEN an anthropic-format endpoint and a skyloop one, made through the API
        claude_hook = add_endpoint(api, hooks, claude_rx.url, format="anthropic")
        skyloop_hook = add_endpoint(api, hooks, skyloop_rx.url)
        assert (claude_hook["format"], skyloop_hook["format"]) == ("anthropic", "skyloop")
        assert api.get(f"/v1/webhooks/{claude_hook['id']}").body["format"] == "anthropic"
        # WHEN a session's turn calls a client tool, is answered, and completes
        session_id = new_session(
            aws,
            api,
            {"tool_calls": [{"call_id": "call_read", "name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"text": "The file says hi."},
        )
        assert api.post_message(session_id, "What is in a.txt?", tools=[READ_FILE]).status == 202
        aws.wait_for_event(
            session_id,
            lambda e: e.type == "response.output_item.done" and e.data["item"]["status"] == "action_required",
            timeout=SLOW_S,
            what="action_required",
        )
        assert api.post_output(session_id, "call_read", "hi").status == 202
        aws.wait_for_status(session_id, "idle", after_seq=1, timeout=SLOW_S)
        # AND the table's stream hands its rows to the publisher, the queue its messages to the delivery
        # function (twice: a retried batch must send nothing again)
        records = stream_records(aws, session_id, created=True)
        assert publish(records) == {"batchItemFailures": []}
        assert publish(records) == {"batchItemFailures": []}
        deliver_all(lifecycle)
    # THEN the anthropic endpoint got Claude's events, in order, each verified by the SDK's unwrap
    events = [unwrap(r, claude_hook["secret"]) for r in claude_rx.received]
    assert [e.data.type for e in events] == [
        "session.created",
        "session.status_run_started",
        "session.requires_action",
        "session.status_idled",
    ]
    assert {(e.data.id, e.data.organization_id, e.data.workspace_id) for e in events} == {
        (session_id, "skyloop", "local")
    }
    assert len({e.id for e in events}) == 4
    # AND a tampered body or another secret does not verify
    last = claude_rx.received[-1]
    with pytest.raises(WebhookVerificationError):
        CLAUDE.beta.webhooks.unwrap(
            last.body.decode().replace("status_idled", "status_terminated"),
            headers=last.headers,
            key=claude_hook["secret"],
        )
    with pytest.raises(WebhookVerificationError):
        CLAUDE.beta.webhooks.unwrap(last.body.decode(), headers=last.headers, key=skyloop_hook["secret"])
    # AND the skyloop endpoint on the same session still got today's payloads
    assert [parse(r.body).type for r in skyloop_rx.received] == [
        "agent.session.created",
        "agent.session.in_progress",
        "agent.session.action_required",
        "agent.session.idle",
    ]
    assert all(r.event["data"]["id"] == session_id for r in skyloop_rx.received)
    # AND the deliveries list Claude's ids and types, exactly as posted
    listed = api.get(f"/v1/webhooks/{claude_hook['id']}/deliveries").body["data"]
    assert sorted((d["id"], d["event_type"], d["status"]) for d in listed) == sorted(
        (e.id, e.data.type, "succeeded") for e in events
    )


def test_a_turn_that_spends_the_budget_is_budget_reached_not_status_idled(
    aws: Stack, api: Api, lifecycle: str, hooks: list[str]
) -> None:
    with WebhookReceiver() as receiver:
        # GIVEN an anthropic endpoint and a session with a one-cent limit
        hook = add_endpoint(api, hooks, receiver.url, format="anthropic")
        session_id = priced_session(aws, api, limit_cents=1)
        # WHEN its turn's one model call costs that cent: the turn completes, the budget spent
        assert api.post_message(session_id, "hello").status == 202
        session = aws.wait_for_status(session_id, "idle", after_seq=1, timeout=SLOW_S)
        assert session.spend_micros >= 10_000
        assert publish(stream_records(aws, session_id, created=True)) == {"batchItemFailures": []}
        deliver_all(lifecycle)
    # THEN the turn's end reaches the endpoint as Claude's budget_reached
    assert [unwrap(r, hook["secret"]).data.type for r in receiver.received] == [
        "session.created",
        "session.status_run_started",
        "session.budget_reached",
    ]


# ------------------------------------------------------------------------------ the local stack's path
def test_the_local_stack_delivers_claudes_shape_and_budget_reached_both_ways(
    aws: Stack, api: Api, lifecycle: str, hooks: list[str]
) -> None:
    from skyloop.webhooks.local import LocalDispatcher, LocalPublisher

    records = webhook_records()
    dispatcher = LocalDispatcher(records, get_settings(), workers=2)
    publisher = LocalPublisher(aws.store, records, dispatcher, get_settings()).start()
    try:
        with WebhookReceiver() as receiver:
            # GIVEN an anthropic endpoint; a session with budget for one model call, one with none
            hook = add_endpoint(api, hooks, receiver.url, format="anthropic")
            plain, spent, stopped = (
                new_session(aws, api, {"text": "hi"}),
                priced_session(aws, api, limit_cents=1),
                priced_session(aws, api, limit_cents=0),
            )
            # WHEN each runs a turn: the first completes, the second completes spending its budget, and
            # spend control stops the third before its model call
            for session_id in (plain, spent, stopped):
                assert api.post_message(session_id, "hello").status == 202
            for session_id, status in ((plain, "idle"), (spent, "idle"), (stopped, "failed")):
                aws.wait_for_status(session_id, status, after_seq=1, timeout=SLOW_S)

            def types(session_id: str) -> list[str]:
                found = (unwrap(r, hook["secret"]) for r in list(receiver.received))
                return [e.data.type for e in found if e.data.id == session_id]

            # THEN the endpoint gets each session's events in Claude's shape, verified by the SDK
            wait_until(lambda: len(receiver.received) >= 9, timeout=SLOW_S, what="nine Claude events")
            time.sleep(0.3)  # anything more would come now
            start = ["session.created", "session.status_run_started"]
            assert types(plain) == [*start, "session.status_idled"]
            assert types(spent) == [*start, "session.budget_reached"]
            assert types(stopped) == [*start, "session.budget_reached"]
    finally:
        publisher.stop()
        dispatcher.close()


# ------------------------------------------------------------------------------------- the API
def test_an_anthropic_endpoint_filters_claude_types_and_its_test_event_unwraps(
    api: Api, lifecycle: str, hooks: list[str]
) -> None:
    with WebhookReceiver() as receiver:
        # an unknown type for the format is a 400 in skyloop's error shape, naming it; nothing is written
        before = api.get("/v1/webhooks").body["data"]
        refused = api.post_json(
            "/v1/webhooks", {"url": receiver.url, "format": "anthropic", "events": ["agent.session.idle"]}
        )
        assert refused.status == 400
        assert refused.error()["code"] == "invalid_input"
        assert "agent.session.idle" in refused.error()["message"]
        assert api.post_json("/v1/webhooks", {"url": receiver.url, "format": "claude"}).status == 400
        assert api.get("/v1/webhooks").body["data"] == before
        # Claude's types are accepted
        hook = add_endpoint(
            api,
            hooks,
            receiver.url,
            format="anthropic",
            events=["session.status_idled", "session.requires_action"],
        )
        assert hook["events"] == ["session.status_idled", "session.requires_action"]
        # switching a filtering endpoint's format needs the new format's filter; then it takes it
        path = f"/v1/webhooks/{hook['id']}"
        switched = api.patch_json(path, {"format": "skyloop"})
        assert switched.status == 400
        assert switched.error()["code"] == "invalid_input"
        assert api.patch_json(path, {"events": ["agent.session.idle"]}).status == 400  # still anthropic
        both = api.patch_json(path, {"format": "skyloop", "events": ["agent.session.idle"]})
        assert both.status == 200, both.body
        assert (both.body["format"], both.body["events"]) == ("skyloop", ["agent.session.idle"])
        back = api.patch_json(path, {"format": "anthropic", "events": []})
        assert (back.body["format"], back.body["events"]) == ("anthropic", [])
        # the test route posts a Claude event the SDK unwraps
        tested = api.post_json(f"{path}/test", {})
        assert tested.body["success"] is True, tested.body
        event = unwrap(receiver.received[-1], hook["secret"])
        assert (event.data.type, tested.body["event_type"], tested.body["event_id"]) == (
            "session.created",
            "session.created",
            event.id,
        )
        # and an endpoint in Claude's format is not one of OpenAI's webhook endpoints
        assert api.get(f"/openai/v1/webhook_endpoints/{hook['id']}").status == 404
        listed = api.get("/openai/v1/webhook_endpoints").body["data"]
        assert hook["id"] not in [e["id"] for e in listed]
        assert api.post_json(f"/openai/v1/webhook_endpoints/{hook['id']}", {"name": "x"}).status == 404
        assert api.call("DELETE", f"/openai/v1/webhook_endpoints/{hook['id']}").status == 404


def test_the_local_publisher_derives_from_the_session_as_of_the_events_it_read(
    aws: Stack, api: Api, lifecycle: str, hooks: list[str]
) -> None:
    from skyloop.webhooks.local import LocalDispatcher, LocalPublisher

    # GIVEN a session whose turn spent its budget, and the session as it was read before that turn ended
    # (the publisher reads the session, then its events: an append may land in between)
    records = webhook_records()
    dispatcher = LocalDispatcher(records, get_settings(), workers=2)
    publisher = LocalPublisher(aws.store, records, dispatcher, get_settings())
    with WebhookReceiver() as receiver:
        hook = add_endpoint(api, hooks, receiver.url, format="anthropic")
        spent = priced_session(aws, api, limit_cents=1)
        stale = aws.store.get_session(spent)
        assert api.post_message(spent, "hello").status == 202
        aws.wait_for_status(spent, "idle", after_seq=1, timeout=SLOW_S)
        reads = [stale]
        get_session = aws.store.get_session

        def first_read_stale(session_id: str) -> Any:
            return reads.pop() if reads and session_id == spent else get_session(session_id)

        aws.store.get_session = first_read_stale  # type: ignore[method-assign]
        try:
            # WHEN the publisher processes the session with that stale first read
            publisher.process(spent)
        finally:
            del aws.store.get_session
        # THEN the turn's end is still Claude's budget_reached (derived from the session as of its events)
        wait_until(lambda: len(receiver.received) >= 2, timeout=SLOW_S, what="the session's Claude events")
        time.sleep(0.3)  # anything more would come now
        types = [unwrap(r, hook["secret"]).data.type for r in list(receiver.received)]
        assert types == ["session.status_run_started", "session.budget_reached"], types
    dispatcher.close()
