"""The cloud latency model: a recorded local turn (what it did) x published figures (what each hop costs).

Pure arithmetic, no I/O beyond reading the figures file: ``cloud_latency.py``
records the trace and prints what :func:`model_turn` makes of it, and
``tests/unit/test_cloud_latency_model.py`` checks the arithmetic on a
hand-made trace. Nothing here knows today's state names or step functions:
the critical path is walked through the execution history's
``previousEventId`` links and the recorded invocations and calls, so a
restructured turn (fewer states, one function for every step, SnapStart...)
is modeled as it really runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from pydantic import BaseModel, Field

FIGURES_PATH = Path(__file__).resolve().parent / "latency_figures.json"
FUNCTION_PREFIX = "skyloop-"


# ----------------------------------------------------------------------------------------- figures
class Figure(BaseModel):
    """One published latency figure, in ms, with where it comes from."""

    p50_ms: float = Field(ge=0)
    p99_ms: float = Field(ge=0)
    kind: Literal["official", "third-party", "derived", "assumption"]
    source: str  # URL(s)
    says: str  # what the source says, in short
    note: str = ""  # how the figure was taken from it


class Factor(BaseModel):
    """A unitless multiplier (p50 and p99-ish), with where it comes from."""

    p50: float = Field(gt=0)
    p99: float = Field(gt=0)
    kind: Literal["official", "third-party", "derived", "assumption"]
    source: str
    says: str
    note: str = ""


class Figures(BaseModel):
    """Every figure the model uses (``bench/latency_figures.json``)."""

    as_of: str
    scope: str  # what the figures assume (one region, warm connections...)
    http_api_overhead: Figure
    lambda_invoke_warm: Figure
    sfn_transition: Figure
    sfn_execution_start: Figure
    sfn_callback_resume: Figure
    sfn_api_call: Figure
    dynamodb_read: Figure
    dynamodb_write: Figure
    dynamodb_transact_write: Figure
    other_aws_call: Figure
    cold_start_platform: Figure
    init_cpu_factor: Factor  # how much longer an import takes in Lambda's Init phase than measured here
    snapstart_restore: Figure
    stream_delivery: Figure

    @classmethod
    def load(cls, path: Path = FIGURES_PATH) -> Figures:
        return cls.model_validate_json(path.read_text())


# ------------------------------------------------------------------------------------------- trace
class HttpCall(BaseModel):
    """A request the client made (times as the client saw them)."""

    label: str  # message, function_call_output, stream, ...
    method: str
    route: str
    t0: float
    t1: float
    status: int | None = None
    req_bytes: int = 0


class Invocation(BaseModel):
    """One Lambda invocation, as recorded inside its execution environment."""

    function: str
    request_id: str
    pid: int
    tid: int
    trigger: str  # http_api (an HTTP API payload) or other
    invoked_by: str = "unknown"  # filled by the recorder: apigateway, stepfunctions, lambda:<fn>, event
    t0: float
    t1: float
    bytes_in: int = 0
    bytes_out: int = 0
    error: str | None = None


class SdkCall(BaseModel):
    """One AWS SDK call (botocore), in a handler or in the local Step Functions interpreter."""

    service: str  # botocore service id, hyphenized: dynamodb, sfn, lambda, secrets-manager...
    op: str
    pid: int
    tid: int
    inv: str | None  # the invocation's request id, None outside any handler
    t0: float
    t1: float
    req_bytes: int = 0
    resp_bytes: int = 0
    status: int | None = None
    markers: list[str] = Field(default_factory=list)
    detail: dict[str, Any] | None = None
    concurrent: bool = False  # filled by the recorder: overlaps another call of its invocation


class ModelCall(BaseModel):
    """One request the scripted model served (its own time, excluded from the added latency)."""

    path: str
    t0: float
    t1: float


class HistoryEvent(BaseModel):
    id: int
    prev: int
    type: str
    ts: float
    name: str | None = None  # the state's, on *StateEntered / *StateExited
    resource: str | None = None  # TaskScheduled: invoke, invoke.waitForTaskToken...
    resource_type: str | None = None  # TaskScheduled: lambda, dynamodb, ...
    function: str | None = None  # TaskScheduled of a Lambda task: the function name


class TurnTrace(BaseModel):
    kind: str  # text_turn, client_tool_turn, server_tool_turn
    session_id: str
    response_id: str
    http: list[HttpCall]
    invocations: list[Invocation]
    sdk_calls: list[SdkCall]
    model_calls: list[ModelCall]
    history: list[HistoryEvent]


class Trace(BaseModel):
    recorded_at: str
    commit: str
    dirty: bool
    note: str = ""
    turns: list[TurnTrace]
    init_ms: dict[str, float] = Field(
        default_factory=dict
    )  # each function's cold import, net of a bare start
    init_source: str = ""


def short_function(name: str | None) -> str:
    """``arn:...:function:skyloop-call_model`` or ``skyloop-call_model`` -> ``call_model``."""
    text = unquote(name or "")
    if ":function:" in text:
        text = text.split(":function:", 1)[1].split(":", 1)[0]
    return text.removeprefix(FUNCTION_PREFIX)


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


# ------------------------------------------------------------------------------------------ config
class FunctionConfig(BaseModel):
    """What the code configures for one function, read when the model runs (so it follows the code)."""

    memory_mb: int | None = None
    snapstart: bool = False
    prewarmed: bool = False  # provisioned concurrency or a pre-warm schedule: never cold on a first turn
    streaming: bool = False
    init_ms: float | None = None  # its handler's cold import, net of a bare interpreter start


class Config(BaseModel):
    poll_busy_s: float  # the stream's poll interval while a turn runs (cloud)
    hot_poll_s: float = (
        0.01  # a hot wait's read interval while a fast client answers (skyloop.turns.hot_wait)
    )
    functions: dict[str, FunctionConfig]  # the manifest's, by name; anything else is a user's tool
    init_source: str = ""
    notes: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------------------- the path
Scope = Literal["server", "client"]  # (a) the server path, or only (b) what a client sees on top
HANDOFFS = {("sfn", "StartExecution"), ("sfn", "SendTaskSuccess")}
WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
TERMINAL_MARKERS = {"response.completed", "response.failed", "response.cancelled"}
BACKGROUND_SLACK_S = (
    0.002  # the model request's own start (connection, serialization) before the server sees it
)
TOLERANCE_S = 0.005  # history timestamps are whole milliseconds, taken just before the call they record


class Hop(BaseModel):
    """One step of a turn's critical path, as it ran locally."""

    kind: Literal[
        "http",
        "invoke",
        "continue",
        "tool",
        "task",
        "transition",
        "sfn_start",
        "sfn_resume",
        "hot_wait",
        "visibility",
    ]
    label: str
    segment: int
    function: str | None = None
    invocation: str | None = None  # request id
    state: str | None = None  # the ASL state that ran it
    calls: list[SdkCall] = Field(default_factory=list)  # on the path
    hidden: list[SdkCall] = Field(default_factory=list)  # under the model's own time
    # calls made alongside the hand-over (another thread) that the next step needs landed: the turn's
    # append while its execution starts (skyloop.turns.lifecycle._append_starting)
    alongside: list[SdkCall] = Field(default_factory=list)
    model_ms: float = 0.0  # the model's own time in this invocation (locally; excluded)
    own_ms: float = 0.0  # a user tool's own time (locally; excluded)


