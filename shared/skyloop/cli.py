"""The ``skyloop`` command.

Examples:
    skyloop dev --port 8080          # the local stack on moto, with the example agent ``coder``
    skyloop mock-llm --port 8089     # the scripted OpenAI-compatible model
    skyloop token create --table <TableName> --name laptop   # prints a bearer token once
    skyloop token revoke --table <TableName> <token id>
"""

from __future__ import annotations

import argparse
import os
import sys


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
    mock = sub.add_parser("mock-llm", help="serve the scripted OpenAI-compatible mock model")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=8089)
    token = sub.add_parser("token", help="manage bearer tokens (stored as SHA-256 hashes in the table)")
    token.add_argument("action", choices=["create", "list", "revoke"])
    token.add_argument("value", nargs="?", help="revoke: the token or its id")
    token.add_argument("--name", default="default", help="create: a label for the token")
    token.add_argument("--table", default=os.environ.get("SKYLOOP_TABLE_NAME", "skyloop"))
    token.add_argument(
        "--endpoint-url", default=None, help="DynamoDB endpoint (the local stack's moto endpoint)"
    )
    token.add_argument("--region", default=None)
    return parser


def _token_command(args: argparse.Namespace) -> int:
    import boto3

    from skyloop import auth
    from skyloop.errors import SkyloopError

    client = boto3.client("dynamodb", endpoint_url=args.endpoint_url, region_name=args.region)
    try:
        if args.action == "create":
            value, record = auth.create_token(client, args.table, args.name)
            print(f"token id {record.id} ({record.name}); keep this token, it is not shown again:")
            print(value)
        elif args.action == "list":
            for record in auth.list_tokens(client, args.table):
                print(f"{record.id}  {record.name}  created {record.created_at}")
        else:
            if not args.value:
                print("skyloop token revoke: give the token or its id", file=sys.stderr)
                return 2
            record = auth.revoke_token(client, args.table, args.value)
            print(f"revoked {record.id} ({record.name})")
    except SkyloopError as exc:
        print(f"skyloop token {args.action}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from skyloop.local.dev import serve

        serve(args.host, args.port, require_token=args.require_token)
    elif args.command == "mock-llm":
        from skyloop.mockllm import serve as serve_mock

        print(f"skyloop mock-llm: serving http://{args.host}:{args.port}", flush=True)
        serve_mock(args.host, args.port)
    elif args.command == "token":
        return _token_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
