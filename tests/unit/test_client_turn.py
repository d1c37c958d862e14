"""Session.send / Session.run against an in-memory session server: tools, hooks, resume, interrupt."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from skyloop.client import (
    AsyncClient,
    Client,
    FunctionCallOutputItem,
    InvalidInputError,
    MessageItem,
    OutputItemDone,
    ReconnectPolicy,
    ResponseCancelled,
    RunnerUnavailableError,
    SessionHeartbeat,
    ToolCall,
    tool,
)

SID = "a" * 32
RESP = "resp_1"


class FakeSessionServer:
    """A tiny model of one session: an event log, a scripted turn and the REST routes a turn uses.

    ``script`` steps are ``{"calls": [(call_id, name, arguments)]}`` (park until all are answered)
    or ``{"text": "..."}`` (answer and finish). ``drop_after`` cuts the stream once right after
    sending that seq.
    """

    def __init__(self, script: list[dict[str, Any]], *, drop_after: set[int] | None = None) -> None:
        self.script = list(script)
        self.log: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.requests: list[tuple[str, str]] = []
        self.messages: list[dict[str, Any]] = []
        self.outputs: dict[str, str] = {}
        self.output_posts = 0
        self.waiting: dict[str, tuple[str, str]] = {}
        self.answered: dict[str, tuple[str, str]] = {}
        self.drop_after = set(drop_after or ())
        self.cursors: list[str | None] = []
        self.running = False
        self.post_status: int | None = None
        self.output_failures: list[int] = []  # statuses to answer output posts with, first

    # -- the turn ----------------------------------------------------------
    def _append(self, event_type: str, **fields: Any) -> None:
        with self.cond:
            self.log.append({"type": event_type, **fields, "sequence_number": len(self.log) + 1})
            self.cond.notify_all()

    def _advance(self) -> None:
        if not self.script:
            return
        step = self.script.pop(0)
        if "calls" in step:
            for call_id, name, arguments in step["calls"]:
                self.waiting[call_id] = (name, json.dumps(arguments))
                self._append("response.output_item.done", item=self._call_item(call_id, "action_required"))
            return
        text = step["text"]
        self._append("response.output_text.delta", delta=text, response_id=RESP)
        self._append(
            "response.output_item.done",
            item={
                "id": "msg1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text}],
                "response_id": RESP,
            },
        )
        self._finish("response.completed", "completed")

    def _finish(self, event_type: str, status: str) -> None:
        self._append(event_type, response={"id": RESP, "object": "response", "status": status})
        self._append("session.status", status="idle", response_id=RESP, conversation_id=SID)
        self.running = False

    def _call_item(self, call_id: str, status: str) -> dict[str, Any]:
        name, arguments = self.waiting.get(call_id) or self.answered[call_id]
        return {
            "id": f"item_{call_id}",
            "type": "function_call",
            "status": status,
            "name": name,
            "arguments": arguments,
            "call_id": call_id,
            "response_id": RESP,
        }

    def _on_event(self, body: dict[str, Any]) -> httpx.Response:  # noqa: C901  (a fake server's dispatch)
        kind = body["type"]
        if kind == "message":
            if self.post_status is not None:
                return httpx.Response(
                    self.post_status, json={"error": {"code": "runner_unavailable", "message": "no runner"}}
                )
            self.messages.append(body)
            self.running = True
            self._append("session.status", status="running", response_id=RESP, conversation_id=SID)
            self._append(
                "session.input.consumed", data={"item_id": "m1", "type": "message", "data": body["data"]}
            )
            self._append(
                "response.in_progress", response={"id": RESP, "object": "response", "status": "in_progress"}
            )
            self._advance()
            return httpx.Response(202, json={"queued": True, "item_id": "m1"})
        if kind == "function_call_output":
            self.output_posts += 1
            if self.output_failures:
                status = self.output_failures.pop(0)
                return httpx.Response(status, json={"error": {"code": "x", "message": f"status {status}"}})
            call_id, output = body["data"]["call_id"], body["data"]["output"]
            if call_id in self.outputs:
                return httpx.Response(202, json={"queued": True, "item_id": call_id})
            if call_id not in self.waiting:
                return httpx.Response(404, json={"error": {"code": "not_found", "message": "no call"}})
            self.outputs[call_id] = output
            if all(c in self.outputs for c in self.waiting):
                for c in list(self.waiting):
                    self._append("response.output_item.done", item=self._call_item(c, "completed"))
                    self._append(
                        "response.output_item.done",
                        item={
                            "id": f"out_{c}",
                            "type": "function_call_output",
                            "call_id": c,
                            "output": self.outputs[c],
                            "status": "completed",
                            "response_id": RESP,
                        },
                    )
                    self.answered[c] = self.waiting.pop(c)
                self._advance()
            return httpx.Response(202, json={"queued": True, "item_id": call_id})
        if kind == "interrupt":
            if self.running:
                self._append("session.interrupted", data={"response_id": RESP})
                self.waiting.clear()
                self._finish("response.cancelled", "cancelled")
            return httpx.Response(202, json={"queued": False})
        return httpx.Response(400, json={"error": {"code": "invalid_input", "message": kind}})

    # -- HTTP ----------------------------------------------------------------
    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append((request.method, path))
        if path.endswith("/stream"):
            cursor = request.headers.get("last-event-id")
            self.cursors.append(cursor)
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=_Frames(self, int(cursor or 0))
            )
        if path.endswith("/events"):
            return self._on_event(json.loads(request.content))
        with self.cond:
            return httpx.Response(200, json={"id": SID, "last_event_id": len(self.log), "status": "idle"})

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self(request)


def _frame(payload: dict[str, Any], seq: int | None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


class _Frames(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, server: FakeSessionServer, cursor: int) -> None:
        self.server = server
        self.cursor = cursor

    def _ready(self) -> list[bytes] | None:
        """Frames after the cursor; raises to simulate a drop scheduled after a seq."""
        log = self.server.log
        if len(log) <= self.cursor:
            return None
        out = []
        while self.cursor < len(log):
            self.cursor += 1
            out.append(_frame(log[self.cursor - 1], self.cursor))
            if self.cursor in self.server.drop_after:
                self.server.drop_after.discard(self.cursor)
                out.append(b"DROP")
                break
        return out

    def __iter__(self) -> Iterator[bytes]:
        heartbeat = _frame({"type": "session.heartbeat", "sequence_number": None}, None)
        yield heartbeat
        deadline = time.monotonic() + 5
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            with self.server.cond:
                ready = self._ready()
                if ready is None:
                    self.server.cond.wait(0.02)
            if ready is None:
                if time.monotonic() - idle_since > 0.1:
                    idle_since = time.monotonic()
                    yield heartbeat  # like the server's idle heartbeats, only much faster
                continue
            for chunk in ready:
                if chunk == b"DROP":
                    raise httpx.RemoteProtocolError("connection cut")
                yield chunk
        raise AssertionError("the fake stream idled for 5 s: the turn is stuck")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield _frame({"type": "session.heartbeat", "sequence_number": None}, None)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.server.cond:
                ready = self._ready()
            if ready is None:
                await asyncio.sleep(0.005)
                continue
            for chunk in ready:
                if chunk == b"DROP":
                    raise httpx.RemoteProtocolError("connection cut")
                yield chunk
        raise AssertionError("the fake stream idled for 5 s: the turn is stuck")


def _client(server: FakeSessionServer) -> Client:
    return Client(
        "http://sky.test",
        transport=httpx.MockTransport(server),
        reconnect=ReconnectPolicy(sleep=lambda _s: None),
    )


def _assert_no_repeats(events: list[Any]) -> None:
    seqs = [e.event_id for e in events if e.event_id is not None]
    assert seqs == sorted(set(seqs)), seqs


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "absent.toml"))


def test_turn_runs_tool_set_and_callable_tools_and_completes(tmp_path: Any) -> None:
    # Given a script: the model calls Glob (coding set) and a Python tool in parallel, then answers
    (tmp_path / "a.py").write_text("x = 1\n")
    server = FakeSessionServer(
        [
            {
                "calls": [
                    ("c_glob", "Glob", {"pattern": "*.py", "path": str(tmp_path)}),
                    ("c_add", "add", {"a": 2, "b": "3"}),
                ]
            },
            {"text": "found a.py; 2+3=5"},
        ]
    )

    def add(a: int, b: int = 0) -> int:
        """Add two integers.

        Args:
            a: the first
            b: the second
        """
        return a + b

    # When the session runs a turn with both kinds of tools
    with _client(server) as client:
        turn = client.session(SID, tools=["coding", add]).send("look around")
        events = list(turn)
        result = turn.result

    # Then it subscribed (snapshot cursor, stream) before posting, ran both tools locally, and completed
    assert server.requests[:3] == [
        ("GET", f"/v1/sessions/{SID}"),
        ("GET", f"/v1/sessions/{SID}/stream"),
        ("POST", f"/v1/sessions/{SID}/events"),
    ]
    assert isinstance(events[0], SessionHeartbeat)
    tools = server.messages[0]["tools"]
    assert {t["function"]["name"] for t in tools} >= {"Glob", "Read", "Bash", "add"}
    add_schema = next(t for t in tools if t["function"]["name"] == "add")["function"]
    assert add_schema["description"] == "Add two integers."
    assert add_schema["parameters"]["properties"]["a"] == {"type": "integer", "description": "the first"}
    assert str(tmp_path / "a.py") in server.outputs["c_glob"]
    assert server.outputs["c_add"] == "5"
    assert result is not None
    assert result.status == "completed"
    assert result.ok
    assert result.text == "found a.py; 2+3=5"
    assert result.response_id == RESP
    assert result.item_id == "m1"
    assert [type(i).__name__ for i in result.items][-1] == "MessageItem"
    assert {i.call_id for i in result.items if isinstance(i, FunctionCallOutputItem)} == {"c_glob", "c_add"}
    _assert_no_repeats(events)


def test_failing_unknown_and_badly_called_tools_get_error_outputs() -> None:
    server = FakeSessionServer(
        [
            {
                "calls": [
                    ("c_boom", "boom", {}),
                    ("c_ghost", "ghost", {}),
                    ("c_bad", "add", {"a": "not a number"}),
                ]
            },
            {"text": "ok"},
        ]
    )

    def boom() -> str:
        raise ValueError("kaput")

    @tool
    def add(a: int) -> int:
        return a

    with _client(server) as client:
        result = client.session(SID).run("go", tools=[boom, add])

    assert result.status == "completed"
    assert server.outputs["c_boom"] == "Error: boom failed: ValueError: kaput"
    assert server.outputs["c_ghost"].startswith("Error: unknown tool 'ghost'")
    assert server.outputs["c_bad"].startswith("Error: invalid arguments for add: a:")


def test_confirm_declines_and_hooks_run() -> None:
    server = FakeSessionServer(
        [
            {"calls": [("c1", "Bash", {"command": "echo hi"}), ("c2", "get_current_time", {})]},
            {"text": "done"},
        ]
    )
    asked: list[tuple[str, dict[str, Any], str]] = []
    started: list[str] = []
    ended: list[tuple[str, str]] = []
    main = threading.current_thread().name

    def confirm(name: str, arguments: dict[str, Any]) -> bool:
        asked.append((name, arguments, threading.current_thread().name))
        return name != "Bash"

    def on_start(call: ToolCall) -> None:
        started.append(call.name)

    def on_end(call: ToolCall, output: str) -> None:
        ended.append((call.call_id, output))

    with _client(server) as client:
        session = client.session(
            SID, tools="coding", confirm=confirm, on_tool_start=on_start, on_tool_end=on_end
        )
        result = session.run("go")

    assert result.status == "completed"
    assert [(n, a) for n, a, _ in asked] == [("Bash", {"command": "echo hi"}), ("get_current_time", {})]
    assert {t for _, _, t in asked} == {main}  # prompts happen on the iterating thread
    assert server.outputs["c1"] == "Error: the user declined to run Bash"
    assert started == ["get_current_time"]
    assert [c for c, _ in ended] == ["c2"]
    assert ended[0][1] == server.outputs["c2"]


def test_drop_in_the_middle_of_a_turn_resumes_without_gaps_or_repeats() -> None:
    # Given the stream is cut right after the parked call (seq 4) and again after the output echo
    server = FakeSessionServer(
        [{"calls": [("c1", "get_current_time", {})]}, {"text": "it is late"}], drop_after={4, 6}
    )
    with _client(server) as client:
        turn = client.session(SID, tools="coding").send("time?")
        events = list(turn)
    assert turn.result is not None
    assert turn.result.status == "completed"
    assert turn.reconnects == 2
    assert server.cursors == ["0", "4", "6"]
    stored = [e.event_id for e in events if e.event_id is not None]
    # every stored event once, up to the terminal one (the trailing session.status idle is not awaited)
    assert server.log[-1]["type"] == "session.status"
    assert stored == list(range(1, len(server.log)))
    assert server.output_posts == 1


def test_interrupt_from_the_consumer_ends_the_turn_cancelled() -> None:
    server = FakeSessionServer([{"calls": [("c1", "slow", {})]}, {"text": "never"}])
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        return "late"

    with _client(server) as client:
        turn = client.session(SID).send("go", tools=slow)
        events: list[Any] = []
        interrupted = False
        for event in turn:
            events.append(event)
            if isinstance(event, OutputItemDone) and event.item.type == "function_call" and not interrupted:
                interrupted = True
                threading.Timer(0.05, turn.interrupt).start()  # like a Ctrl-C handler would
        release.set()
        for worker in turn._workers:
            worker.join(5)  # the late output is posted, refused (404) and ignored
    assert turn.result is not None
    assert turn.result.status == "cancelled"
    assert isinstance(events[-1], ResponseCancelled)
    assert "c1" not in server.outputs
    assert turn._post_errors == []


def test_ctrl_c_in_confirm_then_interrupt_resumes_the_same_turn() -> None:
    server = FakeSessionServer([{"calls": [("c1", "Bash", {"command": "rm -rf /"})]}, {"text": "never"}])
    calls = 0

    def confirm(name: str, arguments: dict[str, Any]) -> bool:
        nonlocal calls
        calls += 1
        raise KeyboardInterrupt

    with _client(server) as client:
        turn = client.session(SID, tools="coding", confirm=confirm).send("clean up")
        events: list[Any] = []

        def read_until_interrupted() -> None:
            for event in turn:
                events.append(event)

        with pytest.raises(KeyboardInterrupt):
            read_until_interrupted()
        # When the REPL interrupts and keeps iterating the same turn
        turn.interrupt()
        events.extend(turn)
    assert calls == 1
    assert turn.result is not None
    assert turn.result.status == "cancelled"
    assert server.outputs == {}
    _assert_no_repeats(events)


def test_tool_output_posts_retry_transient_failures() -> None:
    server = FakeSessionServer([{"calls": [("c1", "get_current_time", {})]}, {"text": "ok"}])
    server.output_failures = [503, 500]
    with _client(server) as client:
        result = client.session(SID, tools="coding").run("time?")
    assert result.status == "completed"
    assert server.output_posts == 3


def test_a_refused_tool_output_surfaces_from_the_turn() -> None:
    server = FakeSessionServer([{"calls": [("c1", "get_current_time", {})]}, {"text": "ok"}])
    server.output_failures = [400]
    with _client(server) as client:
        turn = client.session(SID, tools="coding").send("time?")

        def drain() -> None:
            for _ in turn:
                for worker in turn._workers:
                    worker.join(5)

        with pytest.raises(InvalidInputError, match="status 400"):
            drain()
        turn.close()


def test_a_rejected_message_raises_and_closes_the_stream() -> None:
    server = FakeSessionServer([{"text": "x"}])
    server.post_status = 503
    with _client(server) as client:
        turn = client.session(SID).send("hi")
        with pytest.raises(RunnerUnavailableError):
            next(turn)
        assert list(turn) == []


def test_async_turn_with_async_and_sync_tools_and_async_confirm() -> None:
    server = FakeSessionServer(
        [
            {"calls": [("c1", "fetch", {"url": "u"}), ("c2", "shout", {"text": "hi"}), ("c3", "Write", {})]},
            {"text": "done"},
        ],
        drop_after={5},
    )
    started: list[str] = []

    async def fetch(url: str) -> dict[str, str]:
        """Fetch a URL."""
        await asyncio.sleep(0)
        return {"url": url, "body": "ok"}

    def shout(text: str) -> str:
        return text.upper()

    async def confirm(name: str, arguments: dict[str, Any]) -> bool:
        return name != "Write"

    async def on_start(call: ToolCall) -> None:
        started.append(call.name)

    async def main() -> Any:
        client = AsyncClient(
            "http://sky.test",
            transport=httpx.MockTransport(server.handle_async),
            reconnect=ReconnectPolicy(sleep=lambda _s: asyncio.sleep(0)),
        )
        async with client:
            session = client.session(
                SID, tools=[fetch, shout, "coding"], confirm=confirm, on_tool_start=on_start
            )
            turn = session.send("go")
            events = [e async for e in turn]
            return turn, events

    turn, events = asyncio.run(main())
    assert turn.result.status == "completed"
    assert turn.reconnects == 1
    assert json.loads(server.outputs["c1"]) == {"url": "u", "body": "ok"}
    assert server.outputs["c2"] == "HI"
    assert server.outputs["c3"] == "Error: the user declined to run Write"
    assert sorted(started) == ["fetch", "shout"]
    assert isinstance(events[-1].type, str)
    assert any(isinstance(e, OutputItemDone) and isinstance(e.item, MessageItem) for e in events)
    _assert_no_repeats(events)


def test_async_run_returns_the_result() -> None:
    server = FakeSessionServer([{"text": "hello"}])

    async def main() -> Any:
        async with AsyncClient(
            "http://sky.test", transport=httpx.MockTransport(server.handle_async)
        ) as client:
            return await client.session(SID).run("hi")

    result = asyncio.run(main())
    assert (result.status, result.text) == ("completed", "hello")


class _LosesFirstMessagePost(FakeSessionServer):
    """Stores the first message but drops the connection before its answer, as a flaky network would."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(script)
        self.message_keys: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events") and json.loads(request.content)["type"] == "message":
            self.message_keys.append(request.headers.get("idempotency-key"))
            if len(self.message_keys) == 1:
                raise httpx.ReadError("connection dropped before the answer", request=request)
            return httpx.Response(202, json={"queued": True, "item_id": "m1"})  # the server's first answer
        return super().__call__(request)


