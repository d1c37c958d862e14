"""The ``skyloop chat`` loop: turns with tools and confirmation over a fake session server
(httpx.MockTransport, the real SDK), Ctrl-C handling with scripted turns, and the command's options."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from skyloop.chat._commands import chat_command
from skyloop.chat._render import Renderer
from skyloop.chat._repl import EXIT_ABORTED, ChatRepl
from skyloop.cli import _parser
from skyloop.client import APIConnectionError, Client, ReconnectPolicy, parse_event

SID = "5" * 32
AID = "a" * 32
RESP = "resp_1"


# ---------------------------------------------------------------- a fake session server
class FakeServer:
    """One session whose turns follow ``script``; also the agent and session routes ``chat`` uses.

    Steps: ``{"calls": [(call_id, name, arguments)]}`` parks until every call is answered;
    ``{"text": "..."}`` streams the text and completes; ``{"fail": (code, message)}`` fails;
    ``{"hang": True}`` never answers (until an interrupt).
    """

    def __init__(
        self, script: list[dict[str, Any]] | None = None, *, items: list[dict[str, Any]] | None = None
    ):
        self.script = list(script or [])
        self.log: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.events: list[dict[str, Any]] = []
        self.waiting: dict[str, tuple[str, str]] = {}
        self.outputs: dict[str, str] = {}
        self.items = items or []
        self.agents = [
            {"id": AID, "name": "coder", "created_at": 1, "model": "m", "harness": "openai-agents"}
        ]
        self.turns = 0
        self.status = "idle"

    # -- the turn
    def _append(self, kind: str, **fields: Any) -> None:
        with self.cond:
            self.log.append({"type": kind, **fields})
            self.cond.notify_all()

    def _advance(self) -> None:
        step = self.script.pop(0)
        if "calls" in step:
            for call_id, name, arguments in step["calls"]:
                self.waiting[call_id] = (name, json.dumps(arguments))
                self._append("response.output_item.done", item=self._call(call_id, "action_required"))
        elif "text" in step:
            words = step["text"].split(" ")
            for i, word in enumerate(words):
                self._append(
                    "response.output_text.delta",
                    delta=word + (" " if i < len(words) - 1 else ""),
                    message_id=f"msg_{self.turns}",
                    response_id=RESP,
                )
            self._append(
                "response.output_item.done",
                item={
                    "id": f"msg_{self.turns}",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": step["text"]}],
                    "response_id": RESP,
                },
            )
            self._finish("response.completed", "completed")
        elif "fail" in step:
            code, message = step["fail"]
            self._finish("response.failed", "failed", error={"code": code, "message": message})

    def _finish(self, kind: str, status: str, **extra: Any) -> None:
        self._append(kind, response={"id": RESP, "status": status, **extra})
        self._append("session.status", status="idle", response_id=RESP)

    def _call(self, call_id: str, status: str) -> dict[str, Any]:
        name, arguments = self.waiting[call_id]
        return {
            "type": "function_call",
            "status": status,
            "name": name,
            "arguments": arguments,
            "call_id": call_id,
            "response_id": RESP,
        }

    def _event(self, body: dict[str, Any]) -> httpx.Response:
        self.events.append(body)
        kind = body["type"]
        if kind == "message":
            self.turns += 1
            item_id = f"m{self.turns}"
            self._append("session.status", status="running", response_id=RESP)
            self._append("session.input.consumed", data={"item_id": item_id, "data": body["data"]})
            self._append("response.in_progress", response={"id": RESP, "status": "in_progress"})
            self._advance()
            return httpx.Response(202, json={"queued": True, "item_id": item_id})
        if kind == "function_call_output":
            call_id = body["data"]["call_id"]
            if call_id not in self.waiting:
                return httpx.Response(404, json={"error": {"code": "not_found", "message": "no such call"}})
            self.outputs[call_id] = body["data"]["output"]
            if all(c in self.outputs for c in self.waiting):
                for c in list(self.waiting):
                    self._append("response.output_item.done", item=self._call(c, "completed"))
                    self._append(
                        "response.output_item.done",
                        item={
                            "type": "function_call_output",
                            "call_id": c,
                            "output": self.outputs[c],
                            "response_id": RESP,
                        },
                    )
                self.waiting.clear()
                self._advance()
            return httpx.Response(202, json={"queued": True, "item_id": call_id})
        if kind == "interrupt":
            self.waiting.clear()
            self._append("session.interrupted", data={"response_id": RESP})
            self._finish("response.cancelled", "cancelled")
            return httpx.Response(202, json={"queued": False})
        return httpx.Response(400, json={"error": {"code": "invalid_input", "message": kind}})

    # -- HTTP
    def snapshot(self) -> dict[str, Any]:
        return {
            "id": SID,
            "agent_id": AID,
            "agent_name": "coder",
            "status": self.status,
            "last_event_id": len(self.log),
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path, dict(request.url.params)))
        if path.endswith("/stream"):
            after = int(request.headers.get("last-event-id") or 0)
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=_Frames(self, after)
            )
        if path.endswith("/events"):
            return self._event(json.loads(request.content))
        if path.endswith("/items"):
            data = list(reversed(self.items)) if request.url.params.get("order") == "desc" else self.items
            return httpx.Response(200, json={"object": "list", "data": data, "has_more": False})
        if (method, path) == ("GET", "/v1/agents"):
            name = request.url.params.get("name")
            data = [a for a in self.agents if name is None or a["name"] == name]
            return httpx.Response(200, json={"object": "list", "data": data, "has_more": False})
        if (method, path) == ("POST", "/v1/sessions"):
            if request.headers["content-type"].startswith("multipart/"):
                return httpx.Response(
                    201, json={"session_id": SID, "agent_id": AID, "agent_name": "from-file"}
                )
            assert json.loads(request.content) == {"agent_id": AID}
            return httpx.Response(201, json=self.snapshot())
        if (method, path) == ("GET", f"/v1/sessions/{SID}"):
            with self.cond:
                return httpx.Response(200, json=self.snapshot())
        return httpx.Response(
            404, json={"error": {"code": "not_found", "message": f"Session not found: {path}"}}
        )


def _frame(payload: dict[str, Any], seq: int | None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


class _Frames(httpx.SyncByteStream):
    def __init__(self, server: FakeServer, after: int) -> None:
        self.server = server
        self.cursor = after

    def __iter__(self) -> Iterator[bytes]:
        yield _frame({"type": "session.heartbeat"}, None)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.server.cond:
                if len(self.server.log) <= self.cursor:
                    self.server.cond.wait(0.05)
                    continue
                ready = self.server.log[self.cursor :]
                start = self.cursor
                self.cursor = len(self.server.log)
            for offset, payload in enumerate(ready):
                yield _frame(payload, start + offset + 1)
        raise AssertionError("the fake stream idled for 5 s: the turn is stuck")


def client_for(server: FakeServer) -> Client:
    return Client(
        "http://sky.test",
        transport=httpx.MockTransport(server),
        reconnect=ReconnectPolicy(sleep=lambda _s: None),
    )


class Keyboard:
    """Scripted answers for ``read_line``: strings, or exception classes to raise (EOFError, KeyboardInterrupt)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        answer = self.answers.pop(0)
        if isinstance(answer, type) and issubclass(answer, BaseException):
            raise answer
        return answer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("SKYLOOP_URL", raising=False)
    monkeypatch.delenv("SKYLOOP_TOKEN", raising=False)
    monkeypatch.setenv("SKYLOOP_CONFIG", str(tmp_path / "absent.toml"))


