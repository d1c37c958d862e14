"""The REST routes, one module per resource, each a Powertools ``Router`` included by the app."""

from skyloop.api.routes import agents, events, files, health, openai, runners, sessions, webhooks

ROUTERS = (
    health.router,
    sessions.router,
    events.router,
    files.router,
    agents.router,
    runners.router,
    openai.router,
    webhooks.router,
)

__all__ = ["ROUTERS"]
