"""``skyloop smoke``: prove a running endpoint end to end, on ``skyloop dev`` or a deployed stack.

It registers a temporary agent on the ``scripted`` harness (the script rides
in the spec, so no model, key or reachable mock is needed anywhere) whose
server tool ``smoke_echo`` needs an approval, then checks, each as one step
with its latency:

==================  ========================================================================
step                what it proves
==================  ========================================================================
``health``          ``GET /health`` answers ``{"status": "ok"}``
``auth``            with a token: a request without it is 401 ``unauthorized``, with it 200;
                    the default runner is online
``register``        ``POST /v1/agents`` takes the smoke agent (name ``smoke-<random>``)
``seed``            the seed scenario: client tools Glob, Read, Write run here on a temp
                    directory, the turn parks on each call, the outputs resume it, the final
                    text arrives, and ``/items`` holds the calls and outputs in order
``resume``          a stream dropped mid-turn and resumed with ``Last-Event-ID`` saw every
                    event exactly once, the same ids and payloads as a full replay
                    (``Last-Event-ID: 0``), no gap
``approve``         the approved ``smoke_echo`` call ran and its output reached the model
``decline``         the declined call did not run and the model read the denial
``interrupt``       a turn interrupted while the model "writes" (a scripted delay) ends with
                    ``session.interrupted``, ``response.cancelled``, ``idle`` and one marker
``openai``          OpenAI's Agents API through the official ``openai`` SDK at
                    ``<endpoint>/openai/v1``: ``sessions.create(stream=True)`` with input streams
                    the first turn to ``agent.session.idle``, then ``sessions.events.create``
                    posts a message and ``sessions.events.stream`` carries that turn to idle;
                    each turn's assistant text is the scripted one
``webhook``         lifecycle events reach webhooks: an endpoint registered with
                    ``POST /v1/webhooks`` (pointed at the endpoint's own ``/health``, which
                    the deployment can reach) gets a delivery for a new session's event with
                    a recorded attempt (any HTTP status: the publisher queued it and the
                    delivery function ran); the webhook endpoint is deleted in cleanup
``bad:<case>``      bad inputs get the documented 4xx and ``{"error": {"code", "message"}}``,
                    and write nothing
``cleanup``         the webhook endpoint, the sessions and the agent are deleted (also after a
                    failure; ``keep`` leaves them)
==================  ========================================================================

:func:`run` returns a :class:`Report`; the CLI (``skyloop.cli``) prints it and
exits 0 (all passed), 1 (a step failed) or 2 (:class:`Unreachable`, or bad usage).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from skyloop.client import (
    Client,
    FunctionCallItem,
    OutputItemDone,
    ResponseCancelled,
    ResponseInProgress,
    SessionInterrupted,
    SessionStatus,
    SSEDecoder,
    Tool,
    ToolBox,
    is_terminal,
)
from skyloop.client._config import resolve_config

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable

    from skyloop.client import ServerSentEvent

SCENARIOS = ("seed", "resume", "approve", "decline", "interrupt", "openai", "webhook", "bad-inputs")
"""The steps ``--only`` may pick; health, auth, register and cleanup always run."""
GATES = ("health", "auth", "register")  # when one fails, the steps after it cannot run
DEFAULT_TOOL_FUNCTION = "smoke_echo"  # skyloop dev's built-in tool; in the cloud the SmokeToolArn output
SEED_TOOLS = ("Glob", "Read", "Write")
RESUME_WORDS = 40
RESUME_WORD_DELAY_MS = 50  # two seconds of streaming: room to drop the stream mid-turn
DROP_AFTER_DELTAS = 3
INTERRUPT_DELAY_MS = 20_000  # the model "writes" this long unless interrupted
MAX_OUTPUT_CHARS = 200_000  # the documented tool-output limit (README: 413 above)
INTERRUPTED_MARKER = "[System: interrupted]"
DENIED_PREFIX = "[Denied"
OPENAI_PATH = "/openai/v1"  # where the endpoint serves OpenAI's Agents API (client.beta.agents)
OPENAI_TURN_ENDS = (
    "agent.session.turn.completed",
    "agent.session.turn.failed",
    "agent.session.turn.cancelled",
)
OPENAI_SESSION_ENDS = ("agent.session.idle", "agent.session.failed", "agent.session.budget_reached")
WEBHOOK_EVENTS = ("agent.session.created", "agent.session.in_progress", "agent.session.idle")
WEBHOOK_TARGET = "/health"  # the endpoint's own public URL: a deployment can reach it, unlike this machine
WEBHOOK_NUDGE_S = 5.0  # no delivery yet: run a short turn for more events (cloud routing lags ~1 s)
WEBHOOK_WAIT_SHARE = 0.8  # of the step timeout, polling for an attempt (then a clear failure, not a timeout)


class Unreachable(Exception):
    """The endpoint could not be reached at all: nothing was tested (exit 2)."""


class CheckFailed(Exception):
    """A step's expectation did not hold; the message is the step's detail."""


@dataclass
class Step:
    name: str
    ok: bool
    ms: float
    detail: str

    def line(self) -> str:
        return f"{'✓' if self.ok else '✗'} {self.name:<22} {self.ms:>7.0f} ms  {self.detail}"


@dataclass
class Report:
    endpoint: str
    steps: list[Step] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(s.ok for s in self.steps)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps)

    def summary(self) -> str:
        """``PASS n/n``, or ``FAIL k/n`` (k passed of n) naming the failed steps."""
        total = len(self.steps)
        if self.ok:
            return f"PASS {total}/{total}"
        failed = ", ".join(s.name for s in self.steps if not s.ok)
        return f"FAIL {self.passed}/{total} (failed: {failed})"

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "ok": self.ok,
            "passed": self.passed,
            "total": len(self.steps),
            "summary": self.summary(),
            "steps": [asdict(s) | {"ms": round(s.ms, 1)} for s in self.steps],
        }


@dataclass(frozen=True)
class Options:
    endpoint: str
    token: str | None = None  # None: $SKYLOOP_TOKEN, else the config file's (as the SDK resolves it)
    timeout: float = 60.0  # seconds per step
    tool_function: str = DEFAULT_TOOL_FUNCTION
    keep: bool = False
    only: frozenset[str] = frozenset()  # empty: every scenario


def run(options: Options, emit: Callable[[Step], None] | None = None) -> Report:
    """Run every step against ``options.endpoint``; ``emit`` sees each step as it finishes.

    Raises :class:`Unreachable` when ``/health`` cannot be reached at all.
    """
    unknown = options.only - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown step(s) {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    with _Smoke(options, emit or _ignore) as smoke:
        smoke.run()
        return smoke.report


def _ignore(_step: Step) -> None:
    return None


# ------------------------------------------------------------------------------- the run
class _Smoke:
    def __init__(self, options: Options, emit: Callable[[Step], None]) -> None:
        self.o = options
        self.emit = emit
        self.endpoint = options.endpoint.rstrip("/")
        self.report = Report(self.endpoint)
        self.nonce = uuid.uuid4().hex[:8]
        self.agent_name = f"smoke-{self.nonce}"
        self.agent_id: str | None = None
        self.sessions: list[str] = []
        self.probe_session: str | None = None
        self.webhook_id: str | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="skyloop-smoke-"))
        # the SDK's resolution (the option, else $SKYLOOP_TOKEN, else the config file's), used for every request
        self.token = resolve_config(self.endpoint, options.token or None).token
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.Client(base_url=self.endpoint, headers=auth, timeout=options.timeout)
        self.anonymous = httpx.Client(base_url=self.endpoint, timeout=options.timeout)
        self.client = Client(self.endpoint, token=self.token, timeout=options.timeout)

    def __enter__(self) -> _Smoke:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.http.close()
        self.anonymous.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -------------------------------------------------------------------- orchestration
    def run(self) -> None:
        """Every step in order; after a failed gate (health, auth, register) the rest are not run.

        Cleanup runs whenever the endpoint was reached, also after a failure or Ctrl-C.
        """
        steps = {"health": self.health, "auth": self.auth, "register": self.register, **self.scenarios()}
        blocked: str | None = None
        reached = False
        try:
            for name, check in steps.items():
                if blocked is not None:
                    self.skip(name, blocked)
                    continue
                ok = self.step(name, check)
                reached = True
                if not ok and name in GATES:
                    blocked = f"{name} failed"
        finally:
            if reached:
                self.step("cleanup", self.cleanup)

    def scenarios(self) -> dict[str, Callable[[], str]]:
        chosen: dict[str, Callable[[], str]] = {}
        for name in SCENARIOS:
            if self.o.only and name not in self.o.only:
                continue
            if name == "bad-inputs":
                chosen.update(self.bad_inputs())
            else:
                chosen[name] = getattr(self, name)
        return chosen

    def step(self, name: str, check: Callable[[], str]) -> bool:
        """Run one check within the step timeout; its latency is the whole check, wall clock."""
        started = time.perf_counter()
        try:
            detail, ok = _within(check, self.o.timeout), True
        except Unreachable:
            raise
        except CheckFailed as exc:
            detail, ok = str(exc), False
        except Exception as exc:
            detail, ok = f"{type(exc).__name__}: {exc}", False
        step = Step(name, ok, (time.perf_counter() - started) * 1000, detail)
        self.report.steps.append(step)
        self.emit(step)
        return ok

    def skip(self, name: str, why: str) -> None:
        step = Step(name, False, 0.0, f"not run: {why}")
        self.report.steps.append(step)
        self.emit(step)

    # ---------------------------------------------------------------------- the steps
    def health(self) -> str:
        try:
            resp = self.anonymous.get("/health")
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach {self.endpoint}: {exc or type(exc).__name__}") from exc
        _expect(resp.status_code == 200, f"GET /health answered {resp.status_code}: {_short(resp.text)}")
        body = _json(resp)
        _expect(body == {"status": "ok"}, f"GET /health answered {_short(resp.text)}")
        return 'GET /health {"status": "ok"}'

    def auth(self) -> str:
        bare = self.anonymous.get("/v1/runners")
        if self.token:
            _expect(
                bare.status_code != 200,
                "a token was given but the endpoint answers without one: it is open (a deployed stack never "
                "is); run without --token and $SKYLOOP_TOKEN",
            )
            _expect_error(bare, 401, "unauthorized", "GET /v1/runners without the token")
            runners = self.http.get("/v1/runners")
            _expect(runners.status_code == 200, f"GET /v1/runners with the token: {_status(runners)}")
            seen = "401 without the token, 200 with it"
        else:
            _expect(
                bare.status_code != 401,
                "the endpoint requires a token: pass --token or set SKYLOOP_TOKEN",
            )
            _expect(bare.status_code == 200, f"GET /v1/runners: {_status(bare)}")
            runners = bare
            seen = "no token given and none required"
        online = [r.get("runner_id") for r in _json(runners).get("data", []) if r.get("online")]
        _expect(bool(online), "no runner is online: turns cannot start")
        return f"{seen}; runner {online[0]} online"

    def register(self) -> str:
        spec = smoke_agent(self.agent_name, self.workdir, self.o.tool_function, self.nonce)
        resp = self.http.post("/v1/agents", json=spec)
        _expect(resp.status_code == 201, f"POST /v1/agents: {_status(resp)}")
        agent = _json(resp)
        self.agent_id = str(agent["id"])
        _expect(agent.get("harness") == "scripted", f"the agent's harness is {agent.get('harness')!r}")
        return f"agent {self.agent_name} ({self.agent_id}), scripted, tool → {self.o.tool_function}"

    def new_session(self) -> str:
        assert self.agent_id is not None
        session_id = self.client.create_session(self.agent_id, title=f"skyloop smoke {self.nonce}").id
        self.sessions.append(session_id)
        return session_id

    def seed(self) -> str:
        """The seed scenario: Glob, Read and Write run here; the turn parks on each call."""
        (self.workdir / "calculator.py").write_text(CALCULATOR)
        (self.workdir / "utils.py").write_text("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n")
        session_id = self.new_session()
        ran: dict[str, str] = {}
        parked: list[str] = []
        session = self.client.session(
            session_id,
            tools=seed_toolbox(),
            on_tool_end=lambda call, output: ran.__setitem__(call.call_id, output),
        )
        turn = session.send(f"#seed List the Python files in {self.workdir}, read one, write a file.")
        for event in turn:
            item = event.item if isinstance(event, OutputItemDone) else None
            if isinstance(item, FunctionCallItem) and item.action_required:
                parked.append(item.name)
        result = turn.result
        _expect(result is not None and result.ok, f"the turn ended {_outcome(result)}")
        assert result is not None
        _expect(parked == list(SEED_TOOLS), f"parked on {parked}, expected {list(SEED_TOOLS)}")
        canary = self.workdir / CANARY_FILE
        _expect(
            canary.is_file() and canary.read_text() == canary_text(self.nonce),
            "Write did not create the file here",
        )
        _expect(
            result.text.startswith("Seed done.") and str(canary) in result.text,
            f"final text {_short(result.text)}",
        )
        outputs = self.check_seed_items(session_id, ran)
        _expect("calculator.py" in outputs[0], f"Glob found {_short(outputs[0])}")
        _expect("def divide" in outputs[1], f"Read returned {_short(outputs[1])}")
        return (
            f"parked on {', '.join(parked)}, each answered from {self.workdir.name}; final text arrived; "
            f"/items: {2 + 2 * len(parked)} in order"
        )

    def check_seed_items(self, session_id: str, ran: dict[str, str]) -> list[str]:
        """``/items``: the message, each call followed by the output this client posted, the answer."""
        items = list(self.client.iter_items(session_id))
        kinds = [(i.type, i.data.get("name") or i.role) for i in items]
        expected: list[tuple[str, str | None]] = [("message", "user")]
        for name in SEED_TOOLS:
            expected += [("function_call", name), ("function_call_output", None)]
        expected.append(("message", "assistant"))
        _expect(kinds == expected, f"/items are {kinds}, expected {expected}")
        outputs = []
        for call, out in zip(items[1:-1:2], items[2:-1:2], strict=True):
            call_id = call.data.get("call_id")
            _expect(
                out.data.get("call_id") == call_id, f"output after {call_id} is for {out.data.get('call_id')}"
            )
            _expect(
                ran.get(str(call_id)) == out.data.get("output"), f"the stored output of {call_id} differs"
            )
            outputs.append(str(out.data.get("output")))
        return outputs

    def resume(self) -> str:
        """Drop the stream after a few deltas, resume from the last id, compare with a full replay."""
        session_id = self.new_session()
        start = self.client.get_session(session_id).last_event_id or 0
        first: list[tuple[int, dict[str, Any]]] = []
        posted = False
        with contextlib.closing(self.frames(session_id, start)) as frames:
            for sse in frames:
                if sse.id is None:  # a heartbeat; the first one says the subscription is live
                    if not posted:
                        self.client.send_message(session_id, "#resume Stream a long answer, slowly.")
                        posted = True
                    continue
                first.append((int(sse.id), sse.json()))
                _expect(not is_terminal_payload(first[-1][1]), "the turn ended before the stream was dropped")
                if sum(_is_delta(p) for _, p in first) >= DROP_AFTER_DELTAS:
                    break  # closing the generator closes the connection: the drop
        _expect(bool(first), "no event arrived before the drop")
        cut = first[-1][0]
        second = self.read_until(session_id, cut, _turn_over)
        replay = self.read_until(session_id, 0, lambda seq, _: seq >= second[-1][0])
        seen = first + second
        ids = [seq for seq, _ in seen]
        _expect(len(set(ids)) == len(ids), "an event was delivered twice")
        _expect(ids == sorted(ids), "events arrived out of order")
        expected = [(seq, p) for seq, p in replay if seq > start]
        missing = sorted({seq for seq, _ in expected} - set(ids))
        _expect(not missing, f"events never delivered: ids {missing[:10]}")
        _expect(seen == expected, "the resumed events differ from the replay (ids or payloads)")
        _expect(any(_is_delta(p) for _, p in second), "no text streamed after the drop: it was not mid-turn")
        text = "".join(p.get("delta", "") for _, p in seen if _is_delta(p))
        _expect(text == RESUME_TEXT, f"the streamed text differs: {_short(text)}")
        return (
            f"dropped after {len(first)} events (at id {cut}), resumed with Last-Event-ID: {cut}, "
            f"{len(second)} more; all {len(seen)} = the replay, each once, no gap"
        )

    def frames(self, session_id: str, after: int) -> Generator[ServerSentEvent, None, None]:
        """The raw SSE frames of one connection from ``after`` (heartbeats included); closed on exit."""
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
        timeout = httpx.Timeout(self.o.timeout, read=self.o.timeout)
        with self.http.stream(
            "GET", f"/v1/sessions/{session_id}/stream", headers=headers, timeout=timeout
        ) as resp:
            _expect(resp.status_code == 200, f"GET stream: {resp.status_code}")
            decoder = SSEDecoder()
            for chunk in resp.iter_bytes():
                yield from decoder.feed(chunk)

    def read_until(
        self, session_id: str, after: int, done: Callable[[int, dict[str, Any]], bool]
    ) -> list[tuple[int, dict[str, Any]]]:
        events: list[tuple[int, dict[str, Any]]] = []
        with contextlib.closing(self.frames(session_id, after)) as frames:
            for sse in frames:
                if sse.id is None:
                    continue
                events.append((int(sse.id), sse.json()))
                if done(*events[-1]):
                    return events
        raise CheckFailed(f"the stream after id {after} ended early")

    def approve(self) -> str:
        output, text = self.approval_turn("accept")
        expected = f"smoke_echo: approve-{self.nonce}"
        _expect(output == expected, f"the tool's output is {_short(output)}, expected {expected!r}")
        _expect(
            text == f"The tool answered: {expected}", f"the model did not read the output: {_short(text)}"
        )
        return f"elicitation accepted; {self.o.tool_function} ran and the model read {expected!r}"

    def decline(self) -> str:
        output, text = self.approval_turn("decline")
        _expect(output.startswith(DENIED_PREFIX), f"the declined call's output is {_short(output)}")
        _expect(text == f"The tool answered: {output}", f"the model did not read the denial: {_short(text)}")
        return f"elicitation declined; the tool did not run and the model read {_short(output, 48)}"

    def approval_turn(self, action: str) -> tuple[str, str]:
        """One turn calling smoke_echo; answer its approval with ``action``; the call's output and the text."""
        session_id = self.new_session()
        resolved: list[str] = []
        with self.client.stream(session_id) as events:
            next(events)  # the heartbeat: the subscription is live
            self.client.send_message(session_id, f"#approve Call the tool ({action}).")
            for event in events:
                kind = getattr(event, "type", "")
                if kind == "response.elicitation_request":
                    extra = event.model_extra or {}
                    _expect(
                        extra.get("params", {}).get("tool_name") == "smoke_echo", "approval for another tool"
                    )
                    data = {"elicitation_id": extra.get("elicitation_id"), "action": action}
                    self.client.post_event(session_id, "approval", data)
                elif kind == "response.elicitation_resolved":
                    resolved.append(str((event.model_extra or {}).get("action")))
                elif is_terminal(event):
                    _expect(event.type == "response.completed", f"the turn ended {event.type}")
                    break
        _expect(resolved == [action], f"approvals resolved: {resolved}, expected [{action!r}]")
        items = list(self.client.iter_items(session_id))
        calls = [i for i in items if i.type == "function_call" and i.data.get("name") == "smoke_echo"]
        outs = [i for i in items if i.type == "function_call_output"]
        _expect(
            len(calls) == 1 and len(outs) == 1, f"/items hold {len(calls)} call(s), {len(outs)} output(s)"
        )
        _expect(outs[0].data.get("call_id") == calls[0].data.get("call_id"), "the output is for another call")
        answer = [i for i in items if i.type == "message" and i.role == "assistant"]
        _expect(len(answer) == 1, f"{len(answer)} assistant message(s)")
        return str(outs[0].data.get("output", "")), answer[0].text

    def interrupt(self) -> str:
        """Interrupt while the scripted model waits before its first word."""
        session_id = self.new_session()
        seen: list[str] = []
        with self.client.stream(session_id) as events:
            next(events)
            self.client.send_message(session_id, "#interrupt Take your time.")
            stopped_at = None
            for event in events:
                if isinstance(event, ResponseInProgress) and stopped_at is None:
                    time.sleep(0.5)  # let the model step start "writing"
                    stopped_at = time.perf_counter()
                    self.client.interrupt(session_id)
                elif isinstance(event, SessionInterrupted | ResponseCancelled):
                    seen.append(event.type)
                elif isinstance(event, SessionStatus) and stopped_at is not None and event.status == "idle":
                    seen.append("idle")
                    break
                elif is_terminal(event):
                    raise CheckFailed(f"the turn ended {event.type} instead of response.cancelled")
        _expect(stopped_at is not None, "the turn never started")
        assert stopped_at is not None
        took = time.perf_counter() - stopped_at
        _expect(seen == ["session.interrupted", "response.cancelled", "idle"], f"after the interrupt: {seen}")
        _expect(took < INTERRUPT_DELAY_MS / 1000, f"the turn ended only after {took:.1f} s: not interrupted")
        snapshot = self.client.get_session(session_id)
        _expect(snapshot.status == "idle", f"the session is {snapshot.status}")
        items = list(self.client.iter_items(session_id))
        markers = [i for i in items if i.role == "user" and i.text.startswith(INTERRUPTED_MARKER)]
        _expect(len(markers) == 1, f"{len(markers)} interruption marker(s) in /items")
        return f"stopped in {took * 1000:.0f} ms: session.interrupted, response.cancelled, idle; one marker"

    # ------------------------------------------------------------------ OpenAI's Agents API
    def openai(self) -> str:
        """Two turns through the official ``openai`` SDK: a streamed create with input, then a posted message.

        The session references the smoke agent by ``agent_id``: ``/openai/v1`` resolves any agent of
        ``/v1/agents`` by its id, and this one answers from its script. An agent made with
        ``client.beta.agents.create`` has only OpenAI's fields (model, instructions, tools), no
        ``executor``, so it could not be scripted: its turns would need a real model and key.
        """
        import openai as sdk

        assert self.agent_id is not None
        oa = sdk.OpenAI(
            base_url=f"{self.endpoint}{OPENAI_PATH}",
            api_key=self.token or "skyloop-smoke",  # the SDK needs one; an open endpoint ignores it
            timeout=self.o.timeout,
            max_retries=0,  # a retry would hide a failure
            _strict_response_validation=True,  # every answer must parse as the SDK's types
        )
        with oa:
            _expect(
                hasattr(oa.beta, "agents"),
                f"the installed openai SDK ({sdk.__version__}) has no client.beta.agents: upgrade openai",
            )
            sessions = oa.beta.agents.sessions
            metadata = {"skyloop_smoke": self.nonce}
            first = _OpenAITurn(self.sessions)  # notes the session as soon as an event names it
            try:
                with _openai_errors("sessions.create(stream=True)"):
                    stream = sessions.create(
                        environment={"type": "none"},
                        agent_id=self.agent_id,
                        input=f"{OPENAI_FIRST} Answer over OpenAI's Agents API.",
                        metadata=metadata,
                        stream=True,
                    )
                    with stream:
                        first.read(stream, "the stream of sessions.create(stream=True)")
            finally:
                if first.session_id is None:
                    self.find_openai_sessions(sessions, metadata)  # so cleanup deletes what was made
            session_id = first.session_id
            _expect(session_id is not None, "the stream of sessions.create(stream=True) named no session")
            assert session_id is not None
            first.check(openai_text(1, self.nonce), "the first turn (sessions.create(stream=True))")
            text = f"{OPENAI_SECOND} Again, over sessions.events.create."
            with _openai_errors("sessions.events.create"):
                sessions.events.create(
                    session_id,
                    events=[
                        {
                            "type": "agent.session.input.message",
                            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
                        }
                    ],
                )
            # from the first stream's last event: the second turn's events, whenever the stream connects
            with (
                _openai_errors("sessions.events.stream"),
                sessions.events.stream(
                    session_id, extra_headers={"Last-Event-ID": first.last_event_id}
                ) as events,
            ):
                second = _OpenAITurn([]).read(events, "sessions.events.stream")
            second.check(openai_text(2, self.nonce), "the second turn (sessions.events.create)")
            _expect(second.turn_id != first.turn_id, f"the second stream repeated turn {first.turn_id}")
        return (
            f"openai {sdk.__version__}: create(stream=True) → {_short(first.text, 48)}, idle; events.create + "
            f"events.stream → {_short(second.text, 48)}, idle; {first.events + second.events} events"
        )

    def find_openai_sessions(self, sessions: Any, metadata: dict[str, str]) -> None:
        """The step's session when its stream failed before naming it (best effort: cleanup's list)."""
        with contextlib.suppress(Exception):
            for found in sessions.list(agent_id=self.agent_id, metadata=metadata):
                if found.id not in self.sessions:
                    self.sessions.append(found.id)

    # ------------------------------------------------------------------------ webhooks
    def webhook(self) -> str:
        """A webhook endpoint gets a delivery of a new session's lifecycle event, with an attempt recorded."""
        url = f"{self.endpoint}{WEBHOOK_TARGET}"
        body = {"url": url, "events": list(WEBHOOK_EVENTS), "description": f"skyloop smoke {self.nonce}"}
        resp = self.http.post("/v1/webhooks", json=body)
        if resp.status_code in (404, 405):
            raise CheckFailed(
                f"POST /v1/webhooks: expected 201, got {_status(resp)}: the endpoint has no webhooks support "
                "(a stack from before lifecycle events?)"
            )
        if resp.status_code in (401, 403):
            raise CheckFailed(
                f"POST /v1/webhooks: expected 201, got {_status(resp)}: the token may not register webhook "
                "endpoints"
            )
        _expect(resp.status_code == 201, f"POST /v1/webhooks ({url}): expected 201, got {_status(resp)}")
        self.webhook_id = str(_json(resp)["id"])
        started = time.monotonic()
        session_id = self.new_session()  # agent.session.created, for the endpoint's owner
        deadline = started + self.o.timeout * WEBHOOK_WAIT_SHARE
        nudge_at, turns = started + WEBHOOK_NUDGE_S, 0
        while True:
            listed = self.http.get(f"/v1/webhooks/{self.webhook_id}/deliveries", params={"limit": 100})
            _expect(listed.status_code == 200, f"GET the webhook's deliveries: {_status(listed)}")
            mine = [d for d in _json(listed).get("data", []) if d.get("session_id") == session_id]
            tried = [d for d in mine if d.get("attempts")]
            if tried:
                break
            now = time.monotonic()
            if now >= deadline:
                seen = ", ".join(f"{d.get('event_type')} {d.get('status')} (no attempt)" for d in mine[::-1])
                raise CheckFailed(
                    f"expected a delivery of session {session_id}'s events with an attempt recorded; after "
                    f"{now - started:.0f} s and {turns} extra turn(s): {seen or 'no delivery'}"
                )
            if now >= nudge_at:  # more events (the cloud's routing may not have seen the endpoint yet)
                self.client.send_message(session_id, "#webhook A short turn, for lifecycle events.")
                nudge_at, turns = now + WEBHOOK_NUDGE_S, turns + 1
            time.sleep(0.25)
        delivery = tried[-1]  # newest first: the oldest tried
        attempt = delivery["attempts"][0]
        code = attempt.get("response_code")
        answer = f"HTTP {code}" if code is not None else f"no answer: {attempt.get('error')}"
        return (
            f"{delivery.get('event_type')} delivered to {url} {time.monotonic() - started:.1f} s after the "
            f"session's creation: attempt {attempt.get('attempt')} recorded, {answer}"
        )

    # ---------------------------------------------------------------------- bad inputs
    def bad_inputs(self) -> dict[str, Callable[[], str]]:
        """One step per documented refusal; each checks the status, the error body and that nothing changed."""
        return {
            "bad:unknown-session": self.bad_unknown_session,
            "bad:malformed-json": self.bad_malformed_json,
            "bad:unknown-call": self.bad_unknown_call,
            "bad:invalid-agent": self.bad_invalid_agent,
            "bad:oversize-output": self.bad_oversize_output,
        }

    def probe(self) -> str:
        """An idle session the bad events are posted to (made once)."""
        if self.probe_session is None:
            self.probe_session = self.new_session()
        return self.probe_session

    def refused(self, status: int, code: str, what: str, **request: Any) -> str:
        """POST to the probe's events: refused as documented, and the session unchanged."""
        session_id = self.probe()
        before = self.fingerprint(session_id)
        _expect_error(self.http.post(f"/v1/sessions/{session_id}/events", **request), status, code, what)
        _expect(self.fingerprint(session_id) == before, f"{what} changed the session")
        return f"{status} {code}; session unchanged"

    def bad_unknown_session(self) -> str:
        resp = self.http.get(f"/v1/sessions/sess_smoke_missing_{self.nonce}")
        _expect_error(resp, 404, "not_found", "GET an unknown session")
        return "404 not_found"

    def bad_malformed_json(self) -> str:
        truncated = b'{"type": "message", "data": '
        headers = {"Content-Type": "application/json"}
        return self.refused(400, "invalid_input", "a truncated JSON body", content=truncated, headers=headers)

    def bad_unknown_call(self) -> str:
        data = {"call_id": f"call_smoke_{self.nonce}", "output": "x"}
        body = {"type": "function_call_output", "data": data}
        return self.refused(404, "not_found", "an output for an unknown call", json=body)

    def bad_oversize_output(self) -> str:
        data = {"call_id": f"call_smoke_{self.nonce}", "output": "x" * (MAX_OUTPUT_CHARS + 1)}
        body = {"type": "function_call_output", "data": data}
        return self.refused(
            413, "payload_too_large", f"a {MAX_OUTPUT_CHARS + 1:,}-character output", json=body
        )

    def bad_invalid_agent(self) -> str:
        name = f"smoke-bad-{self.nonce}"
        spec = {"name": name, "executor": {"harness": "scripted", "model": "smoke", "script": [{"text": ""}]}}
        _expect_error(self.http.post("/v1/agents", json=spec), 400, "invalid_input", "an invalid agent spec")
        listed = self.http.get("/v1/agents", params={"name": name})
        _expect(listed.status_code == 200 and _json(listed).get("data") == [], "the invalid agent was stored")
        return "400 invalid_input (an empty scripted answer); no agent stored"

    def fingerprint(self, session_id: str) -> tuple[Any, ...]:
        snapshot = self.client.get_session(session_id)
        return (snapshot.status, snapshot.last_event_id, len(list(self.client.iter_items(session_id))))

    # ------------------------------------------------------------------------- cleanup
    def cleanup(self) -> str:
        if self.agent_id is None and not self.sessions and self.webhook_id is None:
            return "nothing to delete"
        made = f"agent {self.agent_name}" if self.agent_id else "no agent"
        hook = f", webhook endpoint {self.webhook_id}" if self.webhook_id else ""
        if self.o.keep:
            return f"kept (--keep): {made}, sessions {' '.join(self.sessions) or 'none'}{hook}"
        problems = self.delete_webhook()  # first: the sessions' deletion then sends it nothing
        for session_id in self.sessions:
            resp = self.http.delete(f"/v1/sessions/{session_id}")
            if resp.status_code not in (200, 404):
                problems.append(f"DELETE session {session_id}: {_status(resp)}")
        if self.agent_id:
            resp = self.http.delete(f"/v1/agents/{self.agent_id}", params={"force": "true"})
            if resp.status_code not in (200, 404):
                problems.append(f"DELETE agent: {_status(resp)}")
            elif self.http.get(f"/v1/agents/{self.agent_id}").status_code != 404:
                problems.append("the agent is still there")
        _expect(not problems, "; ".join(problems))
        return f"deleted {len(self.sessions)} session(s) and {made}{hook}"

    def delete_webhook(self) -> list[str]:
        if self.webhook_id is None:
            return []
        resp = self.http.delete(f"/v1/webhooks/{self.webhook_id}")
        if resp.status_code not in (200, 404):
            return [f"DELETE webhook endpoint {self.webhook_id}: {_status(resp)}"]
        if self.http.get(f"/v1/webhooks/{self.webhook_id}").status_code != 404:
            return ["the webhook endpoint is still there"]
        return []