class PathError(ValueError):
    """The trace does not show a hop the model needs (it says which)."""


def _find_invocation(turn: TurnTrace, function: str, after: float, used: set[str]) -> Invocation | None:
    """The first invocation of ``function`` not matched yet that started after a state scheduled it."""
    found = [
        i for i in turn.invocations
        if i.function == function and i.t0 >= after - TOLERANCE_S and i.request_id not in used
    ]  # fmt: skip
    if not found:
        return None
    first = min(found, key=lambda i: i.t0)
    used.add(first.request_id)
    return first


def _api_invocation(turn: TurnTrace, post: HttpCall) -> Invocation:
    found = [i for i in turn.invocations if i.trigger == "http_api" and post.t0 <= i.t0 and i.t1 <= post.t1]
    if not found:
        raise PathError(f"no API invocation inside the client's {post.label} request")
    return found[0]


def _calls_of(turn: TurnTrace, inv: Invocation, until: float | None = None) -> list[SdkCall]:
    return [c for c in turn.sdk_calls if c.inv == inv.request_id and (until is None or c.t0 <= until)]


def _split_model(
    turn: TurnTrace, inv: Invocation, calls: list[SdkCall]
) -> tuple[list[SdkCall], list[SdkCall], float]:
    """(calls on the path, calls hidden under the model's own time, the model's local time)."""
    windows = [m for m in turn.model_calls if inv.t0 <= m.t0 and m.t1 <= inv.t1 + TOLERANCE_S]
    mine = _calls_of(turn, inv)
    main = mine[0].tid if mine else None

    def under_model(c: SdkCall) -> bool:
        if any(m.t0 <= c.t0 and c.t1 <= m.t1 for m in windows):
            return True
        # work the step started on another thread just before the model call, and that overlaps the
        # request (the attempt's claim): a real model's time to first byte hides it
        return c.tid != main and any(c.t0 <= m.t1 and c.t1 >= m.t0 - BACKGROUND_SLACK_S for m in windows)

    hidden = [c for c in calls if under_model(c)]
    return [c for c in calls if c not in hidden], hidden, sum((m.t1 - m.t0) * 1000 for m in windows)


