"""What each function of the manifest may do, beyond writing its own logs and traces.

Every function of ``skyloop.manifest.FUNCTIONS`` must appear here: the stack
refuses to synthesize a function whose access nobody decided.

* ``TABLE_ACCESS``: ``"read_write"`` or ``"read"`` on the table (and its indexes).
  The API and stream functions look up bearer-token hashes in the same table.
* ``TURN_ACCESS``: actions on the turn state machine. ``start``: StartExecution
  (post a message); ``stop``: StopExecution on its executions (interrupt,
  delete); ``resume``: SendTaskSuccess (the last client-tool output wakes a
  parked turn, and a parked step resumes or wakes its own turn).
"""

from __future__ import annotations

from typing import Literal

TableAccess = Literal["read_write", "read"]
TurnAction = Literal["start", "stop", "resume"]

TABLE_ACCESS: dict[str, TableAccess] = {
    "api": "read_write",
    "stream": "read",
    "prepare_turn": "read_write",
    "call_model": "read_write",
    "await_client": "read_write",
    "finish_turn": "read_write",
    "fail_turn": "read_write",
}

TURN_ACCESS: dict[str, tuple[TurnAction, ...]] = {
    "api": ("start", "stop", "resume"),
    "await_client": ("resume",),
}
