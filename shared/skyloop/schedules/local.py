"""``skyloop dev``'s scheduler: EventBridge Scheduler's part, in-process, from the table.

In the cloud EventBridge Scheduler's clock invokes the ``schedule_run``
function; locally this loop does, every ``tick_s`` (5 s by default: EventBridge
Scheduler's own precision is a minute): it reads the tasks whose
next occurrence has come (the table's ``due_schedules`` index, so the state it
works from persists with the table) and invokes the same function
asynchronously with the same payload. What came due while the stack was down
is handled by the missed-run policy (:func:`skyloop.schedules.runs.catch_up_task`, which the
cloud's repair pass applies too):
an occurrence passed at most ``SKYLOOP_SCHEDULE_MISSED_GRACE_S`` (15 minutes)
ago still runs, once; older ones are recorded as ``missed`` runs and the task
moves on to its next occurrence.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from skyloop.schedules import runs

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.schedule import ScheduledTask
    from skyloop.schedules.engine import EventBridgeSchedules
    from skyloop.store import Store

log = logging.getLogger("skyloop.local")
DISPATCH_MEMORY_S = 120.0  # an occurrence sent is not sent again meanwhile (the run function moves it on)


class LocalScheduler:
    """Fires due tasks by invoking ``invoke(payload)``; one instance per stack process."""

    def __init__(
        self,
        store: Callable[[], Store],
        schedules: Callable[[], EventBridgeSchedules | None],
        invoke: Callable[[dict[str, Any]], Any],
        *,
        grace_s: int,
    ) -> None:
        self._store = store
        self._schedules = schedules
        self._invoke = invoke
        self._grace_s = grace_s
        self._sent: dict[tuple[str, int], float] = {}

    def tick(self, now: float | None = None) -> list[str]:
        """One pass: dispatch what is due, record what was missed; returns the tasks dispatched."""
        now = time.time() if now is None else now
        self._sent = {k: t for k, t in self._sent.items() if now - t < DISPATCH_MEMORY_S}
        return runs.catch_up(
            self._store(), self._schedules(), now=int(now), grace_s=self._grace_s, dispatch=self._dispatch
        )

    def _dispatch(self, task: ScheduledTask, due: int) -> bool:
        if (task.id, due) in self._sent:
            return False
        self._sent[(task.id, due)] = time.time()
        self._invoke(runs.fire_event(task.id, due))
        return True

    def start(self, tick_s: float) -> threading.Thread:
        def loop() -> None:
            while True:
                try:
                    self.tick()
                except Exception:  # keep ticking; a failed pass is retried at the next tick
                    log.exception("scheduler tick failed")
                time.sleep(tick_s)

        thread = threading.Thread(target=loop, name="skyloop-scheduler", daemon=True)
        thread.start()
        return thread


def lambda_invoker(client: Any, function_arn: str) -> Callable[[dict[str, Any]], Any]:
    """Invoke the run function as EventBridge Scheduler does: asynchronously, with the schedule's input."""

    def invoke(payload: dict[str, Any]) -> Any:
        return client.invoke(FunctionName=function_arn, InvocationType="Event", Payload=json.dumps(payload))

    return invoke
