"""The REST API function's resolver (``app``) and its entry point (``handle``)."""

from skyloop.api.app import app, handle

__all__ = ["app", "handle"]
