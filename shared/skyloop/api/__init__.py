"""The REST API function's application (Powertools HTTP API resolver)."""

from skyloop.api.app import app, handle

__all__ = ["app", "handle"]