def test_a_message_post_whose_answer_is_lost_is_resent_with_the_same_idempotency_key() -> None:
    # Given a network that loses the answer to the first message post
    server = _LosesFirstMessagePost([{"text": "hello"}])
    server.post_status = None
    with _client(server) as client:
        turn = client.session(SID).send("hi")
        # When the turn starts, the message is posted again
        first = next(turn)
    # Then both posts carried one and the same key, so the server can answer the first post again
    assert len(server.message_keys) == 2
    assert server.message_keys[0]
    assert server.message_keys[0] == server.message_keys[1]
    assert first is not None
    turn.close()


class _RefusesFirstMessagePosts(FakeSessionServer):
    """Answers the first message posts with error statuses, then accepts; records each post's key."""

    def __init__(self, script: list[dict[str, Any]], statuses: list[int]) -> None:
        super().__init__(script)
        self.statuses = list(statuses)
        self.message_keys: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events") and json.loads(request.content)["type"] == "message":
            self.message_keys.append(request.headers.get("idempotency-key"))
            if self.statuses:
                status = self.statuses.pop(0)
                return httpx.Response(status, json={"error": {"code": "x", "message": f"status {status}"}})
        return super().__call__(request)


def test_transient_message_failures_are_reposted_with_the_same_key_under_the_policy() -> None:
    # Given a server that answers the first two message posts 502 and 429
    server = _RefusesFirstMessagePosts([{"text": "hello"}], [502, 429])
    sleeps: list[float] = []
    client = Client(
        "http://sky.test",
        transport=httpx.MockTransport(server),
        reconnect=ReconnectPolicy(sleep=sleeps.append),
    )
    # When a turn runs
    with client:
        result = client.session(SID).run("hi")
    # Then the message went three times with one key, waiting the policy's backoff in between
    assert result.status == "completed"
    assert len(server.message_keys) == 3
    assert len(set(server.message_keys)) == 1
    assert server.message_keys[0]
    assert sleeps == [0.2, 0.4]


