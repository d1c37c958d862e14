"""What the terminal shows: streamed text, tool calls and their outputs, failures, history.

Everything writes to one text stream through :class:`Renderer`, which keeps
track of whether the cursor sits at the start of a line, so a tool call or a
notice printed after streamed text never glues onto it. Colours are ANSI
only, and only when the stream is a terminal and ``NO_COLOR`` is unset.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from skyloop.client import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseCancelled,
    ResponseFailed,
    ResponseIncomplete,
    SessionStatus,
)

if TYPE_CHECKING:
    from typing import TextIO

    from skyloop.client import Item, TaskError

__all__ = [
    "INTERRUPT_MARKER",
    "Renderer",
    "Style",
    "short_args",
    "short_output",
    "truncate",
]

INTERRUPT_MARKER = "[System: interrupted]"
ARG_CHARS = 40
KEY_ARG_CHARS = 100
CALL_CHARS = 200
OUTPUT_LINES = 4
OUTPUT_LINE_CHARS = 160

# The argument that says the most about a call of each coding tool, shown first.
_KEY_ARGS = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "Glob": "pattern",
    "Grep": "pattern",
}


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[: max(limit, 0)]
    return text[: limit - 1] + "…"


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut in the middle (paths keep their file name), ending as it ended."""
    if len(text) <= limit or limit < 5:
        return truncate(text, limit)
    head = (limit - 1) // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def one_line(text: str) -> str:
    """Newlines and tabs shown as spaces, for table cells and summaries."""
    return " ".join(text.split())


def short_args(name: str, arguments: dict[str, Any]) -> str:
    """``Name(key=value, ...)`` on one line; values JSON-encoded and cut to a few dozen characters."""
    key_arg = _KEY_ARGS.get(name)
    keys = sorted(arguments, key=lambda k: k != key_arg)  # stable: the rest keep their order
    parts = []
    for key in keys:
        shown = json.dumps(arguments[key], ensure_ascii=False)
        shown = truncate_middle(shown, KEY_ARG_CHARS) if key == key_arg else truncate(shown, ARG_CHARS)
        parts.append(f"{key}={shown}")
    return truncate(f"{name}({', '.join(parts)})", CALL_CHARS)


def short_output(output: str, *, lines: int = OUTPUT_LINES, width: int = OUTPUT_LINE_CHARS) -> list[str]:
    """The first ``lines`` lines of a tool output, each cut to ``width``, plus a count of the rest."""
    all_lines = output.rstrip("\n").splitlines() or [""]
    shown = [truncate(line.rstrip().expandtabs(4), width) for line in all_lines[:lines]]
    rest = len(all_lines) - len(shown)
    if rest > 0:
        shown.append(f"… (+{rest} more line{'s' if rest != 1 else ''})")
    return shown


class Style:
    """ANSI styling that is a no-op when disabled."""

    CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

    def __init__(self, enabled: bool = False, *, unicode: bool = True) -> None:
        self.enabled = enabled
        self.unicode = unicode
        self.call_mark = "●" if unicode else "*"
        self.output_mark = "  ⎿ " if unicode else "  | "
        self.output_indent = "    "
        self.fail_mark = "✗" if unicode else "x"

    @classmethod
    def detect(cls, stream: TextIO, env: dict[str, str] | None = None) -> Style:
        """Colours when ``stream`` is a terminal and ``NO_COLOR`` is unset; Unicode marks when it can encode them."""
        env = dict(os.environ) if env is None else env
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        colour = tty and "NO_COLOR" not in env and env.get("TERM") != "dumb"
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "")
        return cls(colour, unicode=encoding in ("utf8", "utf8sig"))

    def __call__(self, style: str, text: str) -> str:
        if not self.enabled or not text:
            return text
        codes = ";".join(self.CODES[s] for s in style.split())
        return f"\033[{codes}m{text}\033[0m"


