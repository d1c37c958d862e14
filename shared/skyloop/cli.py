"""The ``skyloop`` command.

Examples:
    skyloop dev --port 8080          # the local stack on moto, with the example agent ``coder``
    skyloop mock-llm --port 8089     # the scripted OpenAI-compatible model
"""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skyloop", description="Serverless agent sessions on AWS.")
    sub = parser.add_subparsers(dest="command", required=True)
    dev = sub.add_parser(
        "dev", help="serve the local stack (moto DynamoDB + Step Functions + in-process Lambda)"
    )
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8080)
    mock = sub.add_parser("mock-llm", help="serve the scripted OpenAI-compatible mock model")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=8089)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from skyloop.local.dev import serve

        serve(args.host, args.port)
    elif args.command == "mock-llm":
        from skyloop.mockllm import serve as serve_mock

        print(f"skyloop mock-llm: serving http://{args.host}:{args.port}", flush=True)
        serve_mock(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
