"""Lambda tools the server-tool tests declare (loaded as local Lambda functions, one per function)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

INVOCATIONS: Counter[str] = Counter()  # call id -> how often this process ran it (thread runtime)


def shout(event: dict[str, Any], context: Any) -> str:
    INVOCATIONS[event["call_id"]] += 1
    return str(event["arguments"]["text"]).upper()


def measure(event: dict[str, Any], context: Any) -> dict[str, Any]:
    text = str(event["arguments"].get("text", ""))
    return {"words": len(text.split()), "session": event["session_id"], "call": event["call_id"]}


def explode(event: dict[str, Any], context: Any) -> str:
    raise RuntimeError(f"kaput: {event['arguments'].get('why', 'no reason')}")


def dawdle(event: dict[str, Any], context: Any) -> str:
    time.sleep(float(event["arguments"].get("seconds", 3)))
    return "late"


def verbose(event: dict[str, Any], context: Any) -> str:
    return "y" * int(event["arguments"]["n"])


def await_answer(event: dict[str, Any], context: Any) -> bool:
    """Wait for an output of the session to be recorded anywhere in the stack, as a hot wait does."""
    from skyloop.store import notifier

    with notifier.answers_of(event["session_id"]) as answered:
        return answered.wait(float(event["arguments"].get("seconds", 20)))
