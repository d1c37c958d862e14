"""Unit: lifecycle events in Claude Managed Agents' webhook shape (skyloop.lifecycle_events.claude), the
endpoint formats (skyloop.webhooks.formats) and the publisher writing each endpoint's format; checked
against the pinned ``anthropic`` SDK's own types and ``beta.webhooks.unwrap``."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import BetaWebhookEvent
from pydantic import ValidationError
from standardwebhooks.webhooks import WebhookVerificationError

from skyloop import events as ev
from skyloop.lifecycle_events import SessionFacts, claude, derive, session_created
from skyloop.models.session import Session
from skyloop.settings import Settings
from skyloop.store import StoredEvent
from skyloop.webhooks import formats
from skyloop.webhooks.delivery import new_secret, signed_headers
from skyloop.webhooks.models import CreateWebhookRequest, Delivery, Endpoint, UpdateWebhookRequest
from skyloop.webhooks.publisher import publish

SESSION = SessionFacts(id="s" * 32, owner="alice", agent_id="a" * 32, agent_name="coder")
AT = 1_800_000_000.123


def status(seq: int, value: str, response_id: str = "resp_1") -> StoredEvent:
    return StoredEvent(seq, ev.SESSION_STATUS, ev.session_status(SESSION.id, value, response_id=response_id))


def call(seq: int, call_id: str) -> StoredEvent:
    item = ev.function_call_item(
        item_id=f"item_{call_id}",
        call_id=call_id,
        name="Read",
        arguments="{}",
        status="action_required",
        agent="coder",
        response_id="resp_1",
    )
    return StoredEvent(seq, ev.RESPONSE_ITEM_DONE, ev.item_done(item))


def terminal(seq: int, kind: str, response_id: str = "resp_1", **extra: Any) -> StoredEvent:
    state = {
        ev.RESPONSE_COMPLETED: "completed",
        ev.RESPONSE_FAILED: "failed",
        ev.RESPONSE_CANCELLED: "cancelled",
    }
    response = ev.response_object(response_id, status=state[kind], model="coder", **extra)
    return StoredEvent(seq, kind, ev.response_event(response))


def turn() -> list[Any]:
    """created, then a turn that waits for a call and completes: every type but failed."""
    log = [status(1, "running"), call(2, "c1"), terminal(3, ev.RESPONSE_COMPLETED), status(4, "idle")]
    return [session_created(SESSION, created_at=int(AT), at=AT), *derive(SESSION, log, at=AT)]


def failed(code: str) -> Any:
    error = {"code": code, "message": "stopped"}
    (event,) = derive(SESSION, [terminal(9, ev.RESPONSE_FAILED, error=error), status(10, "failed")], at=AT)
    return event


def sdk_event(found: claude.ClaudeEvent) -> BetaWebhookEvent:
    """Validated strictly by the SDK's own pydantic model (not its lenient ``construct``)."""
    return BetaWebhookEvent.model_validate(json.loads(found.model_dump_json()))


# ----------------------------------------------------------------------------- the mapping
def test_each_lifecycle_type_maps_to_its_claude_type() -> None:
    out = [claude.to_claude(e, workspace_id="alice") for e in [*turn(), failed("model_error")]]
    assert [c.data.type if c else None for c in out] == [
        "session.created",
        "session.status_run_started",
        "session.requires_action",
        "session.status_idled",
        "session.status_idled",  # a failed turn: the session is idle again
    ]
    for found in out:
        assert found is not None
        parsed = sdk_event(found)
        assert parsed.type == "event"
        assert parsed.data.id == SESSION.id
        assert parsed.data.organization_id == claude.ORGANIZATION_ID == "skyloop"
        assert parsed.data.workspace_id == "alice"
        assert (
            type(parsed.data).__name__
            == {
                "session.created": "BetaWebhookSessionCreatedEventData",
                "session.status_run_started": "BetaWebhookSessionStatusRunStartedEventData",
                "session.requires_action": "BetaWebhookSessionRequiresActionEventData",
                "session.status_idled": "BetaWebhookSessionStatusIdledEventData",
            }[found.data.type]
        )