# ---------------------------------------------------------------------- the smoke agent
CALCULATOR = (
    '"""A tiny calculator."""\n\n\ndef divide(a, b):\n    return a / b\n\n\n'
    "def average(values):\n    return sum(values) / len(values)\n"
)
CANARY_FILE = "smoke_canary.txt"
RESUME_TEXT = " ".join(f"word{n}" for n in range(1, RESUME_WORDS + 1))


OPENAI_FIRST = "#openai-first"  # the scripted inputs of the openai step's two turns
OPENAI_SECOND = "#openai-second"


def openai_text(turn: int, nonce: str) -> str:
    """The scripted answer of the openai step's turn 1 or 2 (the nonce: this run's agent answered)."""
    return f"OpenAI Agents API turn {'one' if turn == 1 else 'two'} of smoke {nonce}."


def canary_text(nonce: str) -> str:
    """What the seed's Write puts in the file (checked on this machine afterwards)."""
    return f"SKYLOOP_SMOKE_CANARY_{nonce}"


def smoke_agent(name: str, workdir: Path, tool_function: str, nonce: str) -> dict[str, Any]:
    """The temporary agent: a script for each scenario (chosen by a #token) and the approved echo tool."""
    canary = canary_text(nonce)
    seed: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Glob", "arguments": {"pattern": "**/*.py", "path": str(workdir)}}]},
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(workdir / "calculator.py")}}]},
        {
            "tool_calls": [
                {"name": "Write", "arguments": {"file_path": str(workdir / CANARY_FILE), "content": canary}}
            ]
        },
        {"text": "Seed done. {{output}}"},
    ]
    script: list[dict[str, Any]] = [{"text": "skyloop smoke: nothing is scripted for this input."}]
    script += [{"match": "#seed", **answer} for answer in seed]
    script.append({"match": "#resume", "text": RESUME_TEXT, "word_delay_ms": RESUME_WORD_DELAY_MS})
    script.append(
        {
            "match": "#approve",
            "tool_calls": [{"name": "smoke_echo", "arguments": {"text": f"approve-{nonce}"}}],
        }
    )
    script.append({"match": "#approve", "text": "The tool answered: {{output}}"})
    script.append(
        {"match": "#interrupt", "text": "This answer is never written.", "delay_ms": INTERRUPT_DELAY_MS}
    )
    script.append({"match": OPENAI_FIRST, "text": openai_text(1, nonce)})
    script.append({"match": OPENAI_SECOND, "text": openai_text(2, nonce)})
    return {
        "name": name,
        "description": "skyloop smoke: a temporary scripted agent (deleted when the smoke test ends)",
        "prompt": "skyloop smoke test agent: every answer is scripted.",
        "executor": {"harness": "scripted", "model": "smoke", "script": script},
        "tools": {
            "smoke_echo": {
                "type": "lambda",
                "function": tool_function,
                "description": "Echo the text back",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
                "timeout_s": 30,
                "approval": "required",
            }
        },
        "limits": {"client_tool_timeout_s": 600, "max_iterations": 10},
    }


def seed_toolbox() -> ToolBox:
    """The coding set's Glob, Read and Write, run on this machine as the seed's client does."""
    from skyloop.client_tools import get_tool_set

    coding = get_tool_set("coding")

    def runner(name: str) -> Callable[[dict[str, Any]], Any]:
        return lambda args: coding.execute_tool(name, args)

    tools = [
        Tool(
            name=fn["name"],
            description=fn.get("description", ""),
            parameters=fn["parameters"],
            invoke=runner(fn["name"]),
        )
        for fn in (schema["function"] for schema in coding.TOOLS)
        if fn["name"] in SEED_TOOLS
    ]
    return ToolBox(tools)


# ------------------------------------------------------------------ OpenAI stream reading
class _OpenAITurn:
    """One turn as an ``agent.session.*`` stream of the SDK shows it, read to the session's end event."""

    def __init__(self, sessions: list[str]) -> None:
        self.sessions = sessions  # the run's sessions: this one joins as soon as an event names it
        self.session_id: str | None = None
        self.turn_id: str | None = None
        self.outcome: str | None = None  # agent.session.turn.completed, .failed or .cancelled
        self.error: str = ""
        self.deltas: list[str] = []
        self.texts: list[str] = []  # agent.session.turn.output_text.done
        self.events = 0
        self.last_event_id = "0"
        self.types: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def read(self, stream: Iterable[Any], what: str) -> _OpenAITurn:
        """Events until the session's end event (idle, failed, budget) after the turn's end."""
        for event in stream:
            self.events += 1
            self.last_event_id = str(event.event_id)
            self.types.append(event.type)
            self.note_session(event)
            if event.type == "agent.session.turn.output_text.delta":
                self.deltas.append(event.delta)
            elif event.type == "agent.session.turn.output_text.done":
                self.texts.append(event.text)
            elif event.type in OPENAI_TURN_ENDS:
                self.outcome, self.turn_id = event.type, event.turn_id
                error = getattr(event.turn, "error", None)
                self.error = f" ({error.code}: {error.message})" if error is not None else ""
            elif event.type in OPENAI_SESSION_ENDS and self.outcome is not None:
                return self
        raise CheckFailed(
            f"{what} ended after {self.events} event(s) before the turn and the session did "
            f"(expected {OPENAI_TURN_ENDS[0]}, then agent.session.idle): {_short(' '.join(self.types[-6:]))}"
        )

    def note_session(self, event: Any) -> None:
        if self.session_id is not None:
            return
        session = getattr(event, "session", None)
        found = getattr(session, "id", None) or getattr(event, "session_id", None)
        if found:
            self.session_id = str(found)
            if self.session_id not in self.sessions:
                self.sessions.append(self.session_id)

    def check(self, expected: str, what: str) -> None:
        _expect(
            self.outcome == "agent.session.turn.completed",
            f"{what} ended {self.outcome or 'without a turn end'}{self.error}, expected agent.session.turn.completed",
        )
        _expect(self.text == expected, f"{what}: assistant text {_short(self.text)}, expected {expected!r}")
        streamed = "".join(self.deltas)
        _expect(
            streamed == expected, f"{what}: the text deltas make {_short(streamed)}, expected {expected!r}"
        )


@contextlib.contextmanager
def _openai_errors(what: str) -> Generator[None, None, None]:
    """The SDK's errors as a step detail naming the call: ``sessions.events.create: 404 {...}``."""
    import openai as sdk

    try:
        yield
    except sdk.APIStatusError as exc:
        raise CheckFailed(f"{what}: {exc.status_code} {_short(str(exc.body or exc.message))}") from exc
    except sdk.APIError as exc:
        raise CheckFailed(f"{what}: {type(exc).__name__}: {exc}") from exc


# ----------------------------------------------------------------------------- helpers
def _within(check: Callable[[], str], timeout: float) -> str:
    """The check's detail; a check still running after ``timeout`` fails the step (its thread is left)."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(("ok", check()))
        except BaseException as exc:
            outcome.append(("error", exc))

    worker = threading.Thread(target=target, name="skyloop-smoke-step", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        raise CheckFailed(f"timed out after {timeout:g} s")
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return str(value)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _expect_error(resp: httpx.Response, status: int, code: str, what: str) -> None:
    """The documented refusal: the status and ``{"error": {"code", "message"}}``."""
    _expect(resp.status_code == status, f"{what}: expected {status} {code}, got {_status(resp)}")
    try:
        error = resp.json()["error"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed(
            f"{what}: the {status} body is not {{'error': {{code, message}}}}: {_short(resp.text)}"
        ) from None
    _expect(error.get("code") == code, f"{what}: error code {error.get('code')!r}, expected {code!r}")
    _expect(isinstance(error.get("message"), str) and bool(error["message"]), f"{what}: no error message")


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        raise CheckFailed(
            f"{resp.request.method} {resp.request.url.path}: not JSON: {_short(resp.text)}"
        ) from None


def _status(resp: httpx.Response) -> str:
    """``404 not_found 'message'`` for an error body, else the status and the start of the body."""
    try:
        error = resp.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        return f"{resp.status_code} {error.get('code', '')} {_short(str(error.get('message', '')))}"
    return f"{resp.status_code} {_short(resp.text)}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _outcome(result: Any) -> str:
    if result is None:
        return "without a terminal event"
    error = f" ({result.error.code}: {result.error.message})" if result.error else ""
    return f"{result.status}{error}"


def _is_delta(payload: dict[str, Any]) -> bool:
    return payload.get("type") == "response.output_text.delta"


def is_terminal_payload(payload: dict[str, Any]) -> bool:
    return payload.get("type") in ("response.completed", "response.failed", "response.cancelled")


def _turn_over(_seq: int, payload: dict[str, Any]) -> bool:
    """The turn's last event: ``session.status`` idle (or failed) after its terminal event."""
    return payload.get("type") == "session.status" and payload.get("status") in ("idle", "failed")


__all__ = [
    "DEFAULT_TOOL_FUNCTION",
    "SCENARIOS",
    "Options",
    "Report",
    "Step",
    "Unreachable",
    "run",
    "smoke_agent",
]
