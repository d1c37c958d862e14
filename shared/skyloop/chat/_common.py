"""What every chat subcommand shares: the failures it reports, how, and its client."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

from skyloop.chat._api import describe_error
from skyloop.client import Client, SkyloopClientError

if TYPE_CHECKING:
    import argparse
    from typing import TextIO

__all__ = ["_FAILURES", "_client", "_fail", "_print_json", "_tolerant"]

_FAILURES = (SkyloopClientError, OSError, ValueError)


def _fail(exc: BaseException, base_url: str | None = None, *, err: TextIO | None = None) -> int:
    code, message = describe_error(exc, base_url)
    print(f"skyloop: {code}: {message}", file=err or sys.stderr)
    return 1


def _print_json(body: Any, out: TextIO) -> None:
    out.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def _client(args: argparse.Namespace) -> Client:
    return Client(getattr(args, "url", None))


def _tolerant(stream: TextIO) -> None:
    """Never die on a character the terminal's encoding cannot show."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):  # a stream that cannot keeps its policy
            reconfigure(errors="replace")
