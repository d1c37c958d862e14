"""The client's I/O, written once: ``_sync/`` is generated from ``_async/`` (``make unasync``).

Code in ``_async/`` is written so that renaming alone makes its sync twin
(the rules: ``scripts/unasync_client.py``); what genuinely differs lives in
``skyloop.client._concurrency``, in both forms.
"""

from __future__ import annotations

from skyloop.client._async._client import AsyncClient
from skyloop.client._async._live import AsyncLiveEventStream
from skyloop.client._async._raw import AsyncRawResponses
from skyloop.client._async._session import AsyncSession
from skyloop.client._async._stream import AsyncEventStream
from skyloop.client._async._transport import AsyncTransport
from skyloop.client._async._turn import AsyncTurn

__all__ = [
    "AsyncClient",
    "AsyncEventStream",
    "AsyncLiveEventStream",
    "AsyncRawResponses",
    "AsyncSession",
    "AsyncTransport",
    "AsyncTurn",
]