def _chain(history: list[HistoryEvent], last: HistoryEvent, anchor: HistoryEvent) -> list[HistoryEvent]:
    """The events from just after ``anchor`` to ``last``, following ``previousEventId`` back."""
    by_id = {e.id: e for e in history}
    out: list[HistoryEvent] = []
    event: HistoryEvent | None = last
    while event is not None and event.id != anchor.id:
        out.append(event)
        event = by_id.get(event.prev) if event.prev else None
    if event is None and anchor.type != "ExecutionStarted":
        raise PathError(f"history event {last.id} ({last.type}) does not lead back to event {anchor.id}")
    return out[::-1]


def _state_of(history: list[HistoryEvent], scheduled: HistoryEvent) -> str | None:
    by_id = {e.id: e for e in history}
    event = by_id.get(scheduled.prev)
    while event is not None and not event.type.endswith("StateEntered"):
        event = by_id.get(event.prev)
    return event.name if event is not None else None


def _task_hop(
    turn: TurnTrace, scheduled: HistoryEvent, segment: int, functions: set[str], used: set[str]
) -> Hop:
    state = _state_of(turn.history, scheduled)
    if scheduled.function is None:  # a service integration without a Lambda in between
        label = f"{state} ({scheduled.resource_type}:{scheduled.resource})"
        return Hop(kind="task", label=label, segment=segment, state=state)
    inv = _find_invocation(turn, scheduled.function, scheduled.ts, used)
    if inv is None:
        raise PathError(f"state {state}: no invocation of {scheduled.function} was recorded")
    if scheduled.function not in functions:  # a user's Lambda tool: its own time is not ours
        own = (inv.t1 - inv.t0) * 1000
        return Hop(kind="tool", label=f"{state} ({inv.function})", segment=segment, function=inv.function,
                   invocation=inv.request_id, state=state, own_ms=own)  # fmt: skip
    on_path, hidden, model_ms = _split_model(turn, inv, _calls_of(turn, inv))
    return Hop(kind="invoke", label=f"{state} ({inv.function})", segment=segment, function=inv.function,
               invocation=inv.request_id, state=state, calls=on_path, hidden=hidden, model_ms=model_ms)  # fmt: skip


