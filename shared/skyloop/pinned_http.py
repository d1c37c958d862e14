"""HTTP transports that connect to the address the outbound check passed, not to a second lookup.

``outbound.check_url`` resolves a name and checks every address; an HTTP
client left to itself then resolves the name again to connect. A name whose
answers change between the two lookups (DNS rebinding, a short TTL) would
reach an address the check refused: the instance metadata service, the VPC.
These transports resolve once per connection, check those addresses, and
connect to one of them; the request keeps its URL, so TLS verifies the
original host name (SNI and certificate) and ``Host`` names it. A pooled
connection keeps the address it was checked with.

Used for model endpoints (the openai SDK's client), MCP servers and webhook
deliveries. httpx and httpx2 (the openai SDK's and the MCP client's) each get
one; imports are lazy (cold start).
"""

from __future__ import annotations

from typing import Any


def _addresses(core: Any, host: str, port: int, what: str) -> list[str] | None:
    """The checked addresses; a refused one is the connection's error (the client reports it as such)."""
    from skyloop.outbound import OutboundUrlError, allowed_addresses
    from skyloop.settings import get_settings

    try:
        addresses = allowed_addresses(host.strip("[]"), port, get_settings(), what=what)
    except OutboundUrlError as exc:
        raise core.ConnectError(exc.message) from None
    if addresses == []:
        raise core.ConnectError(f"{what}: '{host}' does not resolve")
    return addresses


def _backend(core: Any, what: str) -> Any:
    """A sync network backend of ``core`` (httpcore or httpcore2) that pins each connection's address."""

    class PinnedBackend(core.NetworkBackend):
        def __init__(self) -> None:
            self.inner = core.SyncBackend()

        def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            addresses = _addresses(core, host, port, what)
            if addresses is None:  # the operator's allow list names the host itself
                return self.inner.connect_tcp(host, port, *args, **kwargs)
            last: Exception | None = None
            for address in addresses:
                try:
                    return self.inner.connect_tcp(address, port, *args, **kwargs)
                except core.ConnectError as exc:
                    last = exc
            raise last or core.ConnectError(f"{what}: '{host}' could not be reached")

        def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            return self.inner.connect_unix_socket(*args, **kwargs)

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return PinnedBackend()


def _async_backend(core: Any, what: str) -> Any:
    class PinnedAsyncBackend(core.AsyncNetworkBackend):
        def __init__(self) -> None:
            self.inner = core.AnyIOBackend()

        async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            import anyio

            addresses = await anyio.to_thread.run_sync(_addresses, core, host, port, what)
            if addresses is None:
                return await self.inner.connect_tcp(host, port, *args, **kwargs)
            last: Exception | None = None
            for address in addresses:
                try:
                    return await self.inner.connect_tcp(address, port, *args, **kwargs)
                except core.ConnectError as exc:
                    last = exc
            raise last or core.ConnectError(f"{what}: '{host}' could not be reached")

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            return await self.inner.connect_unix_socket(*args, **kwargs)

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    return PinnedAsyncBackend()


def _pinned(transport: Any, backend: Any) -> Any:
    pool = transport._pool  # the library builds its pool in the constructor; only its backend changes
    if not hasattr(pool, "_network_backend"):
        raise RuntimeError("this httpx no longer keeps its network backend where skyloop pins it")
    pool._network_backend = backend
    return transport


def httpx_transport(what: str) -> Any:
    """An ``httpx.HTTPTransport`` connecting only to checked addresses (no proxies from the environment)."""
    import httpcore
    import httpx

    return _pinned(httpx.HTTPTransport(trust_env=False), _backend(httpcore, what))


def httpx2_transport(what: str) -> Any:
    """The same for ``httpx2`` (the openai SDK's HTTP client)."""
    import httpcore2
    import httpx2

    return _pinned(httpx2.HTTPTransport(trust_env=False), _backend(httpcore2, what))


def httpx2_async_transport(what: str) -> Any:
    """The same, async, for ``httpx2.AsyncClient`` (the MCP client's)."""
    import httpcore2
    import httpx2

    return _pinned(httpx2.AsyncHTTPTransport(trust_env=False), _async_backend(httpcore2, what))
