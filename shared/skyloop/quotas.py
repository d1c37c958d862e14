"""Quotas per principal: running turns, turns started per minute, stored sessions.

Each is off unless configured (``SKYLOOP_QUOTA_*``). Over a limit, the
request answers 429 ``quota_exceeded`` with ``Retry-After`` and writes
nothing the caller would see. How each is held:

* turns per minute: a counter per principal and minute, taken with one
  conditional ADD, so simultaneous posts can never start more than the limit;
  the window item expires by TTL. A message that joins a running turn
  (steering) starts no turn and takes no slot.
* running turns and stored sessions: counted on the owner index when a turn
  would start or a session be created. Simultaneous requests may each see the
  count below the limit, so these two can overshoot by the number of requests
  in flight at that instant; the per-minute quota is the hard ceiling.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from skyloop.errors import QuotaExceededError

if TYPE_CHECKING:
    from skyloop.settings import Settings
    from skyloop.store import Store

WINDOW_S = 60


def before_session(store: Store, settings: Settings, owner: str) -> None:
    limit = settings.quota_sessions
    if limit is not None and store.count_sessions(owner) >= limit:
        raise QuotaExceededError(
            f"principal '{owner}' holds {limit} sessions, its quota; delete some to open more",
            retry_after_s=WINDOW_S,
        )


def before_scheduled_task(store: Store, settings: Settings, owner: str) -> None:
    """Tasks a principal may hold (``SKYLOOP_QUOTA_SCHEDULED_TASKS``)."""
    limit = settings.quota_scheduled_tasks
    if limit is not None and store.count_scheduled_tasks(owner) >= limit:
        raise QuotaExceededError(
            f"principal '{owner}' holds {limit} scheduled tasks, its quota; delete some to add more",
            retry_after_s=WINDOW_S,
        )


def before_scheduled_run(store: Store, settings: Settings, owner: str, *, now: float | None = None) -> None:
    """Scheduled runs a principal may start per clock hour (``SKYLOOP_QUOTA_SCHEDULED_RUNS_PER_HOUR``).

    Taken when a run opens its session, with one conditional ADD per run (as
    turns per minute are), so simultaneous fires never start more than the
    limit; a run over it is recorded as skipped (``quota_exceeded``), and a
    run now is refused with 429.
    """
    limit = settings.quota_scheduled_runs_per_hour
    if limit is None:
        return
    now = time.time() if now is None else now
    hour = int(now // 3600)
    if not store.take_quota_slot(owner, f"scheduled-runs:{hour}", limit, expires_at=(hour + 2) * 3600):
        raise QuotaExceededError(
            f"principal '{owner}' started {limit} scheduled runs this hour, its quota",
            retry_after_s=int((hour + 1) * 3600 - now) + 1,
        )


def before_turn(store: Store, settings: Settings, owner: str, *, now: float | None = None) -> None:
    """Called just before a new turn is started for ``owner``; takes its per-minute slot."""
    now = time.time() if now is None else now
    running = settings.quota_running_turns
    if running is not None and store.count_sessions(owner, running_only=True) >= running:
        raise QuotaExceededError(
            f"principal '{owner}' has {running} turns running, its quota; wait for one to finish",
            retry_after_s=5,
        )
    per_minute = settings.quota_turns_per_minute
    if per_minute is None:
        return
    minute = int(now // WINDOW_S)
    if not store.take_quota_slot(owner, str(minute), per_minute, expires_at=(minute + 2) * WINDOW_S):
        raise QuotaExceededError(
            f"principal '{owner}' started {per_minute} turns this minute, its quota",
            retry_after_s=int((minute + 1) * WINDOW_S - now) + 1,
        )
