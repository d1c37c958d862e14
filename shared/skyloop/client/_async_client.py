"""The asyncio client, written once in ``_async/_client.py`` (the sync ``Client`` is generated from it)."""

from __future__ import annotations

from skyloop.client._async._client import AsyncClient

__all__ = ["AsyncClient"]
