"""The ``skyloop chat`` loop: read a line, run a turn, render it, repeat.

Keys:

- Enter sends the line as a message; the turn's events render as they arrive.
- Ctrl-C during a turn posts an interrupt and keeps reading until the turn
  ends (``interrupted``), then the prompt returns. A second Ctrl-C during the
  same turn quits at once (exit status 130).
- Ctrl-C at an empty prompt, Ctrl-D, or ``/exit`` quits (exit status 0); Ctrl-C
  over a half-typed line drops the line.

Tool calls are confirmed on the thread that iterates the turn (the SDK calls
``confirm`` after yielding the call's event), so the call is on screen before
the question, and answers never interleave with streamed text.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from skyloop.chat._api import describe_error
from skyloop.client import SessionStatus, SkyloopClientError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from skyloop.chat._render import Renderer
    from skyloop.client import Client, Item

__all__ = ["CONFIRM_TOOLS", "EXIT_ABORTED", "ChatRepl"]

CONFIRM_TOOLS = frozenset({"Bash", "Write", "Edit"})
"""Tools that change things on this machine: asked about before they run, unless ``--yes``."""
EXIT_ABORTED = 130
PROMPT = "> "
HELP = """\
Type a message and press Enter. The agent's client-side tools run here, in {cwd}.
  Ctrl-C        interrupt the running turn (twice: quit)
  Ctrl-D /exit  quit
  /interrupt    stop a turn this chat is not running (another client's, or one left parked)
  /help         this text
"""


class ChatRepl:
    """One chat over one session.

    Args:
        client: the SDK client (``client.session(...)`` drives each turn).
        session_id: the session to talk to.
        renderer: where output goes.
        tools: the SDK tool spec offered with every message (``"coding"``, ``None``, ...).
        yes: run Bash, Write and Edit without asking.
        read_line: reads one line after printing the prompt (``input`` by default);
            raises ``EOFError`` at end of input and ``KeyboardInterrupt`` on Ctrl-C.
        pending_input: what was typed at the prompt when Ctrl-C came (readline's buffer);
            Ctrl-C over a half-typed line drops the line instead of quitting.
        cwd: shown in ``/help``.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        renderer: Renderer,
        *,
        tools: Any = None,
        yes: bool = False,
        read_line: Callable[[str], str] = input,
        pending_input: Callable[[], str] | None = None,
        cwd: str = ".",
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.renderer = renderer
        self.yes = yes
        self.read_line = read_line
        self.pending_input = pending_input
        self.cwd = cwd
        self.session = client.session(session_id, tools=tools, confirm=self.confirm)

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        """Prompt and run turns until the user quits; returns the exit status."""
        while True:
            try:
                line = self.read_line(PROMPT)
            except EOFError:
                self.renderer.at_line_start = False  # the prompt line is still open
                self.renderer.newline_if_needed()
                return 0
            except KeyboardInterrupt:
                self.renderer.at_line_start = False
                self.renderer.newline_if_needed()
                if self.pending_input is not None and self.pending_input().strip():
                    continue  # Ctrl-C drops a half-typed line, as in a shell
                return 0
            self.renderer.at_line_start = True  # the terminal echoed the Enter
            text = line.strip()
            if not text:
                continue
            command = text.split()[0].lower()
            if command in ("/exit", "/quit"):
                return 0
            if command == "/help":
                self.renderer.write(HELP.format(cwd=self.cwd))
                continue
            if command == "/interrupt":
                self.interrupt_session()
                continue
            if not self.turn(text):
                return EXIT_ABORTED

    def turn(self, text: str) -> bool:
        """Run one turn to its end; False when the user pressed Ctrl-C twice to quit."""
        renderer = self.renderer
        renderer.start_turn()
        try:
            turn = self.session.send(text)
        except KeyboardInterrupt:
            # Ctrl-C before the post answered (a busy server may already run the turn): stop the session's turn
            renderer.at_line_start = False
            renderer.notice("interrupting…")
            self.interrupt_session()
            renderer.interrupted()
            renderer.end_turn()
            return True
        interrupted = False
        try:
            while True:
                try:
                    for event in turn:
                        renderer.event(event)
                        if interrupted and isinstance(event, SessionStatus) and event.status == "idle":
                            break  # the session stopped without a terminal event for our turn
                    break
                except KeyboardInterrupt:
                    renderer.at_line_start = False  # the terminal echoed ^C on the current line
                    if interrupted:
                        return False
                    interrupted = True
                    renderer.notice("interrupting… (Ctrl-C again to quit)")
                    try:
                        turn.interrupt()
                    except SkyloopClientError as exc:
                        interrupted = False  # nothing was stopped: say why instead
                        renderer.error(*describe_error(exc, self.client.base_url))
                        return True
        except SkyloopClientError as exc:
            renderer.error(*describe_error(exc, self.client.base_url))
        finally:
            turn.close()
            if interrupted:
                renderer.interrupted()
            renderer.end_turn()
        return True

    def interrupt_session(self) -> None:
        """Stop whatever turn the session is running (harmless when idle)."""
        try:
            self.client.interrupt(self.session_id)
        except SkyloopClientError as exc:
            self.renderer.error(*describe_error(exc, self.client.base_url))
            return
        self.renderer.notice("interrupt sent")

    def confirm(self, name: str, arguments: dict[str, Any]) -> bool:  # noqa: ARG002  (the ConfirmTool signature)
        """Ask before tools that change things here; any answer but y/yes declines."""
        if self.yes or name not in CONFIRM_TOOLS:
            return True
        self.renderer.newline_if_needed()
        try:
            answer = self.read_line(f"Run {name}? [y/N] ")
        except EOFError:
            self.renderer.at_line_start = False  # nothing echoed a newline
            return False
        except KeyboardInterrupt:
            self.renderer.at_line_start = False
            raise
        self.renderer.at_line_start = True
        return answer.strip().lower() in ("y", "yes")

    # ------------------------------------------------------------------ history
    def show_history(self, items: Iterable[Item], *, status: str = "idle") -> None:
        """The session's last items; a note when a turn is still running (nobody may be answering it)."""
        items = list(items)
        if items:
            self.renderer.notice(f"── last {len(items)} item{'s' if len(items) != 1 else ''} ──")
            for item in items:
                with contextlib.suppress(Exception):  # an odd stored item must not stop the resume
                    self.renderer.history_item(item)
            self.renderer.notice("──")
        if status == "running":
            self.renderer.notice(
                "a turn is still running in this session (another client's, or one left waiting "
                "for a tool); a new message joins it, /interrupt stops it"
            )