def _hot_wait_segment(turn: TurnTrace, post: HttpCall, api: Invocation, segment: int) -> list[Hop]:
    """A client output picked up by the model step that waited for it (skyloop.turns.hot_wait).

    The API records the output and hands nothing over; the invocation that
    published the call and kept polling the turn sees it at its next read and
    goes on in place: no invocation, no transition, no callback.
    """
    # The turn goes on once the API's write of the output landed (what the API reads after it, to wake
    # a parked turn, runs alongside the waiter and is not on the turn's path).
    writes = [c for c in _calls_of(turn, api) if c.op in WRITE_OPS]
    if not writes:
        raise PathError(f"the API invocation of {post.label} wrote nothing")
    answered = writes[-1]
    milestone = next(
        (c for c in turn.sdk_calls if c.markers and c.op in WRITE_OPS and c.t0 >= answered.t1 - TOLERANCE_S),
        None,
    )
    if milestone is None or milestone.inv is None:
        raise PathError(f"the API invocation of {post.label} handed over nothing and nothing followed it")
    waiter = next(i for i in turn.invocations if i.request_id == milestone.inv)
    if waiter.t0 > api.t0:
        raise PathError(
            f"the API invocation of {post.label} made no StartExecution / SendTaskSuccess call, and what "
            f"followed ({waiter.function}) was not waiting for it"
        )
    after = [c for c in _calls_of(turn, waiter, until=milestone.t0) if c.t0 >= answered.t1 - TOLERANCE_S]
    while after and after[0].op == "GetItem":  # the polls up to the one that saw the output
        after.pop(0)
    on_path, hidden, model_ms = _split_model(turn, waiter, after)
    shown = ", ".join(sorted(set(milestone.markers)))
    return [
        Hop(kind="invoke", label=f"API ({api.function})", segment=segment, function=api.function,
            invocation=api.request_id, calls=_calls_of(turn, api, until=answered.t0)),
        Hop(kind="hot_wait", label="the waiting model step reads the output", segment=segment),
        Hop(kind="continue", label=f"CallModel goes on ({waiter.function})", segment=segment,
            function=waiter.function, invocation=waiter.request_id, calls=on_path, hidden=hidden,
            model_ms=model_ms),
        Hop(kind="visibility", label=f"the stream shows {shown}", segment=segment),
    ]  # fmt: skip


def critical_path(turn: TurnTrace, functions: set[str]) -> list[Hop]:  # noqa: C901  (one walk, segment by segment)
    """Every hop from the first client request to the turn's last event being durable.

    A turn is cut at each client request (the message, then each tool output):
    the API invocation that served it, up to the call that hands over to Step
    Functions (StartExecution, SendTaskSuccess); then the states that ran, taken
    by following the history's ``previousEventId`` links back from the state
    whose invocation published what the client waits for (``action_required``,
    or the terminal ``response.*`` event: the first write that carries it);
    then, for the client, the stream's delay in showing it.
    """
    hops: list[Hop] = []
    used: set[str] = set()  # invocations already matched to a state
    posts = sorted((h for h in turn.http if h.method == "POST"), key=lambda h: h.t0)
    if not posts:
        raise PathError("the trace has no client request")
    for segment, post in enumerate(posts):
        hops.append(Hop(kind="http", label=f"{post.method} {post.route} ({post.label})", segment=segment))
        api = _api_invocation(turn, post)
        handoff = next((c for c in reversed(_calls_of(turn, api)) if (c.service, c.op) in HANDOFFS), None)
        if handoff is None:
            hops.extend(_hot_wait_segment(turn, post, api, segment))
            if set(hops[-1].label.removeprefix("the stream shows ").split(", ")) & TERMINAL_MARKERS:
                break
            continue
        calls = _calls_of(turn, api, until=handoff.t0)
        # what the hand-over waited for: its own thread's calls, and others' that ended before it began
        gating = [c for c in calls if c.tid == handoff.tid or c.t1 <= handoff.t0 + TOLERANCE_S]
        later = [
            c for c in _calls_of(turn, api) if c not in gating and c.op in WRITE_OPS and c.t0 < handoff.t1
        ]
        hops.append(Hop(kind="invoke", label=f"API ({api.function})", segment=segment, function=api.function,
                        invocation=api.request_id, calls=gating,
                        alongside=later if handoff.op == "StartExecution" else []))  # fmt: skip
        if handoff.op == "StartExecution":
            anchor = next(e for e in turn.history if e.type == "ExecutionStarted")
            hops.append(Hop(kind="sfn_start", label="execution start", segment=segment))
        else:
            succeeded = [
                e for e in turn.history if e.type == "TaskSucceeded" and e.ts >= handoff.t0 - TOLERANCE_S
            ]
            if not succeeded:
                raise PathError("no task resumed after the SendTaskSuccess call")
            anchor = min(succeeded, key=lambda e: e.ts)
            hops.append(Hop(kind="sfn_resume", label="callback resumes the parked task", segment=segment))
        milestone = next(
            (
                c
                for c in turn.sdk_calls
                if c.markers and c.op in WRITE_OPS and c.t0 >= handoff.t1 - TOLERANCE_S
            ),
            None,
        )
        if milestone is None or milestone.inv is None:
            raise PathError(f"nothing the client waits for was written after the {post.label} request")
        inv = next(i for i in turn.invocations if i.request_id == milestone.inv)
        scheduled = [
            e for e in turn.history
            if e.type == "TaskScheduled" and e.function == inv.function and e.ts <= inv.t0 + TOLERANCE_S
        ]  # fmt: skip
        if not scheduled:
            raise PathError(f"no task state invoked {inv.function}, which wrote {milestone.markers}")
        last = max(scheduled, key=lambda e: e.ts)
        for event in _chain(turn.history, last, anchor):
            if event.type.endswith("StateEntered"):
                hops.append(Hop(kind="transition", label=f"{event.name} ({event.type.removesuffix('StateEntered')})",
                                segment=segment, state=event.name))  # fmt: skip
            elif event.type == "TaskScheduled" and event.id != last.id:
                hops.append(_task_hop(turn, event, segment, functions, used))
        on_path, hidden, model_ms = _split_model(turn, inv, _calls_of(turn, inv, until=milestone.t0))
        hops.append(Hop(kind="invoke", label=f"{_state_of(turn.history, last)} ({inv.function})", segment=segment,
                        function=inv.function, invocation=inv.request_id, state=_state_of(turn.history, last),
                        calls=on_path, hidden=hidden, model_ms=model_ms))  # fmt: skip
        shown = ", ".join(sorted(set(milestone.markers)))
        hops.append(Hop(kind="visibility", label=f"the stream shows {shown}", segment=segment))
        if set(milestone.markers) & TERMINAL_MARKERS:
            break
    return hops


