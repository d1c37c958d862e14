"""Example Lambda tools: run them locally with ``skyloop dev --lambda-tools examples/lambda_tools.py``.

Each public ``(event, context)`` function is a Lambda handler. The turn's
state machine invokes it with ``{name, arguments, session_id, call_id}`` and
the model reads what it returns: a string as it is, anything else as JSON.
Raise to report a failure; the model sees ``Error: ...`` and the turn goes on.
Deploy the same file as a Lambda function (handler ``lambda_tools.word_count``)
and declare its name or ARN in the agent; see ``examples/tool_agent.yaml``.
"""

from __future__ import annotations

import datetime
from typing import Any


def word_count(event: dict[str, Any], context: Any) -> dict[str, int]:  # noqa: ARG001  (Lambda's signature)
    """Count the words and characters of ``arguments.text``."""
    text = str(event["arguments"].get("text", ""))
    return {"words": len(text.split()), "characters": len(text)}


def utc_now(event: dict[str, Any], context: Any) -> str:  # noqa: ARG001  (Lambda's signature)
    """The current time in UTC, ISO 8601; ``arguments.timespec`` as ``datetime.isoformat`` takes it."""
    timespec = str(event["arguments"].get("timespec", "seconds"))
    return datetime.datetime.now(datetime.UTC).isoformat(timespec=timespec)
