"""Lifecycle events: what happened to a session, in OpenAI's ``agent.session.*`` webhook shape.

* :mod:`skyloop.lifecycle_events.models` -- the events (pydantic), the types an endpoint may subscribe to;
* :mod:`skyloop.lifecycle_events.derive` -- log events -> lifecycle events, a pure function;
* :mod:`skyloop.lifecycle_events.claude` -- a lifecycle event in Claude Managed Agents' webhook shape.

Webhooks (:mod:`skyloop.webhooks`) and EventBridge carry them; any other
surface that announces sessions (e.g. the OpenAI Agents API) can reuse both.
Imports pydantic and nothing heavy.
"""

from skyloop.lifecycle_events.derive import SessionFacts, derive, is_action, session_created, window_needs
from skyloop.lifecycle_events.models import (
    EVENT_MODELS,
    EVENT_TYPES,
    SESSION_ACTION_REQUIRED,
    SESSION_CREATED,
    SESSION_FAILED,
    SESSION_IDLE,
    SESSION_IN_PROGRESS,
    WEBHOOK_TEST,
    LifecycleEvent,
    parse,
)

__all__ = [
    "EVENT_MODELS",
    "EVENT_TYPES",
    "SESSION_ACTION_REQUIRED",
    "SESSION_CREATED",
    "SESSION_FAILED",
    "SESSION_IDLE",
    "SESSION_IN_PROGRESS",
    "WEBHOOK_TEST",
    "LifecycleEvent",
    "SessionFacts",
    "derive",
    "is_action",
    "parse",
    "session_created",
    "window_needs",
]
