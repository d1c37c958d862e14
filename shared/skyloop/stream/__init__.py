"""The SSE stream function's ASGI app."""

from skyloop.stream.app import app, create_app

__all__ = ["app", "create_app"]