# ------------------------------------------------------------------------------------------ pricing
class Line(BaseModel):
    """One priced component of a turn's added latency."""

    component: str
    scope: Scope
    count: int
    p50_ms: float
    p99_ms: float
    detail: str = ""


class ColdStart(BaseModel):
    function: str
    how: Literal["cold", "snapstart", "prewarmed"]
    ours: bool
    on_path: bool  # on the turn's critical path (the stream's connect happens before the turn)
    p50_ms: float
    p99_ms: float
    note: str = ""


class TurnModel(BaseModel):
    kind: str
    start: Literal["warm", "cold"]
    lines: list[Line]
    cold_starts: list[ColdStart]
    server_p50_ms: float
    server_p99_ms: float
    client_p50_ms: float
    client_p99_ms: float
    assumed_p50_ms: float  # the part of (b)'s p50 priced with figures that have no published source
    excluded: dict[str, float]  # measured locally and not priced: the model's own time, a user tool's
    path: list[str]


def sdk_figure(figures: Figures, call: SdkCall) -> tuple[str, Figure]:
    """Which published figure prices an SDK call, and the component it belongs to."""
    if call.service == "dynamodb":
        if call.op == "TransactWriteItems":
            return "DynamoDB", figures.dynamodb_transact_write
        if call.op in WRITE_OPS:
            return "DynamoDB", figures.dynamodb_write
        return "DynamoDB", figures.dynamodb_read
    if call.service == "sfn":
        return "Step Functions API", figures.sfn_api_call
    return "other AWS API", figures.other_aws_call


def priced_calls(calls: list[SdkCall], figures: Figures) -> tuple[list[SdkCall], list[SdkCall]]:
    """(calls that add up on the path, calls that ran alongside them).

    Calls of one thread run one after another; calls of other threads that
    overlapped them locally overlap them in the cloud too. Within each group of
    overlapping calls, the thread whose calls cost most (p50) is the path.
    """
    counted: list[SdkCall] = []
    alongside: list[SdkCall] = []
    group: list[SdkCall] = []
    end = float("-inf")
    for call in [*sorted(calls, key=lambda c: c.t0), None]:
        if call is not None and call.t0 < end:
            group.append(call)
            end = max(end, call.t1)
            continue
        if group:
            by_thread: dict[int, list[SdkCall]] = {}
            for c in group:
                by_thread.setdefault(c.tid, []).append(c)
            best = max(by_thread.values(), key=lambda cs: sum(sdk_figure(figures, c)[1].p50_ms for c in cs))
            counted.extend(best)
            alongside.extend(c for c in group if c not in best)
        if call is not None:
            group, end = [call], call.t1
    return counted, alongside


