"""How ``skyloop chat`` shows a turn: streamed text, tool calls and outputs, failures, history, colours."""

from __future__ import annotations

import io
from typing import Any

import pytest

from skyloop.chat._render import Renderer, Style, short_args, short_output, truncate, truncate_middle
from skyloop.client import Item, parse_event

RESP = "resp_1"


def ev(payload: dict[str, Any]) -> Any:
    return parse_event(payload)


def delta(text: str, message_id: str | None = "msg_1") -> Any:
    return ev({"type": "response.output_text.delta", "delta": text, "message_id": message_id})


def item_done(item: dict[str, Any]) -> Any:
    return ev({"type": "response.output_item.done", "item": {"response_id": RESP, **item}})


def call(call_id: str, name: str, arguments: str, status: str = "action_required") -> Any:
    return item_done(
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "status": status}
    )


def output(call_id: str, text: str) -> Any:
    return item_done(
        {"type": "function_call_output", "call_id": call_id, "output": text, "status": "completed"}
    )


def assistant(text: str, item_id: str = "msg_1") -> Any:
    return item_done(
        {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
    )


def render(*events: Any, style: Style | None = None) -> str:
    out = io.StringIO()
    renderer = Renderer(out, style)
    renderer.start_turn()
    for event in events:
        renderer.event(event)
    renderer.end_turn()
    return out.getvalue()


# ------------------------------------------------------------------------- pieces
def test_truncate_and_truncate_middle() -> None:
    assert truncate("short", 10) == "short"
    assert truncate("0123456789abc", 10) == "012345678…"
    assert len(truncate("x" * 500, 40)) == 40
    cut = truncate_middle('"/very/long/path/to/some/deeply/nested/file.py"', 30)
    assert len(cut) == 30
    assert cut.endswith('nested/file.py"')
    assert "…" in cut


def test_short_args_puts_the_key_argument_first_and_cuts_long_values() -> None:
    assert (
        short_args("Bash", {"timeout": 5000, "command": "ls -la"}) == 'Bash(command="ls -la", timeout=5000)'
    )
    text = short_args("Write", {"content": "x" * 300, "file_path": "/tmp/a.txt"})
    assert text.startswith('Write(file_path="/tmp/a.txt", content="xxx')
    assert len(text) < 160
    assert short_args("get_current_time", {}) == "get_current_time()"
    assert short_args("Edit", {"file_path": "é.txt"}) == 'Edit(file_path="é.txt")'


def test_short_output_keeps_the_first_lines_and_counts_the_rest() -> None:
    assert short_output("one\ntwo\n") == ["one", "two"]
    assert short_output("") == [""]
    many = "\n".join(str(i) for i in range(10))
    assert short_output(many) == ["0", "1", "2", "3", "… (+6 more lines)"]
    assert short_output("a\nb\nc\nd\ne") == ["a", "b", "c", "d", "… (+1 more line)"]
    assert short_output("y" * 1000)[0].endswith("…")


# ------------------------------------------------------------------------- events
def test_streamed_text_is_written_as_it_arrives_and_not_repeated_by_the_message() -> None:
    out = io.StringIO()
    renderer = Renderer(out)
    renderer.event(delta("Hel"))
    assert out.getvalue() == "Hel"  # live, before the message is done
    renderer.event(delta("lo!"))
    renderer.event(assistant("Hello!"))
    assert out.getvalue() == "Hello!\n"


def test_a_message_that_was_not_streamed_is_printed_whole() -> None:
    assert render(assistant("Only at the end.")) == "Only at the end.\n"


def test_tool_call_and_its_short_output_render_once_on_their_own_lines() -> None:
    text = render(
        delta("Let me look.", "msg_0"),
        call("c1", "Glob", '{"pattern": "*.py"}'),
        call("c1", "Glob", '{"pattern": "*.py"}', status="completed"),  # the same call, answered
        output("c1", "a.py\nb.py\nc.py\nd.py\ne.py\nf.py"),
        delta("Six files.", "msg_1"),
        assistant("Six files.", "msg_1"),
    )
    assert text == (
        "Let me look.\n"
        '● Glob(pattern="*.py")\n'
        "  ⎿ a.py\n"
        "    b.py\n"
        "    c.py\n"
        "    d.py\n"
        "    … (+2 more lines)\n"
        "Six files.\n"
    )


def test_failures_cancellation_and_incomplete_responses_get_a_clear_line() -> None:
    failed = ev(
        {
            "type": "response.failed",
            "response": {
                "id": RESP,
                "status": "failed",
                "error": {"code": "model_error", "message": "429 from model"},
            },
        }
    )
    assert render(delta("partial"), failed) == "partial\n✗ response failed: model_error: 429 from model\n"
    could_not_start = ev(
        {
            "type": "session.status",
            "status": "failed",
            "error": {"code": "runner_unavailable", "message": "no runner"},
        }
    )
    assert render(could_not_start) == "✗ response failed: runner_unavailable: no runner\n"
    assert render(failed, could_not_start).count("response failed") == 1
    cancelled = ev({"type": "response.cancelled", "response": {"id": RESP, "status": "cancelled"}})
    assert render(delta("half"), cancelled) == "half\ninterrupted\n"
    incomplete = ev({"type": "response.incomplete", "response": {"id": RESP, "status": "incomplete"}})
    assert render(incomplete) == "(the response is incomplete)\n"


def test_events_with_nothing_to_show_print_nothing() -> None:
    quiet = [
        ev({"type": "session.heartbeat"}),
        ev({"type": "session.status", "status": "running", "response_id": RESP}),
        ev({"type": "response.in_progress", "response": {"id": RESP}}),
        ev({"type": "session.input.consumed", "data": {"item_id": "m1"}}),
        ev({"type": "something.new", "x": 1}),
    ]
    assert render(*quiet) == ""


def test_declined_and_cancelled_outputs_are_highlighted_when_colours_are_on() -> None:
    text = render(output("c1", "Error: the user declined to run Write"), style=Style(True))
    assert "\033[31mError: the user declined to run Write\033[0m" in text
    text = render(output("c1", "fine"), style=Style(True))
    assert "\033[2mfine\033[0m" in text


def test_history_items_render_like_the_live_turn() -> None:
    items = [
        Item.model_validate(i)
        for i in (
            {
                "id": "1",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "list\nfiles"}],
            },
            {
                "id": "2",
                "type": "function_call",
                "call_id": "c1",
                "name": "Glob",
                "arguments": '{"pattern": "*"}',
            },
            {"id": "3", "type": "function_call_output", "call_id": "c1", "output": "a.py"},
            {
                "id": "4",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "One."}],
            },
            {
                "id": "5",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "[System: interrupted]\nThe user interrupted."}],
            },
        )
    ]
    out = io.StringIO()
    renderer = Renderer(out)
    for item in items:
        renderer.history_item(item)
    assert out.getvalue() == '> list files\n● Glob(pattern="*")\n  ⎿ a.py\nOne.\ninterrupted\n'


