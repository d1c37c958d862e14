"""The one transport base under both clients: headers, timeouts, sending, reading answers.

:class:`TransportCore` holds everything that is not I/O: the resolved URL and
token, default headers, the timeouts of ordinary requests and of streams, and
how an answer becomes a model, a :class:`RawResponse` or a typed error.
:class:`SyncTransport` and :class:`AsyncTransport` are the thin executors over
``httpx.Client`` and ``httpx.AsyncClient``; httpx transport errors become the
client's connection errors here, at one boundary. Retries are not made here:
they follow the one policy in ``_retry``, around the calls that are safe to
repeat.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx

from skyloop import __version__
from skyloop.client._config import resolve_config
from skyloop.client._errors import APIConnectionError, error_from_response, map_transport_errors
from skyloop.client._requests import decode_json, parse_body, read_response

if TYPE_CHECKING:
    from skyloop.client._requests import ApiCall

__all__ = ["USER_AGENT", "AsyncTransport", "RawResponse", "SyncTransport", "TransportCore", "default_headers"]

T = TypeVar("T")

USER_AGENT = f"skyloop-client/{__version__}"


def default_headers(token: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@dataclass(frozen=True)
class RawResponse(Generic[T]):
    """One answer as the server sent it, with the SDK's typed reading a call away.

    For callers that must show or keep exactly what the server said (the CLI's
    ``--json``: list items are flat on the wire and folded by the models).
    Error statuses still raise the typed :class:`~skyloop.client.APIError`
    subclasses, and a 2xx body that is not JSON raises
    :class:`~skyloop.client.ResponseValidationError`, as the typed methods do.
    """

    status_code: int
    headers: httpx.Headers
    content: bytes = field(repr=False)
    _body: Any = field(repr=False)
    _call: ApiCall[T] = field(repr=False)

    @property
    def method(self) -> str:
        return self._call.method

    @property
    def path(self) -> str:
        return self._call.path

    def json(self) -> Any:
        """The decoded JSON body, untouched."""
        return self._body

    def parse(self) -> T:
        """The body as the typed method would return it (``ResponseValidationError`` if it does not fit)."""
        return parse_body(self._call, self._body)


class TransportCore:
    """What both executors share and none of them does I/O for.

    Precedence of ``base_url``/``token`` is ``resolve_config``'s (arguments,
    environment, config file, default).
    """

    def __init__(self, base_url: str | None, *, token: str | None, timeout: float) -> None:
        config = resolve_config(base_url, token)
        self.base_url = config.base_url
        self.token = config.token
        self.timeout = timeout
        self.headers = default_headers(config.token)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for the ``httpx`` client."""
        return {"base_url": self.base_url, "headers": self.headers, "timeout": self.timeout}

    def stream_options(self, headers: dict[str, str], read_timeout: float) -> dict[str, Any]:
        """A stream's request options: its own read timeout, longer than the server's heartbeat interval."""
        return {"headers": headers, "timeout": httpx.Timeout(self.timeout, read=read_timeout)}

    @staticmethod
    def read(call: ApiCall[T], response: httpx.Response) -> T:
        return read_response(call, response)

    @staticmethod
    def read_raw(call: ApiCall[T], response: httpx.Response) -> RawResponse[T]:
        body = decode_json(call, response)
        return RawResponse(response.status_code, response.headers, response.content, body, call)

    @staticmethod
    def stream_refusal(response: httpx.Response, content: bytes) -> Exception | None:
        """Why a stream answer cannot be read as SSE (a typed error), or ``None`` when it can."""
        if response.status_code != 200:
            return error_from_response(response.status_code, content)
        ctype = response.headers.get("content-type", "")
        if ctype.split(";")[0].strip().lower() != "text/event-stream":
            return APIConnectionError(f"expected text/event-stream, got {ctype or 'no content type'!r}")
        return None


class SyncTransport(TransportCore):
    """The synchronous executor over ``httpx.Client``."""

    def __init__(
        self,
        base_url: str | None,
        *,
        token: str | None,
        timeout: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        super().__init__(base_url, token=token, timeout=timeout)
        self.http = httpx.Client(**self.client_options(), transport=transport)

    @property
    def is_closed(self) -> bool:
        return self.http.is_closed

    def close(self) -> None:
        self.http.close()

    def _request(self, call: ApiCall[Any]) -> httpx.Response:
        with map_transport_errors():
            return self.http.request(call.method, call.path, **call.request_kwargs())

    def send(self, call: ApiCall[T]) -> T:
        """One attempt at ``call``: its model, or a typed error."""
        return self.read(call, self._request(call))

    def send_raw(self, call: ApiCall[T]) -> RawResponse[T]:
        """One attempt at ``call``: the answer as sent (error statuses still raise)."""
        return self.read_raw(call, self._request(call))

    def open_stream(self, path: str, *, headers: dict[str, str], read_timeout: float) -> httpx.Response:
        """A streaming ``GET`` answered ``200 text/event-stream``, for the caller to read and :meth:`release`.

        httpx transport errors pass through unmapped: the stream counts them
        against its reconnect budget and chains the last one into
        ``StreamDisconnectedError``. Any other answer raises its typed error.
        """
        request = self.http.build_request("GET", path, **self.stream_options(headers, read_timeout))
        response = self.http.send(request, stream=True)
        content = b""
        if response.status_code != 200:
            with contextlib.suppress(httpx.TransportError):  # the status alone still types the error
                content = response.read()
        refusal = self.stream_refusal(response, content)
        if refusal is not None:
            self.release(response)
            raise refusal
        return response

    @staticmethod
    def release(response: httpx.Response) -> None:
        """Give a stream's connection back; a broken one may fail to close, and is discarded anyway."""
        with contextlib.suppress(Exception):
            response.close()


class AsyncTransport(TransportCore):
    """The asyncio executor over ``httpx.AsyncClient``: :class:`SyncTransport`, awaited."""

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

    async def close(self) -> None:
        await self.http.aclose()

    async def _request(self, call: ApiCall[Any]) -> httpx.Response:
        with map_transport_errors():
            return await self.http.request(call.method, call.path, **call.request_kwargs())

    async def send(self, call: ApiCall[T]) -> T:
        return self.read(call, await self._request(call))

    async def send_raw(self, call: ApiCall[T]) -> RawResponse[T]:
        return self.read_raw(call, await self._request(call))

    async def open_stream(self, path: str, *, headers: dict[str, str], read_timeout: float) -> httpx.Response:
        request = self.http.build_request("GET", path, **self.stream_options(headers, read_timeout))
        response = await self.http.send(request, stream=True)
        content = b""
        if response.status_code != 200:
            with contextlib.suppress(httpx.TransportError):
                content = await response.aread()
        refusal = self.stream_refusal(response, content)
        if refusal is not None:
            await self.release(response)
            raise refusal
        return response

    @staticmethod
    async def release(response: httpx.Response) -> None:
        with contextlib.suppress(Exception):
            await response.aclose()
