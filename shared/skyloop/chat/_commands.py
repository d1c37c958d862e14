"""``skyloop chat``, ``skyloop sessions ls|show|rm`` and ``skyloop agents ls|register``.

Each command takes the parsed ``argparse`` namespace and returns an exit
status. Failures print ``skyloop: <code>: <message>`` to stderr and return 1
(2 for a bad option value); ``--json`` prints the server's JSON answer as is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skyloop.chat._api import find_agent
from skyloop.chat._common import _FAILURES, _client, _fail, _print_json, _tolerant
from skyloop.chat._render import Renderer, Style
from skyloop.chat._repl import CONFIRM_TOOLS, EXIT_ABORTED, ChatRepl
from skyloop.chat._tables import agents_table, session_details, sessions_table
from skyloop.client import Client, ToolBox

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import TextIO

    from skyloop.client import Item

__all__ = ["DEFAULT_AGENT", "HISTORY_ITEMS", "agents_command", "chat_command", "sessions_command"]

DEFAULT_AGENT = "coder"
HISTORY_ITEMS = 10


# ------------------------------------------------------------------------------ chat
def tool_spec(name: str | None) -> str | None:
    """The SDK tool spec for ``--tools``: a known tool-set name, or ``None`` for ``none``."""
    if name is None or name.strip().lower() in ("", "none"):
        return None
    from skyloop.client_tools import get_tool_set

    get_tool_set(name)  # ValueError naming the available sets
    return name


def line_reader(stdin: TextIO, stdout: TextIO) -> tuple[Callable[[str], str], Callable[[], str] | None]:
    """``(read_line, pending_input)``: ``input`` with readline editing on a terminal (and its
    line buffer); on a pipe, a reader that echoes each line so transcripts read well."""
    if stdin.isatty():
        try:
            import readline  # enables editing and history for input()
        except ImportError:  # not on every platform
            return input, None
        return input, readline.get_line_buffer

    def read(prompt: str) -> str:
        stdout.write(prompt)
        stdout.flush()
        line = stdin.readline()
        if not line:
            raise EOFError
        line = line.rstrip("\n")
        stdout.write(line + "\n")
        return line

    return read, None


@dataclass
class OpenedSession:
    id: str
    agent: str
    history: list[Item] = field(default_factory=list)
    resumed: bool = False
    status: str = "idle"


def open_session(client: Client, args: argparse.Namespace) -> OpenedSession:
    """The session the chat's options name: resumed, created from an agent file, or new for an agent."""
    if args.session:
        snapshot = client.get_session(args.session)
        page = client.list_items(snapshot.id, limit=HISTORY_ITEMS, order="desc")
        history = list(reversed(page.data))
        return OpenedSession(snapshot.id, snapshot.agent_name or "?", history, True, snapshot.status)
    if args.agent_file:
        created = client.register_agent(args.agent_file)
        return OpenedSession(created.session_id, created.agent_name)
    agent = find_agent(client, args.agent or DEFAULT_AGENT)
    snapshot = client.create_session(agent.id)
    return OpenedSession(snapshot.id, agent.name)


def chat_header(
    *, agent: str, session_id: str, url: str, tools: list[str], yes: bool, resumed: bool, style: Style
) -> str:
    dot = " · " if style.unicode else " - "
    verb = "resumed session" if resumed else "session"
    lines = [style("bold", f"skyloop chat{dot}agent {agent}{dot}{verb} {session_id}")]
    if tools:
        asks = [t for t in tools if t in CONFIRM_TOOLS]
        policy = "runs them without asking" if yes else f"asks before {', '.join(asks)}" if asks else ""
        tool_line = f"{url}{dot}client tools: {', '.join(tools)}"
        lines.append(style("dim", f"{tool_line} ({policy})" if policy else tool_line))
    else:
        lines.append(style("dim", f"{url}{dot}no client tools"))
    lines.append(style("dim", f"Ctrl-C interrupts a turn{dot}Ctrl-D or /exit quits{dot}/help"))
    return "\n".join(lines) + "\n"


def chat_command(
    args: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    read_line: Callable[[str], str] | None = None,
    client: Client | None = None,
) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    _tolerant(stdout)
    try:
        tools = tool_spec(args.tools)
    except ValueError as exc:
        print(f"skyloop chat: --tools: {exc}", file=stderr)
        return 2
    try:
        client = client or _client(args)
    except _FAILURES as exc:
        return _fail(exc, getattr(args, "url", None), err=stderr)
    style = Style.detect(stdout)
    renderer = Renderer(stdout, style)
    with client:
        try:
            opened = open_session(client, args)
        except _FAILURES as exc:
            return _fail(exc, client.base_url, err=stderr)
        except KeyboardInterrupt:
            return EXIT_ABORTED
        try:  # the agent's own server tools (hosted Bash, Read...) win: the chat does not offer their names
            server = {
                t.get("name")
                for t in client.get_session_agent(opened.id).tools or []
                if t.get("runtime") == "server"
            }
        except _FAILURES:
            server = set()
        box = ToolBox.from_spec(tools).without({str(n) for n in server if n})
        names = box.names
        renderer.write(
            chat_header(
                agent=opened.agent,
                session_id=opened.id,
                url=client.base_url,
                tools=names,
                yes=args.yes,
                resumed=opened.resumed,
                style=style,
            )
        )
        pending_input = None
        if read_line is None:
            read_line, pending_input = line_reader(stdin, stdout)
        repl = ChatRepl(
            client,
            opened.id,
            renderer,
            tools=box,
            yes=args.yes,
            read_line=read_line,
            pending_input=pending_input,
            cwd=os.getcwd(),
        )
        repl.show_history(opened.history, status=opened.status)
        try:
            return repl.run()
        except KeyboardInterrupt:
            renderer.newline_if_needed()
            return EXIT_ABORTED