# ------------------------------------------------------------------------- colours
class _Stream(io.StringIO):
    def __init__(self, tty: bool, encoding: str = "utf-8") -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


@pytest.mark.parametrize(
    ("tty", "env", "colour"),
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"NO_COLOR": ""}, False),  # set at all means no colour
        (True, {"TERM": "dumb"}, False),
        (False, {}, False),
    ],
)
def test_colours_only_on_a_terminal_without_no_color(tty: bool, env: dict[str, str], colour: bool) -> None:
    style = Style.detect(_Stream(tty), env)
    assert style.enabled is colour
    assert (style("red", "x") != "x") is colour


def test_ascii_marks_when_the_stream_cannot_encode_unicode() -> None:
    style = Style.detect(_Stream(False, "ascii"), {})
    assert (style.call_mark, style.output_mark.strip()) == ("*", "|")
    out = _Stream(False, "ascii")
    renderer = Renderer(out, style)
    renderer.event(call("c1", "Bash", '{"command": "ls"}'))
    renderer.event(output("c1", "a"))
    assert out.getvalue() == '* Bash(command="ls")\n  | a\n'


def test_a_retried_model_call_is_marked_before_its_text_starts_again() -> None:
    # Given text streamed by a model call that the service then retried
    text = render(
        delta("Half an ans", message_id=None),
        ev({"type": "response.retry", "response_id": RESP, "attempt": 1}),
        delta("A whole answer.", message_id=None),
    )
    # Then the retry is announced on its own line between the two attempts
    first, note, second = text.splitlines()
    assert first == "Half an ans"
    assert "retried" in note
    assert second == "A whole answer."