def chat(
    server: FakeServer, keyboard: Keyboard, *, yes: bool = False, tools: Any = "coding"
) -> tuple[int, str]:
    out = io.StringIO()
    with client_for(server) as client:
        repl = ChatRepl(client, SID, Renderer(out), tools=tools, yes=yes, read_line=keyboard)
        code = repl.run()
    return code, out.getvalue()


# --------------------------------------------------------------------- turns, tools
def test_confirmed_write_runs_here_and_the_answer_streams(tmp_path: Any) -> None:
    target = tmp_path / "hello.txt"
    server = FakeServer(
        [{"calls": [("c1", "Write", {"file_path": str(target), "content": "hi\n"})]}, {"text": "Wrote it."}]
    )
    keyboard = Keyboard("write hello.txt", "y", "/exit")

    code, out = chat(server, keyboard)

    assert code == 0
    assert keyboard.prompts == ["> ", "Run Write? [y/N] ", "> "]
    assert target.read_text() == "hi\n"
    assert server.outputs == {"c1": f"Successfully wrote {target}"}
    assert out == (
        f'● Write(file_path="{target}", content="hi\\n")\n  ⎿ Successfully wrote {target}\nWrote it.\n'
    )
    tools = server.events[0]["tools"]
    assert {t["function"]["name"] for t in tools} >= {"Read", "Write", "Edit", "Bash", "Glob"}


