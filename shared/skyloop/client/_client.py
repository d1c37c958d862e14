"""The synchronous client, generated from the async one (``_sync/_client.py``; see ``_async/_client.py``)."""

from __future__ import annotations

from skyloop.client._sync._client import Client

__all__ = ["Client"]
