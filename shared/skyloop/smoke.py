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
``bad:<case>``      bad inputs get the documented 4xx and ``{"error": {"code", "message"}}``,
                    and write nothing
``cleanup``         the sessions and the agent are deleted (also after a failure; ``keep``
                    leaves them)
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
    from collections.abc import Callable, Generator

    from skyloop.client import ServerSentEvent

SCENARIOS = ("seed", "resume", "approve", "decline", "interrupt", "bad-inputs")
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
        if self.agent_id is None and not self.sessions:
            return "nothing to delete"
        made = f"agent {self.agent_name}" if self.agent_id else "no agent"
        if self.o.keep:
            return f"kept (--keep): {made}, sessions {' '.join(self.sessions) or 'none'}"
        problems = []
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
        return f"deleted {len(self.sessions)} session(s) and {made}"


# ---------------------------------------------------------------------- the smoke agent
CALCULATOR = (
    '"""A tiny calculator."""\n\n\ndef divide(a, b):\n    return a / b\n\n\n'
    "def average(values):\n    return sum(values) / len(values)\n"
)
CANARY_FILE = "smoke_canary.txt"
RESUME_TEXT = " ".join(f"word{n}" for n in range(1, RESUME_WORDS + 1))


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
