"""The ``skyloop`` command.

Examples:
    skyloop dev --port 8080          # the local stack on moto, with the example agent ``coder``; data in ./.skyloop
    skyloop dev --ephemeral          # the same, keeping nothing; --data-dir PATH elsewhere, --reset to wipe it
    skyloop mock-llm --port 8089     # the scripted OpenAI-compatible model
    skyloop token create --table <TableName> --name laptop --principal alice   # prints a token once
    skyloop token revoke --table <TableName> <token id>
    skyloop chat --agent coder       # chat in the terminal; client-side tools run here
    skyloop sessions ls|show|rm      # add --json for the server's JSON
    skyloop agents ls|register FILE
    skyloop schedules add --agent coder --rrule 'FREQ=DAILY;BYHOUR=9' --timezone Europe/Berlin "Summarize the night"
    skyloop schedules ls|rm ID|run ID|runs ID
    skyloop smoke --endpoint URL [--token T]   # prove a running stack end to end (exit 0/1/2)
    skyloop webhooks add URL [--event agent.session.action_required]   # prints the signing secret once
    skyloop webhooks ls|rm ID|deliveries ID|test ID
    skyloop events tail [--endpoint-url MOTO_URL] [--bus NAME]   # lifecycle events from EventBridge, live
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skyloop", description="Serverless agent sessions on AWS.")
    sub = parser.add_subparsers(dest="command", required=True)
    dev = sub.add_parser(
        "dev", help="serve the local stack (moto DynamoDB + Step Functions + in-process Lambda)"
    )
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8080)
    dev.add_argument(
        "--require-token",
        action="store_true",
        help="require 'Authorization: Bearer <token>' as the cloud does",
    )
    dev.add_argument(
        "--lambda-runtime",
        choices=["process", "thread"],
        default=os.environ.get("SKYLOOP_LOCAL_LAMBDA", "process"),
        help="run handlers in worker processes, one invocation each at a time, as Lambda does "
        "(default), or in threads of the stack's process (for a debugger)",
    )
    dev.add_argument(
        "--lambda-tools",
        action="append",
        default=[p for p in os.environ.get("SKYLOOP_LAMBDA_TOOLS", "").split(os.pathsep) if p],
        metavar="FILE.py",
        help="a Python file whose (event, context) functions become local Lambda functions that agents "
        "can declare as tools ({type: lambda, function: <name>}); may be given more than once",
    )
    data = dev.add_mutually_exclusive_group()
    data.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("SKYLOOP_DATA_DIR") or ".skyloop"),
        metavar="PATH",
        help="where the stack keeps its tables, files and secrets between runs (default: ./.skyloop, "
        "or SKYLOOP_DATA_DIR); every acknowledged write is on disk",
    )
    data.add_argument(
        "--ephemeral",
        action="store_true",
        help="keep nothing: all data lives in memory and ends with the stack",
    )
    dev.add_argument(
        "--reset", action="store_true", help="delete everything in the data directory first, then start empty"
    )
    dev.add_argument(
        "--hosted-unisolated",
        action="store_true",
        default=os.environ.get("SKYLOOP_HOSTED_ISOLATION") == "none",
        help="run hosted tools' commands as plain processes when bubblewrap is not available (they can then "
        "reach anything your user can); without it such a stack refuses hosted tools",
    )
    mock = sub.add_parser("mock-llm", help="serve the scripted OpenAI-compatible mock model")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=8089)
    token = sub.add_parser("token", help="manage bearer tokens (stored as SHA-256 hashes in the table)")
    token.add_argument("action", choices=["create", "list", "revoke"])
    token.add_argument("value", nargs="?", help="revoke: the token or its id")
    token.add_argument("--name", default="default", help="create: a label for the token")
    token.add_argument(
        "--principal",
        default="local",
        help="create: whose token it is (each principal sees only its own agents and sessions)",
    )
    token.add_argument(
        "--scope",
        action="append",
        choices=["read", "write", "admin"],
        help="create: read, write (default: both) or admin (sees every principal's); repeatable",
    )
    token.add_argument("--table", default=os.environ.get("SKYLOOP_TABLE_NAME", "skyloop"))
    token.add_argument(
        "--endpoint-url", default=None, help="DynamoDB endpoint (the local stack's moto endpoint)"
    )
    token.add_argument("--region", default=None)
    _add_client_commands(sub)
    _add_smoke_command(sub)
    return parser


def _add_smoke_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    smoke = sub.add_parser(
        "smoke",
        help="check a running endpoint end to end (skyloop dev or a deployed stack); exit 0 pass, 1 fail, "
        "2 usage or unreachable",
        description="Runs the seed's client-tool scenario, a dropped and resumed stream, an approved and a "
        "declined server tool, an interrupt, two turns through the openai SDK's Agents API (/openai/v1), a "
        "lifecycle event delivered to a webhook endpoint, and bad inputs against the endpoint with a temporary "
        "scripted agent, then deletes what it made. One line per step with its latency, then PASS n/n or FAIL k/n.",
    )
    smoke.add_argument(
        "--endpoint", required=True, metavar="URL", help="the stack (EndpointUrl, or skyloop dev's URL)"
    )
    smoke.add_argument(
        "--token",
        default=None,
        help="bearer token (default: $SKYLOOP_TOKEN, then the config file's)",
    )
    smoke.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds per step (default 60)"
    )
    smoke.add_argument("--json", action="store_true", help="print the report as JSON instead of lines")
    smoke.add_argument(
        "--tool-function",
        default="smoke_echo",
        metavar="NAME_OR_ARN",
        help="the Lambda function of the approved server tool: smoke_echo on skyloop dev (default), "
        "the stack output SmokeToolArn in the cloud",
    )
    smoke.add_argument(
        "--only",
        action="append",
        metavar="STEP",
        help="run only these scenarios (repeatable or comma-separated): seed, resume, approve, decline, "
        "interrupt, openai, webhook, bad-inputs; health, auth, register and cleanup always run",
    )
    smoke.add_argument(
        "--keep", action="store_true", help="leave the smoke agent, sessions and webhook endpoint in place"
    )


def _smoke_command(args: argparse.Namespace) -> int:
    import json

    from skyloop import smoke

    only = frozenset(s.strip() for value in args.only or [] for s in value.split(",") if s.strip())
    unknown = only - set(smoke.SCENARIOS)
    if unknown or args.timeout <= 0:
        problem = f"unknown --only {', '.join(sorted(unknown))}" if unknown else "--timeout must be positive"
        print(f"skyloop smoke: {problem} (steps: {', '.join(smoke.SCENARIOS)})", file=sys.stderr)
        return 2
    if not args.endpoint.startswith(("http://", "https://")):
        print(f"skyloop smoke: --endpoint must be an http(s) URL, got {args.endpoint!r}", file=sys.stderr)
        return 2
    options = smoke.Options(
        endpoint=args.endpoint,
        token=args.token,
        timeout=args.timeout,
        tool_function=args.tool_function,
        keep=args.keep,
        only=only,
    )
    emit = None if args.json else (lambda step: print(step.line(), flush=True))
    try:
        report = smoke.run(options, emit)
    except smoke.Unreachable as exc:
        print(f"skyloop smoke: {exc}; is the URL right and the stack up?", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # cleanup has run (the steps' finally)
        print("skyloop smoke: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.summary(), flush=True)
    return 0 if report.ok else 1


def _add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``chat``, ``sessions``, ``agents`` and ``schedules``: the terminal client (skyloop.chat, imported when used)."""
    url = argparse.ArgumentParser(add_help=False)
    url.add_argument(
        "--url", help="the service (default: $SKYLOOP_URL, the config file's url, or http://127.0.0.1:8080)"
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print the server's JSON answer")

    chat = sub.add_parser(
        "chat", parents=[url], help="chat with an agent in the terminal; its client-side tools run here"
    )
    target = chat.add_mutually_exclusive_group()
    target.add_argument(
        "--agent", metavar="NAME", help="start a session with the newest version (default: coder)"
    )
    target.add_argument(
        "--agent-file",
        metavar="FILE",
        help="register this agent YAML (or bundle directory), then chat with it",
    )
    target.add_argument(
        "--session", metavar="ID", help="resume this session (its last items are shown first)"
    )
    chat.add_argument(
        "--tools",
        default="coding",
        metavar="SET",
        help="client-side tool set to offer: coding (default) or none",
    )
    chat.add_argument(
        "--yes", "-y", action="store_true", help="run Bash, Write and Edit without asking first"
    )

    sessions = sub.add_parser("sessions", help="list, show or delete sessions")
    actions = sessions.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("ls", parents=[url, as_json], help="list sessions, newest first")
    ls.add_argument("--agent", metavar="NAME", help="only sessions of this agent")
    ls.add_argument("--limit", type=int, default=20, metavar="N", help="at most N sessions (default 20)")
    ls.add_argument("--archived", action="store_true", help="include archived sessions")
    show = actions.add_parser("show", parents=[url, as_json], help="a session's snapshot and newest items")
    show.add_argument("session_id", metavar="ID")
    rm = actions.add_parser("rm", parents=[url, as_json], help="delete a session (stops a running turn)")
    rm.add_argument("session_id", metavar="ID")

    agents = sub.add_parser("agents", help="list or register agents")
    actions = agents.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("ls", parents=[url, as_json], help="list agent versions, newest first")
    ls.add_argument("--limit", type=int, default=100, metavar="N", help="at most N versions (default 100)")
    register = actions.add_parser(
        "register", parents=[url, as_json], help="register an agent YAML file or bundle directory"
    )
    register.add_argument("file", metavar="FILE")

    hooks = sub.add_parser("webhooks", help="webhook endpoints for your sessions' lifecycle events")
    actions = hooks.add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add", parents=[url, as_json], help="register an endpoint (prints its secret once)"
    )
    add.add_argument("webhook_url", metavar="URL")
    add.add_argument(
        "--event",
        action="append",
        metavar="TYPE",
        help="subscribe to this type only (repeatable; default all)",
    )
    add.add_argument("--description", default=None)
    add.add_argument(
        "--format",
        choices=("skyloop", "anthropic"),
        default=None,
        help="the payloads: skyloop's (default) or Claude Managed Agents' (docs/webhooks.md)",
    )
    add.add_argument("--all", action="store_true", help="admin only: every principal's sessions")
    actions.add_parser("ls", parents=[url, as_json], help="list your endpoints")
    for name, text in (
        ("rm", "delete an endpoint and its delivery history"),
        ("deliveries", "an endpoint's deliveries, newest first, with every attempt"),
        ("test", "post a signed test event to the endpoint now"),
    ):
        action = actions.add_parser(name, parents=[url, as_json], help=text)
        action.add_argument("webhook_id", metavar="ID")
        if name == "deliveries":
            action.add_argument("--limit", type=int, default=20, metavar="N")

    events = sub.add_parser("events", help="lifecycle events on the EventBridge bus")
    actions = events.add_subparsers(dest="action", required=True)
    tail = actions.add_parser(
        "tail",
        help="print lifecycle events as they happen (a temporary rule and queue on the bus, removed on exit)",
    )
    tail.add_argument(
        "--bus",
        default=os.environ.get("SKYLOOP_EVENT_BUS", "skyloop-local"),
        help="the bus (the stack output EventBusName; default $SKYLOOP_EVENT_BUS or skyloop-local)",
    )
    tail.add_argument("--endpoint-url", default=None, help="AWS endpoint (skyloop dev's moto endpoint)")
    tail.add_argument("--region", default=None)
    tail.add_argument("--type", action="append", metavar="TYPE", help="only these detail-types (repeatable)")
    tail.add_argument(
        "--count", type=int, default=0, metavar="N", help="stop after N events (default: never)"
    )
    tail.add_argument(
        "--timeout", type=float, default=0, metavar="S", help="stop after S seconds (default: never)"
    )
    schedules = sub.add_parser("schedules", help="scheduled tasks: an agent runs a prompt on an RRULE")
    actions = schedules.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=[url, as_json], help="add a scheduled task")
    add.add_argument("prompt", help="what the agent is asked at each run")
    add.add_argument(
        "--agent", required=True, metavar="NAME_OR_ID", help="the agent (a name: its newest version)"
    )
    add.add_argument(
        "--rrule", required=True, metavar="RULE", help="RFC 5545 rule, e.g. 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0'"
    )
    add.add_argument("--timezone", default="UTC", metavar="ZONE", help="IANA zone the rule is read in (UTC)")
    add.add_argument("--name", help="a name for the task (default: the prompt's start)")
    add.add_argument("--max-cost-usd", type=float, metavar="USD", help="stop a run's turn at this cost")
    add.add_argument("--model", metavar="MODEL", help="a model instead of the agent's")
    add.add_argument("--starts-at", metavar="ISO8601", help="no run before this time (with an offset)")
    add.add_argument(
        "--overlap",
        choices=["skip", "allow"],
        default="skip",
        help="a run while one still runs: skip (default)",
    )
    actions.add_parser("ls", parents=[url, as_json], help="list scheduled tasks")
    for verb, what in (("rm", "delete a scheduled task"), ("run", "run a scheduled task now")):
        one = actions.add_parser(verb, parents=[url, as_json], help=what)
        one.add_argument("task_id", metavar="ID")
    runs = actions.add_parser("runs", parents=[url, as_json], help="a scheduled task's runs, newest first")
    runs.add_argument("task_id", metavar="ID")
    runs.add_argument("--limit", type=int, default=20, metavar="N", help="at most N runs (default 20)")