class Renderer:
    """Turns stream events (and stored items) into terminal output."""

    def __init__(self, out: TextIO, style: Style | None = None) -> None:
        self.out = out
        self.style = style or Style()
        self.at_line_start = True
        self._shown_calls: set[str] = set()
        self._streamed_messages: set[str] = set()
        self._streamed_anonymous = False
        self.failure_shown = False
        self.interrupted_shown = False

    # ---------------------------------------------------------------- primitives
    def write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.at_line_start = text.endswith("\n")
        self.out.flush()

    def line(self, text: str = "") -> None:
        """Print ``text`` on a line of its own."""
        self.newline_if_needed()
        self.write(text + "\n")

    def newline_if_needed(self) -> None:
        if not self.at_line_start:
            self.write("\n")

    def notice(self, text: str) -> None:
        self.line(self.style("dim", text))

    def error(self, code: str, message: str) -> None:
        self.line(self.style("red", f"{self.style.fail_mark} {code}: {message}"))

    def start_turn(self) -> None:
        self.failure_shown = False
        self.interrupted_shown = False
        self._streamed_anonymous = False

    def end_turn(self) -> None:
        self.newline_if_needed()

    def interrupted(self) -> None:
        if not self.interrupted_shown:
            self.interrupted_shown = True
            self.line(self.style("yellow", "interrupted"))

    # -------------------------------------------------------------------- events
    def event(self, event: Any) -> None:
        """Render one typed stream event; events with nothing to show are ignored."""
        if isinstance(event, OutputTextDelta):
            if event.message_id:
                self._streamed_messages.add(event.message_id)
            else:
                self._streamed_anonymous = True
            self.write(event.delta)
        elif isinstance(event, OutputItemDone):
            self.output_item(event.item)
        elif isinstance(event, ResponseFailed):
            self.failed(event.error)
        elif isinstance(event, SessionStatus):
            if event.status == "failed":  # a turn that could not start has no response.failed
                self.failed(event.error)
        elif isinstance(event, ResponseCancelled):
            self.interrupted()
        elif isinstance(event, ResponseIncomplete):
            self.notice("(the response is incomplete)")
        elif getattr(event, "type", None) == "response.retry":
            # The model step was retried after it had streamed: what follows replaces that text.
            self.newline_if_needed()
            self.notice("(the model call was retried; its answer starts again)")

    def failed(self, error: TaskError | None) -> None:
        if self.failure_shown:
            return
        self.failure_shown = True
        code = error.code if error else "unknown"
        message = error.message if error and error.message else "the turn failed"
        self.line(self.style("red", f"{self.style.fail_mark} response failed: {code}: {message}"))

    def output_item(self, item: Any) -> None:
        if isinstance(item, FunctionCallItem):
            if item.call_id in self._shown_calls:
                return  # the same call again, now answered
            self._shown_calls.add(item.call_id)
            self.call(item.name, item.parsed_arguments())
        elif isinstance(item, FunctionCallOutputItem):
            self.tool_output(item.output)
        elif isinstance(item, MessageItem) and item.role == "assistant":
            streamed = (item.id in self._streamed_messages) if item.id else False
            if not streamed and not self._streamed_anonymous:
                self.newline_if_needed()
                self.write(item.text)
            self._streamed_anonymous = False
            self.newline_if_needed()

    def call(self, name: str, arguments: dict[str, Any]) -> None:
        text = short_args(name, arguments)
        head, _, rest = text.partition("(")
        self.line(f"{self.style('cyan', self.style.call_mark)} {self.style('bold', head)}({rest}")

    def tool_output(self, output: str) -> None:
        lines = short_output(output)
        colour = "red" if output.startswith(("Error", "[Cancelled")) else "dim"
        for index, text in enumerate(lines):
            lead = self.style.output_mark if index == 0 else self.style.output_indent
            self.line(self.style("dim", lead) + self.style(colour, text))

    # ------------------------------------------------------------------- history
    def history_item(self, item: Item) -> None:
        """A stored item, as the live stream would have shown it."""
        data = item.data
        if item.type == "message":
            text = item.text.strip()
            if item.role == "user":
                if text.startswith(INTERRUPT_MARKER):
                    self.line(self.style("yellow", "interrupted"))
                else:
                    self.line(self.style("bold", "> ") + truncate(one_line(text), OUTPUT_LINE_CHARS))
            else:
                self.line(text)
        elif item.type == "function_call":
            call_id = str(data.get("call_id") or item.id)
            if call_id not in self._shown_calls:
                self._shown_calls.add(call_id)
                arguments = FunctionCallItem(
                    name=str(data.get("name") or "?"),
                    call_id=call_id,
                    arguments=data.get("arguments") or "{}",
                ).parsed_arguments()
                self.call(str(data.get("name") or "?"), arguments)
        elif item.type == "function_call_output":
            self.tool_output(str(data.get("output") or ""))
