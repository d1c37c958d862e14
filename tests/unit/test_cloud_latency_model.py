"""bench/latency_model.py: the critical path and its price, on a small hand-made trace (no clock, no stack).

The trace: a client posts a message; the API function reads, writes and
starts the execution; state A (function ``step_a``) writes; a Choice routes
to state B (``step_b``), which writes on two threads at once, calls the model
(a write lands under the model's own time), then publishes
``response.completed``. A Pass state in a parallel branch is in the history
but not on the path. Figures are round numbers, so every total is by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import latency_model as lm


def fig(p50: float, p99: float, kind: str = "third-party") -> dict[str, Any]:
    return {"p50_ms": p50, "p99_ms": p99, "kind": kind, "source": "https://example.invalid", "says": "-"}


FIGURES = lm.Figures.model_validate(
    {
        "as_of": "test",
        "scope": "test",
        "http_api_overhead": fig(7, 14),
        "lambda_invoke_warm": fig(3, 9),
        "sfn_transition": fig(10, 50, "assumption"),
        "sfn_execution_start": fig(20, 40),
        "sfn_callback_resume": fig(30, 60),
        "sfn_api_call": fig(4, 8),
        "dynamodb_read": fig(1, 2),
        "dynamodb_write": fig(2, 4),
        "dynamodb_transact_write": fig(5, 10),
        "other_aws_call": fig(6, 12),
        "cold_start_platform": fig(100, 200),
        "init_cpu_factor": {"p50": 1.0, "p99": 2.0, "kind": "assumption", "source": "-", "says": "-"},
        "snapstart_restore": fig(50, 100),
        "stream_delivery": fig(0, 0),
    }
)
T = 1_000.0  # seconds since the epoch do not matter, only order


def call(
    inv: str | None, op: str, t0: float, t1: float, tid: int = 1, markers: list[str] | None = None
) -> lm.SdkCall:
    service = "sfn" if op in ("StartExecution", "SendTaskSuccess") else "dynamodb"
    return lm.SdkCall(
        service=service, op=op, pid=1, tid=tid, inv=inv, t0=T + t0, t1=T + t1, markers=markers or []
    )


def inv(function: str, rid: str, t0: float, t1: float, trigger: str = "other") -> lm.Invocation:
    return lm.Invocation(
        function=function, request_id=rid, pid=1, tid=1, trigger=trigger, t0=T + t0, t1=T + t1
    )


def event(
    id_: int, prev: int, type_: str, ts: float, name: str | None = None, function: str | None = None
) -> lm.HistoryEvent:
    return lm.HistoryEvent(id=id_, prev=prev, type=type_, ts=T + ts, name=name, function=function,
                           resource_type="lambda" if function else None)  # fmt: skip


def make_turn() -> lm.TurnTrace:
    return lm.TurnTrace(
        kind="text_turn",
        session_id="s",
        response_id="r",
        http=[lm.HttpCall(label="message", method="POST", route="/events", t0=T + 0.000, t1=T + 0.050)],
        invocations=[
            inv("api", "api-1", 0.005, 0.040, trigger="http_api"),
            inv("step_a", "a-1", 0.100, 0.120),
            inv("step_b", "b-1", 0.130, 0.200),
        ],
        sdk_calls=[
            call("api-1", "GetItem", 0.006, 0.008),
            call("api-1", "TransactWriteItems", 0.010, 0.015),
            call("api-1", "StartExecution", 0.020, 0.025),
            call("api-1", "PutItem", 0.030, 0.032),  # after the hand-off: off the path
            call("a-1", "TransactWriteItems", 0.105, 0.110),
            call("b-1", "TransactWriteItems", 0.131, 0.139, tid=1),  # these three overlap: the costlier
            call("b-1", "GetItem", 0.132, 0.134, tid=2),  # thread (5 ms) counts, the other (1 + 1)
            call("b-1", "GetItem", 0.135, 0.137, tid=2),  # runs alongside
            call("b-1", "PutItem", 0.150, 0.152),  # under the model's own time
            call("b-1", "TransactWriteItems", 0.185, 0.190, markers=["response.completed"]),
        ],
        model_calls=[lm.ModelCall(path="/v1/responses", t0=T + 0.140, t1=T + 0.180)],
        history=[
            event(1, 0, "ExecutionStarted", 0.026),
            event(2, 0, "TaskStateEntered", 0.095, name="A"),
            event(3, 2, "TaskScheduled", 0.098, function="step_a"),
            event(4, 3, "TaskStarted", 0.098),
            event(5, 4, "TaskSucceeded", 0.121),
            event(6, 5, "TaskStateExited", 0.121, name="A"),
            event(7, 6, "ChoiceStateEntered", 0.122, name="Route"),
            event(8, 7, "ChoiceStateExited", 0.122, name="Route"),
            event(11, 7, "PassStateEntered", 0.123, name="Elsewhere"),  # another branch: not on the path
            event(9, 8, "TaskStateEntered", 0.125, name="B"),
            event(10, 9, "TaskScheduled", 0.128, function="step_b"),
        ],
    )


def config(**functions: dict[str, Any]) -> lm.Config:
    base = {"api": {"init_ms": 50}, "step_a": {"init_ms": 20}, "step_b": {"init_ms": 30}}
    for name, extra in functions.items():
        base[name] = {**base[name], **extra}
    return lm.Config(poll_busy_s=0.2, functions={k: lm.FunctionConfig(**v) for k, v in base.items()})


def line(model: lm.TurnModel, component: str) -> lm.Line:
    return next(x for x in model.lines if x.component == component)


def test_the_path_follows_the_history_links_and_stops_at_what_the_client_waits_for() -> None:
    hops = lm.critical_path(make_turn(), {"api", "step_a", "step_b"})
    assert [h.kind for h in hops] == [
        "http", "invoke", "sfn_start", "transition", "invoke", "transition", "transition", "invoke", "visibility",
    ]  # fmt: skip
    assert [h.state for h in hops if h.kind == "transition"] == ["A", "Route", "B"]
    api, step_a, step_b = (h for h in hops if h.kind == "invoke")
    assert [c.op for c in api.calls] == ["GetItem", "TransactWriteItems", "StartExecution"]
    assert step_a.function == "step_a"
    assert [c.op for c in step_b.hidden] == ["PutItem"]
    assert step_b.calls[-1].markers == ["response.completed"]
    assert step_b.model_ms == pytest.approx(40)


def test_warm_turn_adds_up_by_hand() -> None:
    m = lm.model_turn(make_turn(), FIGURES, config(), "warm")
    # api 3 + 1 + 5 + 4 | start 20 | 3 transitions 30 | A 3 + 5 | B 3 + max(5, 1 + 1) + 5
    assert m.server_p50_ms == pytest.approx(13 + 20 + 30 + 8 + 13)
    assert m.server_p99_ms == pytest.approx(29 + 40 + 150 + 19 + 29)
    # plus the HTTP API and the stream: half the 200 ms poll and a Query (p99: 0.99 of it and a Query's p99)
    assert m.client_p50_ms == pytest.approx(84 + 7 + 100 + 1)
    assert m.client_p99_ms == pytest.approx(267 + 14 + 198 + 2)
    assert line(m, "Step Functions transitions").count == 3
    assert line(m, "DynamoDB: B").count == 2  # the overlapping GetItems and the write under the model are not
    assert line(m, "Lambda invoke overhead").count == 3
    assert m.assumed_p50_ms == pytest.approx(30)  # the transitions' figure is marked an assumption
    assert m.excluded["model_ms_local"] == pytest.approx(40)
    assert not m.cold_starts


def test_first_turn_after_idle_pays_a_cold_start_per_function() -> None:
    m = lm.model_turn(make_turn(), FIGURES, config(), "cold")
    assert [(c.function, c.how) for c in m.cold_starts] == [
        ("api", "cold"),
        ("step_a", "cold"),
        ("step_b", "cold"),
    ]
    # platform 100 + measured init x1 (p99: 200 + init x2)
    assert m.server_p50_ms == pytest.approx(84 + 150 + 120 + 130)
    assert m.server_p99_ms == pytest.approx(267 + 300 + 240 + 260)


def test_snapstart_restores_and_prewarmed_functions_follow_the_config() -> None:
    m = lm.model_turn(
        make_turn(), FIGURES, config(step_a={"snapstart": True}, step_b={"prewarmed": True}), "cold"
    )
    assert [(c.function, c.how) for c in m.cold_starts] == [
        ("api", "cold"), ("step_a", "snapstart"), ("step_b", "prewarmed"),
    ]  # fmt: skip
    assert m.server_p50_ms == pytest.approx(84 + 150 + 50)


def test_an_environment_that_is_free_again_is_warm() -> None:
    turn = make_turn()
    turn.invocations.append(inv("step_a", "a-2", 0.121, 0.125))  # after a-1 ended: the same environment
    turn.invocations.append(inv("step_a", "a-3", 0.122, 0.126))  # while a-2 runs: a second one
    assert lm._environments(turn) == {"api-1": True, "a-1": True, "b-1": True, "a-2": False, "a-3": True}


def test_a_turn_that_publishes_nothing_is_an_error_that_says_so() -> None:
    turn = make_turn()
    turn.sdk_calls[-1].markers = []
    with pytest.raises(lm.PathError, match="nothing the client waits for"):
        lm.critical_path(turn, {"api", "step_a", "step_b"})


def test_the_shipped_figures_load_and_cite_a_source_each() -> None:
    figures = lm.Figures.load()
    for name, value in figures:
        if isinstance(value, lm.Figure | lm.Factor):
            assert value.source.startswith("http"), name
            assert value.says, name


def _starting_while_appending(append_ms: float) -> lm.TurnTrace:
    """The API starts the execution (thread 2) while its append runs (thread 1), as a post without an
    idempotency key does (skyloop.turns.lifecycle._append_starting)."""
    turn = make_turn()
    turn.sdk_calls[1:3] = [
        call("api-1", "TransactWriteItems", 0.010, 0.010 + append_ms / 1000, tid=1),
        call("api-1", "StartExecution", 0.009, 0.014, tid=2),
    ]
    return turn


def test_an_append_made_while_the_execution_starts_counts_only_beyond_the_start() -> None:
    # Given the append alongside the start, priced below what the start, its transition and the
    # invocation take (4 + 20 + 10 + 3 = 37 ms p50; 8 + 40 + 50 + 9 = 107 p99)
    turn = _starting_while_appending(append_ms=5)
    api = next(h for h in lm.critical_path(turn, {"api", "step_a", "step_b"}) if h.kind == "invoke")
    assert [c.op for c in api.calls] == ["GetItem", "StartExecution"]
    assert [c.op for c in api.alongside] == ["TransactWriteItems"]
    m = lm.model_turn(turn, FIGURES, config(), "warm")
    # Then the path is the warm one without the append (5 ms p50), and its excess is nothing
    assert m.server_p50_ms == pytest.approx(13 + 20 + 30 + 8 + 13 - 5)
    assert line(m, "turn's append beyond its start (alongside)").p50_ms == 0
    assert "(TransactWriteItems alongside the start)" in m.path[1]


def test_an_append_slower_than_the_execution_start_adds_what_the_first_step_waits() -> None:
    # Given an append priced above the start's budget (a 5-item transaction at 50 / 150 ms)
    figures = FIGURES.model_copy(update={"dynamodb_transact_write": lm.Figure.model_validate(fig(50, 150))})
    m = lm.model_turn(_starting_while_appending(append_ms=5), figures, config(), "warm")
    # Then the first step's wait for it is on the path: 50 - 37 p50, 150 - 107 p99
    extra = line(m, "turn's append beyond its start (alongside)")
    assert extra.p50_ms == pytest.approx(13)
    assert extra.p99_ms == pytest.approx(43)
