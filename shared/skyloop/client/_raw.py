"""``client.with_raw_response``: written once in ``_async/_raw.py``, the sync side generated from it."""

from __future__ import annotations

from skyloop.client._async._raw import AsyncRawResponses
from skyloop.client._sync._raw import RawResponses

__all__ = ["AsyncRawResponses", "RawResponses"]