@pytest.mark.parametrize("answer", ["n", "", "nope", EOFError])
def test_anything_but_yes_declines_and_the_model_reads_the_error(tmp_path: Any, answer: Any) -> None:
    target = tmp_path / "no.txt"
    server = FakeServer(
        [{"calls": [("c1", "Write", {"file_path": str(target), "content": "x"})]}, {"text": "OK."}]
    )

    code, out = chat(server, Keyboard("write", answer, "/exit"))

    assert code == 0
    assert not target.exists()
    assert server.outputs == {"c1": "Error: the user declined to run Write"}
    assert "  ⎿ Error: the user declined to run Write\nOK.\n" in out


def test_yes_skips_the_question_and_read_only_tools_are_never_asked_about(tmp_path: Any) -> None:
    (tmp_path / "a.py").write_text("")
    server = FakeServer(
        [
            {"calls": [("c1", "Glob", {"pattern": "*.py", "path": str(tmp_path)})]},
            {"calls": [("c2", "Bash", {"command": "echo ran"})]},
            {"text": "Done."},
        ]
    )
    keyboard = Keyboard("go")

    code, out = chat(server, keyboard, yes=True)

    assert code == 0
    assert keyboard.prompts == ["> ", "> "]  # no confirmation; then EOF quits
    assert server.outputs["c1"].strip() == str(tmp_path / "a.py")
    assert server.outputs["c2"].strip() == "ran"
    assert '● Bash(command="echo ran")\n  ⎿ ran\nDone.\n' in out


def test_without_tools_nothing_is_declared() -> None:
    server = FakeServer([{"text": "Hi."}])
    code, out = chat(server, Keyboard("hello", "/quit"), tools=None)
    assert (code, out) == (0, "Hi.\n")
    assert "tools" not in server.events[0]


def test_a_failed_response_prints_its_code_and_message_and_the_prompt_returns() -> None:
    server = FakeServer([{"fail": ("model_error", "the model answered 500")}, {"text": "Better now."}])
    code, out = chat(server, Keyboard("first", "second", "/exit"))
    assert code == 0
    assert out == "✗ response failed: model_error: the model answered 500\nBetter now.\n"


def test_an_error_posting_the_message_is_shown_and_the_chat_goes_on() -> None:
    server = FakeServer([{"text": "Hi."}])
    original = server._event

    def unavailable_once(body: dict[str, Any]) -> httpx.Response:
        if body["type"] == "message" and server.turns == 0 and not getattr(server, "refused", False):
            server.refused = True  # type: ignore[attr-defined]
            return httpx.Response(
                503, json={"error": {"code": "runner_unavailable", "message": "runner offline"}}
            )
        return original(body)

    server._event = unavailable_once  # type: ignore[method-assign]
    code, out = chat(server, Keyboard("one", "two", "/exit"))
    assert code == 0
    assert out == "✗ runner_unavailable: runner offline\nHi.\n"


def test_blank_lines_are_ignored_and_help_is_local() -> None:
    server = FakeServer([])
    code, out = chat(server, Keyboard("", "   ", "/help"))
    assert code == 0
    assert "Ctrl-C" in out
    assert server.events == []