def test_the_payload_is_claudes_thin_envelope_and_nothing_more() -> None:
    found = claude.to_claude(turn()[1], workspace_id="alice")
    assert found is not None
    body = json.loads(found.model_dump_json())
    assert set(body) == {"type", "id", "created_at", "data"}
    assert set(body["data"]) == {"type", "id", "organization_id", "workspace_id"}
    # RFC 3339 in UTC, to the millisecond the change was recorded at
    assert body["created_at"] == "2027-01-15T08:00:00.123Z"
    assert sdk_event(found).created_at == datetime.fromisoformat("2027-01-15T08:00:00.123+00:00")


def test_a_turn_stopped_by_the_budget_is_budget_reached() -> None:
    found = claude.to_claude(failed(claude.BUDGET_CODE), workspace_id="alice")
    assert found is not None
    assert found.data.type == "session.budget_reached"
    assert type(sdk_event(found).data).__name__ == "BetaWebhookSessionBudgetReachedEventData"


def test_an_idle_is_budget_reached_only_for_the_turn_that_spent_the_budget() -> None:
    idle = turn()[3]
    assert idle.type == "agent.session.idle"
    assert claude.data_type(idle, budget_turn="resp_1") == "session.budget_reached"
    assert claude.data_type(idle, budget_turn="resp_later") == "session.status_idled"
    assert claude.data_type(idle) == "session.status_idled"
    assert claude.data_type(turn()[1], budget_turn="resp_1") == "session.status_run_started"


def test_the_budget_turn_is_read_from_the_session() -> None:
    base = Session(
        id="s", agent_id="a", agent_name="n", created_at=1, updated_at=1, last_response_id="resp_9"
    )
    assert claude.budget_turn(base) is None  # no limit
    assert (
        claude.budget_turn(base.model_copy(update={"spend_limit_cents": 5, "spend_micros": 49_999})) is None
    )
    reached = base.model_copy(update={"spend_limit_cents": 5, "spend_micros": 50_000})
    assert claude.budget_turn(reached) == "resp_9"


def test_ids_are_deterministic_distinct_and_sort_by_time() -> None:
    first, again = turn(), turn()
    ids = [claude.to_claude(e, workspace_id="alice").id for e in first]  # type: ignore[union-attr]
    assert ids == [claude.to_claude(e, workspace_id="alice").id for e in again]  # type: ignore[union-attr]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {e.id for e in first}  # not skyloop's ids: derived from them
    assert all(i.startswith("evt_") and len(i) == len(first[0].id) for i in ids)
    later = derive(SESSION, [status(1, "running")], at=AT + 5)[0]
    assert claude.event_id(first[1].id) < claude.event_id(later.id)
    # the budget decides the type, never the id (a delivery dedupes whatever it is called)
    idle = first[3]
    assert (
        claude.to_claude(idle, workspace_id="a", budget_turn="resp_1").id  # type: ignore[union-attr]
        == claude.to_claude(idle, workspace_id="a").id  # type: ignore[union-attr]
    )
    assert claude.event_id("not-a-skyloop-id").startswith("evt_")


# ---------------------------------------------------------------------------- the SDK's unwrap
def test_the_sdk_unwraps_a_signed_delivery_and_refuses_a_tampered_one() -> None:
    secret = new_secret()
    payload = formats.render(turn()[2], "anthropic", owner="alice")
    assert payload is not None
    headers = signed_headers(payload.id, payload.body, [secret], time.time())
    client = anthropic.Anthropic(api_key="x")
    got = client.beta.webhooks.unwrap(payload.body, headers=headers, key=secret)
    assert isinstance(got, BetaWebhookEvent)
    assert got.id == payload.id == headers["webhook-id"]
    assert got.data.type == "session.requires_action"
    with pytest.raises(WebhookVerificationError):
        client.beta.webhooks.unwrap(payload.body.replace("alice", "mallory"), headers=headers, key=secret)
    with pytest.raises(WebhookVerificationError):
        client.beta.webhooks.unwrap(payload.body, headers=headers, key=new_secret())


# ------------------------------------------------------------------------- formats and requests
def test_the_skyloop_format_is_todays_payload() -> None:
    event = turn()[2]
    payload = formats.render(event, "skyloop", owner="alice")
    assert payload == formats.Payload(event.id, event.type, event.model_dump_json())