# -------------------------------------------------------------------------- sessions
def sessions_command(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    client: Client | None = None,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    _tolerant(stdout)
    base_url = getattr(args, "url", None)
    try:
        client = client or _client(args)
        base_url = client.base_url
        with client:
            if args.action == "ls":
                listed = client.with_raw_response.list_sessions(
                    agent_name=args.agent, limit=args.limit, include_archived=args.archived or None
                )
                body, text = listed.json(), sessions_table(listed.parse().data)
            elif args.action == "show":
                shown = client.with_raw_response.get_session(args.session_id)
                body, text = shown.json(), session_details(shown.parse())
            else:  # rm
                deleted = client.with_raw_response.delete_session(args.session_id)
                body, text = deleted.json(), f"deleted session {deleted.parse().id}"
    except _FAILURES as exc:
        return _fail(exc, base_url, err=stderr)
    if args.json:
        _print_json(body, stdout)
    else:
        stdout.write(text + "\n")
    return 0


# ---------------------------------------------------------------------------- agents
def agents_command(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    client: Client | None = None,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    _tolerant(stdout)
    base_url = getattr(args, "url", None)
    try:
        client = client or _client(args)
        base_url = client.base_url
        with client:
            if args.action == "ls":
                listed = client.with_raw_response.list_agents(limit=args.limit)
                body, text = listed.json(), agents_table(listed.parse().data)
            else:  # register
                registered = client.with_raw_response.create_agent(args.file)
                agent = registered.parse()
                body, text = (
                    registered.json(),
                    f"registered agent {agent.name} ({agent.id})\n\n{agents_table([agent])}",
                )
    except _FAILURES as exc:
        return _fail(exc, base_url, err=stderr)
    if args.json:
        _print_json(body, stdout)
    else:
        stdout.write(text + "\n")
    return 0


# -------------------------------------------------------------------------- webhooks
def webhooks_command(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    client: Client | None = None,
) -> int:
    """``skyloop webhooks add|ls|rm|deliveries|test``."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    _tolerant(stdout)
    base_url = getattr(args, "url", None)
    try:
        client = client or _client(args)
        base_url = client.base_url
        with client:
            body, text = _webhooks_action(client, args)
    except _FAILURES as exc:
        return _fail(exc, base_url, err=stderr)
    if args.json:
        _print_json(body, stdout)
    else:
        stdout.write(text + "\n")
    return 0


def _webhooks_action(client: Client, args: argparse.Namespace) -> tuple[Any, str]:
    raw = client.with_raw_response
    if args.action == "add":
        added = raw.create_webhook(
            args.webhook_url,
            events=args.event or None,
            description=args.description,
            all_sessions=args.all or None,
            format=args.format,
        )
        endpoint = added.parse()
        return added.json(), (
            f"added webhook {endpoint.id} -> {endpoint.url} ({', '.join(endpoint.events) or 'every event'})\n"
            f"signing secret (shown once): {endpoint.secret}"
        )
    if args.action == "ls":
        listed = raw.list_webhooks()
        rows = [
            f"{e.id}  {e.status:<8}  {e.url}  {','.join(e.events) or '*'}"
            + (f"  ({e.disabled_reason})" if e.disabled_reason else "")
            for e in listed.parse().data
        ]
        return listed.json(), "\n".join(rows) or "no webhooks"
    if args.action == "rm":
        deleted = raw.delete_webhook(args.webhook_id)
        return deleted.json(), f"deleted webhook {deleted.parse().id}"
    if args.action == "deliveries":
        page = raw.list_webhook_deliveries(args.webhook_id, limit=args.limit)
        lines = []
        for d in page.parse().data:
            tries = ", ".join(
                f"{a.response_code or a.error or a.status} in {a.latency_ms} ms" for a in d.attempts
            )
            lines.append(f"{d.id}  {d.event_type:<30}  {d.status:<9}  [{tries}]")
        return page.json(), "\n".join(lines) or "no deliveries"
    tested = raw.test_webhook(args.webhook_id)
    result = tested.parse()
    verdict = "ok" if result.success else "FAILED"
    return tested.json(), f"test {verdict}: {result.status_code or result.error} in {result.latency_ms} ms"


def _schedules(args: argparse.Namespace) -> int:
    from skyloop.chat._schedules import schedules_command

    return schedules_command(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "chat": chat_command,
    "sessions": sessions_command,
    "agents": agents_command,
    "webhooks": webhooks_command,
    "schedules": _schedules,
}


def run(args: argparse.Namespace) -> int:
    """Entry point for ``skyloop.cli``: dispatch on ``args.command``."""
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # `skyloop sessions ls | head`: the reader left. Point stdout at /dev/null so the
        # interpreter's final flush cannot fail again, and stay quiet like other Unix tools.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