# ------------------------------------------------------------------------ Ctrl-C
class ScriptedTurn:
    """A turn whose iteration yields events or raises KeyboardInterrupt where scripted."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = list(steps)
        self.interrupts = 0
        self.closed = False

    def __iter__(self) -> ScriptedTurn:
        return self

    def __next__(self) -> Any:
        if not self.steps:
            raise StopIteration
        step = self.steps.pop(0)
        if step is KeyboardInterrupt:
            raise KeyboardInterrupt
        return step

    def interrupt(self) -> None:
        self.interrupts += 1

    def close(self) -> None:
        self.closed = True


class ScriptedClient:
    base_url = "http://sky.test"

    def __init__(self, *turns: ScriptedTurn | type[KeyboardInterrupt]) -> None:
        self.turns = list(turns)
        self.interrupted: list[str] = []

    def session(self, session_id: str, **kwargs: Any) -> Any:
        client = self

        class _Session:
            def send(self, text: str) -> ScriptedTurn:
                turn = client.turns.pop(0)
                if turn is KeyboardInterrupt:
                    raise KeyboardInterrupt  # Ctrl-C while the post waits for its answer
                return turn  # type: ignore[return-value]

        return _Session()

    def interrupt(self, session_id: str) -> None:
        self.interrupted.append(session_id)


DELTA = parse_event({"type": "response.output_text.delta", "delta": "Thinking", "message_id": "m"})
CANCELLED = parse_event({"type": "response.cancelled", "response": {"id": RESP, "status": "cancelled"}})
IDLE = parse_event({"type": "session.status", "status": "idle"})


def scripted_chat(*turns: ScriptedTurn, keys: Keyboard, pending: str = "") -> tuple[int, str]:
    out = io.StringIO()
    repl = ChatRepl(ScriptedClient(*turns), SID, Renderer(out), read_line=keys, pending_input=lambda: pending)  # type: ignore[arg-type]
    return repl.run(), out.getvalue()


def test_ctrl_c_during_a_turn_interrupts_it_and_the_prompt_returns() -> None:
    turn = ScriptedTurn([DELTA, KeyboardInterrupt, CANCELLED])
    keys = Keyboard("think hard", "/exit")

    code, out = scripted_chat(turn, keys=keys)

    assert code == 0
    assert turn.interrupts == 1
    assert turn.closed
    assert keys.prompts == ["> ", "> "]
    assert out == "Thinking\ninterrupting… (Ctrl-C again to quit)\ninterrupted\n"


def test_ctrl_c_while_the_message_is_posted_interrupts_the_sessions_turn_and_the_prompt_returns() -> None:
    client = ScriptedClient(KeyboardInterrupt)
    keys = Keyboard("think hard", "/exit")
    out = io.StringIO()
    repl = ChatRepl(client, SID, Renderer(out), read_line=keys, pending_input=lambda: "")  # type: ignore[arg-type]

    assert repl.run() == 0
    assert client.interrupted == [SID]  # the turn the post may have started is stopped
    assert keys.prompts == ["> ", "> "]
    assert "interrupted" in out.getvalue()


def test_an_interrupted_turn_also_ends_when_the_session_goes_idle_without_a_terminal_event() -> None:
    turn = ScriptedTurn([KeyboardInterrupt, IDLE, DELTA])  # nothing after idle is read
    code, out = scripted_chat(turn, keys=Keyboard("x", "/exit"))
    assert code == 0
    assert out == "\ninterrupting… (Ctrl-C again to quit)\ninterrupted\n"


def test_a_second_ctrl_c_in_the_same_turn_quits() -> None:
    turn = ScriptedTurn([DELTA, KeyboardInterrupt, KeyboardInterrupt, CANCELLED])
    keys = Keyboard("x", "never read")

    code, out = scripted_chat(turn, keys=keys)

    assert code == EXIT_ABORTED
    assert turn.interrupts == 1
    assert turn.closed
    assert keys.prompts == ["> "]
    assert out == "Thinking\ninterrupting… (Ctrl-C again to quit)\n\ninterrupted\n"


def test_a_failed_interrupt_is_reported_and_the_prompt_returns() -> None:
    turn = ScriptedTurn([KeyboardInterrupt, DELTA])

    def refuse() -> None:
        raise APIConnectionError("connection failed: reset")

    turn.interrupt = refuse  # type: ignore[method-assign]
    code, out = scripted_chat(turn, keys=Keyboard("x", "/exit"))
    assert code == 0
    assert out == (
        "\ninterrupting… (Ctrl-C again to quit)\n"
        "✗ connection_error: connection failed: reset (is the service running at http://sky.test?)\n"
    )


def test_ctrl_c_in_a_later_turn_starts_counting_again() -> None:
    first = ScriptedTurn([KeyboardInterrupt, CANCELLED])
    second = ScriptedTurn([KeyboardInterrupt, CANCELLED])
    code, _ = scripted_chat(first, second, keys=Keyboard("one", "two", "/exit"))
    assert code == 0
    assert (first.interrupts, second.interrupts) == (1, 1)


def test_ctrl_c_at_an_empty_prompt_quits_and_over_a_typed_line_only_drops_it() -> None:
    code, out = scripted_chat(keys=Keyboard(KeyboardInterrupt))
    assert (code, out) == (0, "\n")
    keys = Keyboard(KeyboardInterrupt, "/exit")
    code, _ = scripted_chat(keys=keys, pending="half a line")
    assert code == 0
    assert keys.prompts == ["> ", "> "]


def test_ctrl_c_at_the_confirmation_interrupts_the_turn(tmp_path: Any) -> None:
    target = tmp_path / "x.txt"
    server = FakeServer([{"calls": [("c1", "Write", {"file_path": str(target), "content": "x"})]}])

    code, out = chat(server, Keyboard("write", KeyboardInterrupt, "/exit"))

    assert code == 0
    assert not target.exists()
    assert [e["type"] for e in server.events] == ["message", "interrupt"]
    assert server.outputs == {}
    assert out.startswith("● Write(")
    assert out.endswith("\ninterrupting… (Ctrl-C again to quit)\ninterrupted\n")


# ------------------------------------------------------------------ the command
def run_chat(argv: list[str], server: FakeServer, keys: Keyboard) -> tuple[int, str, str]:
    args = _parser().parse_args(["chat", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = chat_command(args, stdout=out, stderr=err, read_line=keys, client=client_for(server))
    return code, out.getvalue(), err.getvalue()


def test_chat_finds_the_agent_by_name_and_opens_a_new_session() -> None:
    server = FakeServer([{"text": "Hello."}])
    code, out, err = run_chat([], server, Keyboard("hi", "/exit"))
    assert (code, err) == (0, "")
    assert ("GET", "/v1/agents", {"name": "coder"}) in server.requests
    assert ("POST", "/v1/sessions", {}) in server.requests
    lines = out.splitlines()
    assert lines[0] == f"skyloop chat · agent coder · session {SID}"
    assert lines[1].startswith("http://sky.test · client tools: Read, Write, Edit")
    assert lines[1].endswith("(asks before Write, Edit, Bash)")
    assert lines[-1] == "Hello."


def test_chat_with_an_unknown_agent_fails_with_one_line() -> None:
    server = FakeServer()
    code, out, err = run_chat(["--agent", "ghost"], server, Keyboard())
    assert (code, out) == (1, "")
    assert err == "skyloop: not_found: no agent named 'ghost' (see 'skyloop agents ls')\n"


def test_chat_resumes_a_session_and_shows_its_last_items_first() -> None:
    items = [
        {
            "id": "1",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "earlier"}],
        },
        {
            "id": "2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Answer."}],
        },
    ]
    server = FakeServer(items=items)
    code, out, _ = run_chat(["--session", SID, "--yes"], server, Keyboard())
    assert code == 0
    assert ("GET", f"/v1/sessions/{SID}/items", {"limit": "10", "order": "desc"}) in server.requests
    assert f"resumed session {SID}" in out
    assert "(runs them without asking)" in out
    assert out.endswith("── last 2 items ──\n> earlier\nAnswer.\n──\n\n")


def test_resuming_a_running_session_says_so_and_slash_interrupt_stops_it() -> None:
    server = FakeServer()
    server.status = "running"
    code, out, _ = run_chat(["--session", SID], server, Keyboard("/interrupt", "/exit"))
    assert code == 0
    assert "a turn is still running in this session" in out
    assert out.endswith("/interrupt stops it\ninterrupt sent\n")
    assert [e["type"] for e in server.events] == ["interrupt"]


def test_chat_with_an_unknown_session_fails_with_one_line() -> None:
    code, out, err = run_chat(["--session", "nope"], FakeServer(), Keyboard())
    assert (code, out) == (1, "")
    assert err.startswith("skyloop: not_found: Session not found")


def test_chat_registers_an_agent_file_first(tmp_path: Any) -> None:
    spec = tmp_path / "helper.yaml"
    spec.write_text("name: helper\n")
    server = FakeServer()
    code, out, _ = run_chat(["--agent-file", str(spec), "--tools", "none"], server, Keyboard())
    assert code == 0
    assert out.splitlines()[0] == f"skyloop chat · agent from-file · session {SID}"
    assert out.splitlines()[1] == "http://sky.test · no client tools"
    # the session is made, then its agent read (its server tools are not offered as client tools)
    assert [r[:2] for r in server.requests] == [
        ("POST", "/v1/sessions"),
        ("GET", f"/v1/sessions/{SID}/agent"),
    ]


def test_chat_rejects_an_unknown_tool_set() -> None:
    code, out, err = run_chat(["--tools", "kitchen-sink"], FakeServer(), Keyboard())
    assert (code, out) == (2, "")
    assert err == "skyloop chat: --tools: unknown tool set 'kitchen-sink' (available: coding)\n"


def test_piped_input_is_echoed_after_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    from skyloop.chat._commands import line_reader

    stdin, stdout = io.StringIO("hello\n"), io.StringIO()
    read, pending = line_reader(stdin, stdout)
    assert pending is None
    assert read("> ") == "hello"
    with pytest.raises(EOFError):
        read("> ")
    assert stdout.getvalue() == "> hello\n> "
