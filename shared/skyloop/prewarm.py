"""Warm the functions a turn will need while this one cold-starts, so their cold starts leave the critical path.

On the first turn after idle every function on the path is cold: the client
waits for the stream's first frame (the stream function starts), posts its
message (the API function starts), and the turn runs on the turn function.
Met one after the other, that is three cold starts. A function whose
manifest entry names ``prewarm`` targets gets them in ``SKYLOOP_PREWARM``
(function names or ARNs); as its environment starts it invokes each of them
asynchronously (``InvocationType=Event``) with :data:`WARM_EVENT`, from a
background thread, so their initialization overlaps its own. A target's
handler answers a warm-up at once (:func:`is_warmup`), and the idle
environment it leaves serves the real invocation that follows.

A warm-up costs one asynchronous invocation and the target's initialization
(about half a second of a 512 MB function, ~$0.000004), once per cold start of
the function that sends it; the local stack sets no targets.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

log = logging.getLogger("skyloop.prewarm")

ENV = "SKYLOOP_PREWARM"
WARM_KEY = "skyloop_warm"
WARM_EVENT: dict[str, Any] = {WARM_KEY: True}
WARM_REPLY: dict[str, Any] = {"warm": True}


def is_warmup(event: object) -> bool:
    """A warm-up invocation (answered at once, nothing read or written)."""
    return isinstance(event, dict) and event.get(WARM_KEY) is True


def targets(environ: dict[str, str] | None = None) -> list[str]:
    value = (os.environ if environ is None else environ).get(ENV, "")
    return [t.strip() for t in value.split(",") if t.strip()]


def start(environ: dict[str, str] | None = None, *, client: Any = None) -> threading.Thread | None:
    """Send the warm-ups from a background thread (this environment's own start goes on); None if there are none."""
    names = targets(environ)
    if not names:
        return None
    thread = threading.Thread(target=warm, args=(names,), kwargs={"client": client}, daemon=True)
    thread.name = "skyloop-prewarm"
    thread.start()
    return thread


def warm(names: list[str], *, client: Any = None) -> int:
    """Invoke each target asynchronously; returns how many were sent. Failures are logged, never raised."""
    sent = 0
    try:
        if client is None:
            from skyloop import deps

            client = deps.client("lambda")
        for name in names:
            client.invoke(FunctionName=name, InvocationType="Event", Payload=json.dumps(WARM_EVENT).encode())
            sent += 1
    except Exception as exc:  # a warm-up is an optimization: it must never fail the function sending it
        log.warning("pre-warming %s failed: %s", names, exc)
    return sent