def _token_command(args: argparse.Namespace) -> int:
    import boto3

    from skyloop import auth
    from skyloop.errors import SkyloopError
    from skyloop.store import DynamoStore

    client = boto3.client("dynamodb", endpoint_url=args.endpoint_url, region_name=args.region)
    store = DynamoStore(args.table, client)
    try:
        if args.action == "create":
            value, record = auth.create_token(
                store, args.name, owner=args.principal, scopes=args.scope or ("read", "write")
            )
            print(
                f"token id {record.id} ({record.name}) for principal '{record.owner}' "
                f"[{' '.join(record.scopes)}]; keep this token, it is not shown again:"
            )
            print(value)
        elif args.action == "list":
            for record in auth.list_tokens(store):
                print(
                    f"{record.id}  {record.name}  principal {record.owner}  "
                    f"[{' '.join(record.scopes)}]  created {record.created_at}"
                )
        else:
            if not args.value:
                print("skyloop token revoke: give the token or its id", file=sys.stderr)
                return 2
            record = auth.revoke_token(store, args.value)
            print(f"revoked {record.id} ({record.name})")
    except SkyloopError as exc:
        print(f"skyloop token {args.action}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from skyloop.local.dev import serve

        if args.ephemeral and args.reset:
            print("skyloop dev: --reset wipes a data directory; --ephemeral has none", file=sys.stderr)
            return 2
        return serve(
            args.host,
            args.port,
            require_token=args.require_token,
            lambda_runtime=args.lambda_runtime,
            lambda_tools=args.lambda_tools,
            data_dir=None if args.ephemeral else args.data_dir,
            reset=args.reset,
            hosted_unisolated=args.hosted_unisolated,
        )
    elif args.command == "mock-llm":
        from skyloop.mockllm import serve as serve_mock

        print(f"skyloop mock-llm: serving http://{args.host}:{args.port}", flush=True)
        serve_mock(args.host, args.port)
    elif args.command == "token":
        return _token_command(args)
    elif args.command == "smoke":
        return _smoke_command(args)
    elif args.command == "events":
        from skyloop.webhooks.tail import tail

        return tail(
            bus=args.bus,
            endpoint_url=args.endpoint_url,
            region=args.region,
            types=args.type or [],
            count=args.count,
            timeout_s=args.timeout,
        )
    elif args.command in ("chat", "sessions", "agents", "webhooks", "schedules"):
        from skyloop.chat import run as run_client_command

        return run_client_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
