"""The ``scripted`` harness: answers from the agent spec's script, chosen by the conversation alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from skyloop.bundles import load_agent_spec_dict
from skyloop.errors import InvalidInputError, ModelCallError
from skyloop.harnesses import caller_for, scripted
from skyloop.models.agent import Agent, AgentSpec
from skyloop.models.session import ClientTool, ConversationItem
from tests.unit.test_turns import World

GLOB = ClientTool(name="Glob")
READ = ClientTool(name="Read")

SCRIPT: list[dict[str, Any]] = [
    {"text": "Hello from the script."},
    {"match": "#files", "tool_calls": [{"name": "Glob", "arguments": {"pattern": "*.py"}}]},
    {"match": "#files", "tool_calls": [{"name": "Read", "arguments": '{"file_path": "a.py"}'}]},
    {"match": "#files", "text": "Read it: {{output}}"},
    {
        "match": "#files-two",
        "tool_calls": [{"name": "Glob"}, {"name": "Read", "arguments": {"file_path": "b"}}],
    },
    {"match": "#files-two", "text": "both done"},
]


def spec(script: Any = SCRIPT, **executor: Any) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": "scripted",
            "executor": {"harness": "scripted", "model": "smoke", "script": script, **executor},
        }
    )


def item(kind: str, position: int, **data: Any) -> ConversationItem:
    return ConversationItem(id=f"i{position}", type=kind, created_at=0, data=data, position=position)


def user(position: int, text: str) -> ConversationItem:
    return item("message", position, role="user", content=[{"type": "input_text", "text": text}])


def call(position: int, call_id: str, name: str = "Glob") -> ConversationItem:
    return item("function_call", position, call_id=call_id, name=name, arguments="{}")


def output(position: int, call_id: str, text: str) -> ConversationItem:
    return item("function_call_output", position, call_id=call_id, output=text)


def answer(items: list[ConversationItem], agent: AgentSpec | None = None, **kw: Any) -> tuple[Any, list[str]]:
    deltas: list[str] = []
    result = scripted.call_model(agent or spec(), items, [GLOB, READ], deltas.append, **kw)
    return result, deltas


# --------------------------------------------------------------------------- whole turns
def scripted_world(script: list[dict[str, Any]] = SCRIPT) -> World:
    world = World()
    world.agent = Agent(id=uuid.uuid4().hex, name="scripted", created_at=1, spec=spec(script))
    world.store.put_agent(world.agent)
    return world


def test_a_client_tool_turn_follows_the_script_to_its_text() -> None:
    # Given a scripted agent and a message carrying the #files token
    world = scripted_world()
    state = world.start("please look #files", [GLOB, READ])
    # When the turn runs with the real harness and the client answers each call
    state = world.run(state, caller_for("scripted"), answers={"Glob": "a.py\nb.py", "Read": "print('a')"})
    # Then the turn made the two scripted calls, in order, and ended with the scripted text
    assert state.next == "stop"
    items = world.store.list_items(world.sid)
    assert [(i.type, i.data.get("name")) for i in items] == [
        ("message", None),
        ("function_call", "Glob"),
        ("function_call_output", None),
        ("function_call", "Read"),
        ("function_call_output", None),
        ("message", None),
    ]
    assert json.loads(items[1].data["arguments"]) == {"pattern": "*.py"}
    assert json.loads(items[3].data["arguments"]) == {"file_path": "a.py"}
    # And {{output}} became the newest output the model was given
    assert items[-1].data["content"][0]["text"] == "Read it: print('a')"


def test_a_second_turn_starts_the_script_again() -> None:
    world = scripted_world()
    tools = [GLOB, READ]
    world.run(world.start("#files", tools), caller_for("scripted"), answers={"Glob": "x", "Read": "one"})
    world.run(
        world.start("#files again", tools), caller_for("scripted"), answers={"Glob": "y", "Read": "two"}
    )
    texts = [
        i.data["content"][0]["text"]
        for i in world.store.list_items(world.sid)
        if i.data.get("role") == "assistant"
    ]
    assert texts == ["Read it: one", "Read it: two"]
    call_ids = [i.data["call_id"] for i in world.store.list_items(world.sid) if i.type == "function_call"]
    assert len(set(call_ids)) == 4, "call ids are unique per turn"


# ------------------------------------------------------------------------- choosing answers
def test_input_without_a_token_gets_the_answers_without_match() -> None:
    result, deltas = answer([user(1, "hi there")])
    assert (result.text, result.calls, result.model) == ("Hello from the script.", [], "smoke")
    assert "".join(deltas) == result.text
    assert len(deltas) == 4, "streamed word by word"


def test_tool_calls_come_out_with_their_arguments_and_ids() -> None:
    result, _ = answer([user(1, "go #files-two")])  # the longer token wins over #files
    assert [(c.name, json.loads(c.arguments)) for c in result.calls] == [
        ("Glob", {}),
        ("Read", {"file_path": "b"}),
    ]
    assert [c.call_id.split("_")[:3] for c in result.calls] == [["call", "s0", "0"], ["call", "s0", "1"]]
    assert result.text == ""


def test_the_answer_index_counts_answers_since_the_input_even_with_parallel_calls() -> None:
    # Given the two parallel calls of answer 0, recorded each with its output (the turn's order)
    first, _ = answer([user(1, "go #files-two")])
    c0, c1 = (c.call_id for c in first.calls)
    items = [
        user(1, "go #files-two"),
        call(2, c0),
        output(3, c0, "x"),
        call(4, c1, "Read"),
        output(5, c1, "y"),
    ]
    # Then the next model call gets answer 1, and does so every time it is asked (a retried step)
    assert answer(items)[0].text == "both done"
    assert answer(items)[0].text == "both done"


def test_calls_before_the_input_do_not_count() -> None:
    first, _ = answer([user(1, "#files")])
    (c0,) = (c.call_id for c in first.calls)
    history = [user(1, "#files"), call(2, c0), output(3, c0, "x")]
    # a new input (even with the same text) starts again at its first answer
    result, _ = answer([*history, user(4, "#files")])
    assert [c.name for c in result.calls] == ["Glob"]


def test_running_past_the_script_fails_the_call() -> None:
    items = [user(1, "hi"), call(2, "call_s0_0_" + "0" * 12)]  # an id of another input: ignored
    assert answer(items)[0].text == "Hello from the script."
    first, _ = answer([user(1, "#files-two")])
    c0, c1 = (c.call_id for c in first.calls)
    again, _ = answer([user(1, "#files-two"), call(2, c0), call(3, c1)])
    assert again.text == "both done"
    done = [user(1, "#files-two"), call(2, c0), call(3, c1), call(4, c0.replace("_s0_", "_s1_"))]
    with pytest.raises(ModelCallError, match="no answer #3") as exc:
        answer(done)
    assert exc.value.error_code == "model_error"


def test_no_candidates_at_all_fails_the_call() -> None:
    with pytest.raises(ModelCallError, match="no answer #1"):
        answer([user(1, "hi")], spec([{"match": "#x", "text": "only for #x"}]))


def test_delay_waits_before_the_first_word_and_words_are_paced() -> None:
    agent = spec([{"text": "one two three", "delay_ms": 100, "word_delay_ms": 50}])
    started = time.monotonic()
    result, deltas = answer([user(1, "hi")], agent)
    assert time.monotonic() - started >= 0.2
    assert deltas == ["one ", "two ", "three"]
    assert result.text == "one two three"


def test_a_delay_past_the_timeout_is_a_model_timeout() -> None:
    agent = spec([{"text": "late", "delay_ms": 5000}])
    started = time.monotonic()
    with pytest.raises(ModelCallError) as exc:
        answer([user(1, "hi")], agent, timeout_s=0.1)
    assert exc.value.error_code == "model_timeout"
    assert time.monotonic() - started < 2


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("script", "message"),
    [
        (None, "script is required"),
        ([], "list of 1 to 200 answers"),
        ("say hi", "list of 1 to 200 answers"),
        ([{}], "script[0]: an answer needs text, tool_calls or both"),
        (
            [{"text": "ok"}, {"tool_calls": [{"arguments": {}}]}],
            "script[1].tool_calls[0].name: Field required",
        ),
        ([{"tool_calls": [{"name": "no spaces"}]}], "script[0].tool_calls[0].name"),
        ([{"tool_calls": [{"name": "Glob", "arguments": "[1, 2]"}]}], "script[0].tool_calls[0].arguments"),
        ([{"tool_calls": [{"name": "Glob", "arguments": "{not json"}]}], "script[0].tool_calls[0].arguments"),
        ([{"text": "x", "delay_ms": -1}], "script[0].delay_ms"),
        ([{"text": "x", "delay_ms": 300_001}], "script[0].delay_ms"),
        ([{"text": "x", "surprise": True}], "script[0].surprise: Extra inputs are not permitted"),
        ([{"text": "x", "match": ""}], "script[0].match"),
    ],
)
def test_bad_scripts_are_refused_at_registration_as_400(script: Any, message: str) -> None:
    executor: dict[str, Any] = {"harness": "scripted", "model": "smoke"}
    if script is not None:
        executor["script"] = script
    with pytest.raises(InvalidInputError) as exc:
        load_agent_spec_dict({"name": "bad", "executor": executor})
    assert exc.value.status == 400
    assert exc.value.message.startswith("invalid agent spec: executor: ")
    assert message in exc.value.message


def test_a_valid_script_is_kept_with_the_spec() -> None:
    agent = load_agent_spec_dict(
        {"name": "ok", "executor": {"harness": "scripted", "model": "m", "script": SCRIPT}}
    )
    assert agent.public_dict()["executor"]["script"] == SCRIPT


def test_the_script_schema_is_imported_only_by_agents_that_use_it() -> None:
    code = (
        "import sys\n"
        "from skyloop.models.agent import AgentSpec\n"
        "AgentSpec.model_validate({'name': 'a', 'executor': {'model': 'gpt'}})\n"
        "assert 'skyloop.models.script' not in sys.modules\n"
        "AgentSpec.model_validate({'name': 'a', 'executor': {'harness': 'scripted', 'model': 'm',"
        " 'script': [{'text': 'hi'}]}})\n"
        "assert 'skyloop.models.script' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
