"""``smoke_echo``: the server tool ``skyloop smoke`` approves and declines; it answers with what it was given.

Standard library only and small: the CDK stack deploys this file as the
inline code of a 128 MB function (output ``SmokeToolArn``) that the turn
machine may invoke, and ``skyloop dev`` serves it as the local Lambda tool
``smoke_echo`` without ``--lambda-tools``.
"""

from __future__ import annotations

from typing import Any


def smoke_echo(event: dict[str, Any], context: Any) -> str:  # noqa: ARG001  (Lambda's signature)
    """``smoke_echo: <arguments.text>``, so the caller can tell its own call's output reached the model."""
    arguments = event.get("arguments") or {}
    return f"smoke_echo: {arguments.get('text', '')}"
