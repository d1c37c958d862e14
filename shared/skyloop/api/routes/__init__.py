"""The REST routes, one module per resource, each a Powertools ``Router`` included by the app."""

from skyloop.api.routes import (
    agents,
    anthropic,
    anthropic_work,
    events,
    files,
    health,
    openai,
    runners,
    schedules,
    sessions,
    webhooks,
)

ROUTERS = (
    health.router,
    sessions.router,
    events.router,
    files.router,
    agents.router,
    runners.router,
    schedules.router,
    openai.router,
    anthropic.router,
    anthropic_work.router,
    webhooks.router,
)

__all__ = ["ROUTERS"]