def _environments(turn: TurnTrace) -> dict[str, bool]:
    """Invocation request id -> whether it needed a new execution environment (all cold at the start).

    One environment serves one invocation at a time, as in Lambda: an
    invocation takes a free environment of its function, else a new one.
    """
    free_at: dict[str, list[float]] = {}
    out: dict[str, bool] = {}
    for inv in sorted(turn.invocations, key=lambda i: i.t0):
        envs = free_at.setdefault(inv.function, [])
        free = [k for k, t in enumerate(envs) if t <= inv.t0]
        if free:
            envs[free[0]] = inv.t1
            out[inv.request_id] = False
        else:
            envs.append(inv.t1)
            out[inv.request_id] = True
    return out


def _cold_cost(
    fn: FunctionConfig | None, figures: Figures
) -> tuple[Literal["cold", "snapstart", "prewarmed"], float, float, str]:
    if fn is not None and fn.prewarmed:
        return "prewarmed", 0.0, 0.0, "pre-warmed / provisioned"
    if fn is not None and fn.snapstart:
        r = figures.snapstart_restore
        return "snapstart", r.p50_ms, r.p99_ms, "SnapStart restore"
    init = fn.init_ms if fn is not None and fn.init_ms is not None else 0.0
    f, k = figures.cold_start_platform, figures.init_cpu_factor
    note = f"platform {f.p50_ms:.0f} ms + init {init:.0f} ms measured here x{k.p50:g}"
    return "cold", f.p50_ms + init * k.p50, f.p99_ms + init * k.p99, note