def test_a_message_refused_for_want_of_a_runner_is_not_reposted() -> None:
    server = FakeSessionServer([{"text": "x"}])
    server.post_status = 503
    posts: list[str] = []

    def recording(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            posts.append(request.method)
        return server(request)

    sleeps: list[float] = []
    client = Client(
        "http://sky.test",
        transport=httpx.MockTransport(recording),
        reconnect=ReconnectPolicy(sleep=sleeps.append),
    )
    with client, pytest.raises(RunnerUnavailableError):
        client.session(SID).run("hi")
    assert (posts, sleeps) == (["POST"], [])


def test_async_transient_message_failures_are_reposted_with_the_same_key() -> None:
    server = _RefusesFirstMessagePosts([{"text": "hello"}], [500])
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def handler(request: httpx.Request) -> httpx.Response:
        return server(request)

    async def main() -> Any:
        async with AsyncClient(
            "http://sky.test",
            transport=httpx.MockTransport(handler),
            reconnect=ReconnectPolicy(sleep=fake_sleep),
        ) as client:
            return await client.session(SID).run("hi")

    result = asyncio.run(main())
    assert result.status == "completed"
    assert len(server.message_keys) == 2
    assert server.message_keys[0] == server.message_keys[1]
    assert sleeps == [0.2]
