"""The one transport base under both clients: headers, timeouts, sending, reading answers.

:class:`TransportCore` holds everything that is not I/O: the resolved URL and
token, default headers, the timeouts of ordinary requests and of streams, and
how an answer becomes a model, a :class:`RawResponse` or a typed error.
``AsyncTransport`` (``_async/_transport.py``) and its generated twin
``SyncTransport`` are the thin executors over ``httpx.AsyncClient`` and
``httpx.Client``; httpx transport errors become the client's connection
errors there, at one boundary. Retries are not made here: they follow the one
policy in ``_retry``, around the calls that are safe to repeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx

from skyloop import __version__
from skyloop.client._config import resolve_config
from skyloop.client._errors import APIConnectionError, error_from_response
from skyloop.client._requests import decode_json, parse_body, read_response

if TYPE_CHECKING:
    from skyloop.client._requests import ApiCall

__all__ = ["USER_AGENT", "RawResponse", "TransportCore", "default_headers"]

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