class _Pricer:
    """Prices one turn's hops, line by line (one method per kind of hop)."""

    def __init__(
        self, turn: TurnTrace, figures: Figures, config: Config, start: Literal["warm", "cold"]
    ) -> None:
        self.figures, self.config, self.start = figures, config, start
        self.lines: dict[tuple[str, Scope], Line] = {}
        self.assumed = 0.0
        self.cold_env = _environments(turn) if start == "cold" else {}
        self.cold_starts: list[ColdStart] = []
        self.excluded = {"model_ms_local": 0.0, "tool_ms_local": 0.0}  # the client's time is no hop at all
        self.path: list[str] = []

    def add(
        self,
        component: str,
        scope: Scope,
        fig: Figure | None,
        p50: float = 0,
        p99: float = 0,
        detail: str = "",
    ) -> None:
        """One more of ``component``, at ``fig`` (or at ``p50``/``p99`` when derived here)."""
        if fig is not None:
            p50, p99 = fig.p50_ms, fig.p99_ms
            if fig.kind == "assumption":
                self.assumed += p50
        line = self.lines.setdefault(
            (component, scope), Line(component=component, scope=scope, count=0, p50_ms=0, p99_ms=0)
        )
        line.count += 1
        line.p50_ms += p50
        line.p99_ms += p99
        if detail and detail not in line.detail:
            line.detail = f"{line.detail}, {detail}" if line.detail else detail

    def invoke(self, hop: Hop) -> None:
        if hop.kind != "continue":  # a hot wait goes on in the invocation that waited
            self.add(
                "Lambda invoke overhead", "server", self.figures.lambda_invoke_warm, detail=hop.function or ""
            )
        self.excluded["tool_ms_local"] += hop.own_ms
        self.excluded["model_ms_local"] += hop.model_ms
        counted, alongside = priced_calls(hop.calls, self.figures)
        for call in counted:
            group, fig = sdk_figure(self.figures, call)
            component = (
                f"{group}: {hop.state or hop.function}" if group == "DynamoDB" else f"{group}: {call.op}"
            )
            self.add(component, "server", fig, detail=call.op)
        if self.start == "cold" and hop.invocation and self.cold_env.get(hop.invocation):
            self.cold(hop.function or "?", on_path=True)
        if hop.alongside:
            self.overlapped(hop)
        ops = [c.op for c in counted] + [f"({c.op})" for c in alongside]
        ops += [f"({c.op} alongside the start)" for c in hop.alongside]
        shown = f"{hop.label} [{', '.join(ops)}]" if ops else hop.label
        self.path.append(shown + (f" +{len(hop.hidden)} under the model" if hop.hidden else ""))

    def overlapped(self, hop: Hop) -> None:
        """Writes made while the execution starts: on the path only by what they take beyond the start.

        The first step reads the session after the start call, the execution's
        start, its first transition and its invocation; a write still running
        then makes it wait (it reads again), so only the excess is priced.
        """
        f = self.figures
        head = [f.sfn_api_call, f.sfn_execution_start, f.sfn_transition, f.lambda_invoke_warm]
        budget50, budget99 = sum(x.p50_ms for x in head), sum(x.p99_ms for x in head)
        own = [sdk_figure(f, c)[1] for c in hop.alongside]
        p50 = max(0.0, sum(x.p50_ms for x in own) - budget50)
        p99 = max(0.0, sum(x.p99_ms for x in own) - budget99)
        self.add("turn's append beyond its start (alongside)", "server", None, p50, p99,
                 detail=", ".join(c.op for c in hop.alongside))  # fmt: skip

    def cold(self, function: str, *, on_path: bool) -> None:
        fn = self.config.functions.get(function)
        how, p50, p99, note = _cold_cost(fn, self.figures)
        ours = fn is not None
        if not on_path:
            note += "; the stream's connect, before the turn"
        self.cold_starts.append(
            ColdStart(
                function=function, how=how, ours=ours, on_path=on_path, p50_ms=p50, p99_ms=p99, note=note
            )
        )
        if on_path and ours and how != "prewarmed":
            self.add(f"cold start: {function}", "server", None, p50, p99, detail=note)

    def other(self, hop: Hop) -> None:
        f = self.figures
        if hop.kind == "http":
            self.add("HTTP API overhead", "client", f.http_api_overhead)
        elif hop.kind == "task":
            self.add("Step Functions service task", "server", f.other_aws_call, detail=hop.label)
        elif hop.kind == "transition":
            self.add("Step Functions transitions", "server", f.sfn_transition, detail=hop.state or "")
            if hop.label.endswith("(Task)"):  # shown with its invocation, next
                return
        elif hop.kind == "sfn_start":
            self.add("Step Functions execution start", "server", f.sfn_execution_start)
        elif hop.kind == "sfn_resume":
            self.add("Step Functions callback resume", "server", f.sfn_callback_resume)
        elif hop.kind == "hot_wait":
            poll, q = self.config.hot_poll_s * 1000, f.dynamodb_read
            self.add("hot wait: the next poll's read", "server", None, poll / 2 + q.p50_ms, poll + q.p99_ms)
        elif hop.kind == "visibility":
            poll, q = self.config.poll_busy_s * 1000, f.dynamodb_read
            shown = hop.label.removeprefix("the stream shows ")
            self.add(
                "stream visibility (poll + Query)",
                "client",
                None,
                poll / 2 + q.p50_ms,
                poll * 0.99 + q.p99_ms,
                shown,
            )
            if f.stream_delivery.p50_ms or f.stream_delivery.p99_ms:
                self.add("stream delivery", "client", f.stream_delivery)
        self.path.append(hop.label)


def model_turn(
    turn: TurnTrace, figures: Figures, config: Config, start: Literal["warm", "cold"]
) -> TurnModel:
    """Price the critical path of ``turn``: warm, or as the first turn after idle (``cold``)."""
    pricer = _Pricer(turn, figures, config, start)
    for hop in critical_path(turn, set(config.functions)):
        if hop.kind in ("invoke", "continue", "tool"):
            pricer.invoke(hop)
        else:
            pricer.other(hop)
    if start == "cold":  # the stream is opened before the message is posted: before the turn, not on its path
        for name in (n for n, fn in config.functions.items() if fn.streaming):
            pricer.cold(name, on_path=False)
    lines = list(pricer.lines.values())
    server = [x for x in lines if x.scope == "server"]
    return TurnModel(
        kind=turn.kind,
        start=start,
        lines=lines,
        cold_starts=pricer.cold_starts,
        server_p50_ms=round(sum(x.p50_ms for x in server), 1),
        server_p99_ms=round(sum(x.p99_ms for x in server), 1),
        client_p50_ms=round(sum(x.p50_ms for x in lines), 1),
        client_p99_ms=round(sum(x.p99_ms for x in lines), 1),
        assumed_p50_ms=round(pricer.assumed, 1),
        excluded={k: round(v, 1) for k, v in pricer.excluded.items()},
        path=pricer.path,
    )