def test_each_format_filters_its_own_types() -> None:
    made = CreateWebhookRequest(
        url="https://x.example/h", format="anthropic", events=["session.status_idled"]
    )
    assert made.events == ["session.status_idled"]
    assert CreateWebhookRequest(url="https://x.example/h").format == "skyloop"
    with pytest.raises(ValidationError, match=r"agent\.session\.idle.*anthropic"):
        CreateWebhookRequest(url="https://x.example/h", format="anthropic", events=["agent.session.idle"])
    with pytest.raises(ValidationError, match=r"session\.status_idled"):
        CreateWebhookRequest(url="https://x.example/h", events=["session.status_idled"])
    with pytest.raises(ValidationError, match="format"):
        CreateWebhookRequest(url="https://x.example/h", format="claude")  # type: ignore[arg-type]
    # an update without a format leaves the check to the service (it knows the endpoint's)
    assert UpdateWebhookRequest(events=["session.created"]).events == ["session.created"]
    with pytest.raises(ValidationError, match=r"session\.nope"):
        UpdateWebhookRequest(format="anthropic", events=["session.nope"])


def test_an_endpoint_stored_before_formats_reads_as_skyloop_and_shows_its_format() -> None:
    row = {"id": "e", "owner": "o", "url": "https://x", "secret": "whsec_x", "created_at": 1, "updated_at": 1}
    assert Endpoint.model_validate(row).format == "skyloop"
    assert Endpoint.model_validate({**row, "format": "anthropic"}).to_api()["format"] == "anthropic"


# ------------------------------------------------------------------------------- the publisher
class Records:
    """The publisher's side of the table: delivery rows, keyed by (endpoint, event id)."""

    def __init__(self, endpoints: list[Endpoint]) -> None:
        self.endpoints = endpoints
        self.rows: dict[tuple[str, str], Delivery] = {}

    def routes(self, owner: str) -> list[Endpoint]:
        return self.endpoints

    def create_delivery(self, delivery: Delivery, *, ttl_s: int) -> bool:
        return self.rows.setdefault((delivery.endpoint_id, delivery.id), delivery) is delivery

    def get_delivery(self, endpoint_id: str, event_id: str) -> Delivery | None:
        return self.rows.get((endpoint_id, event_id))

    def mark_queued(self, delivery: Delivery) -> None:
        self.rows[(delivery.endpoint_id, delivery.id)] = delivery.model_copy(update={"queued": True})


class Queue:
    def __init__(self) -> None:
        self.sent: list[Delivery] = []

    def enqueue(self, delivery: Delivery, *, redelivery: int = 0) -> None:
        self.sent.append(delivery)


def hook(id_: str, fmt: str, events: list[str] | None = None) -> Endpoint:
    return Endpoint.model_validate(
        {
            "id": id_,
            "owner": "alice",
            "url": "https://x",
            "secret": "whsec_x",
            "created_at": 1,
            "updated_at": 1,
        }
        | {"format": fmt, "events": events or []}
    )


def test_the_publisher_writes_each_endpoint_its_format_once() -> None:
    # GIVEN a skyloop endpoint, an anthropic one, and an anthropic one for budget_reached only
    records = Records(
        [
            hook("sky", "skyloop"),
            hook("cl", "anthropic"),
            hook("budget", "anthropic", ["session.budget_reached"]),
        ]
    )
    queue = Queue()
    events = turn()
    # WHEN a turn whose idle spent the budget is published, twice (a stream batch retried)
    for _ in range(2):
        publish(events, SESSION.id, "alice", records, queue, Settings(), budget_turn="resp_1")  # type: ignore[arg-type]
    # THEN each endpoint got each event once, in its format: the body is what is signed and posted
    assert len(queue.sent) == 4 + 4 + 1
    sky = [d for d in queue.sent if d.endpoint_id == "sky"]
    assert [(d.id, d.body) for d in sky] == [(e.id, e.model_dump_json()) for e in events]
    cl = [d for d in queue.sent if d.endpoint_id == "cl"]
    assert [d.event_type for d in cl] == [
        "session.created",
        "session.status_run_started",
        "session.requires_action",
        "session.budget_reached",
    ]
    for delivery in cl:
        parsed = BetaWebhookEvent.model_validate(json.loads(delivery.body))
        assert parsed.id == delivery.id == claude.event_id(events[cl.index(delivery)].id)
        assert parsed.data.workspace_id == "alice"
    assert [d.event_type for d in queue.sent if d.endpoint_id == "budget"] == ["session.budget_reached"]
