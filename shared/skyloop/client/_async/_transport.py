"""The executor over ``httpx``: one request, one answer read by :class:`~skyloop.client._transport.TransportCore`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from skyloop.client._errors import map_transport_errors
from skyloop.client._transport import TransportCore

if TYPE_CHECKING:
    from skyloop.client._requests import ApiCall
    from skyloop.client._transport import RawResponse

__all__ = ["AsyncTransport"]

T = TypeVar("T")


class AsyncTransport(TransportCore):
    """The executor over ``httpx.AsyncClient``."""

    def __init__(
        self,
        base_url: str | None,
        *,
        token: str | None,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        super().__init__(base_url, token=token, timeout=timeout)
        self.http = httpx.AsyncClient(**self.client_options(), transport=transport)

    @property
    def is_closed(self) -> bool:
        return self.http.is_closed

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _request(self, call: ApiCall[Any]) -> httpx.Response:
        with map_transport_errors():
            return await self.http.request(call.method, call.path, **call.request_kwargs())

    async def send(self, call: ApiCall[T]) -> T:
        """One attempt at ``call``: its model, or a typed error."""
        return self.read(call, await self._request(call))

    async def send_raw(self, call: ApiCall[T]) -> RawResponse[T]:
        """One attempt at ``call``: the answer as sent (error statuses still raise)."""
        return self.read_raw(call, await self._request(call))

    async def open_stream(self, path: str, *, headers: dict[str, str], read_timeout: float) -> httpx.Response:
        """A streaming ``GET`` answered ``200 text/event-stream``, for the caller to read and :meth:`release`.

        httpx transport errors pass through unmapped: the stream counts them
        against its reconnect budget and chains the last one into
        ``StreamDisconnectedError``. Any other answer raises its typed error.
        """
        request = self.http.build_request("GET", path, **self.stream_options(headers, read_timeout))
        response = await self.http.send(request, stream=True)
        content = b""
        if response.status_code != 200:
            with contextlib.suppress(httpx.TransportError):  # the status alone still types the error
                content = await response.aread()
        refusal = self.stream_refusal(response, content)
        if refusal is not None:
            await self.release(response)
            raise refusal
        return response

    @staticmethod
    async def release(response: httpx.Response) -> None:
        """Give a stream's connection back; a broken one may fail to close, and is discarded anyway."""
        with contextlib.suppress(Exception):
            await response.aclose()
