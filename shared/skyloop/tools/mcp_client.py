"""Remote MCP servers over streamable HTTP, through the official ``mcp`` SDK.

Each call opens its own connection with the server's headers and a timeout
that bounds the whole exchange (connect, initialize, call). The SDK is async;
steps are synchronous Lambda handlers, so each call runs its own event loop.
The SDK is imported here only, by the steps that call MCP servers.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skyloop.models.tools import McpServer


class McpError(Exception):
    """The server could not be reached or answered with a protocol error (not a tool error)."""


def list_tools(server: McpServer, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The server's tools as ``{name, description, parameters}`` (its allow-list applied)."""

    async def listing(client: Any) -> list[dict[str, Any]]:
        result = await client.list_tools()
        return [
            {"name": t.name, "description": t.description or "", "parameters": t.input_schema}
            for t in result.tools
            if server.tools is None or t.name in server.tools
        ]

    return _run(server, headers, listing)


def call_tool(server: McpServer, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> str:
    """The tool's output as text; a tool-level error comes back as text starting with ``Error:``."""

    async def calling(client: Any) -> str:
        result = await client.call_tool(name, arguments)
        texts = [getattr(block, "text", None) for block in result.content]
        text = "\n".join(t for t in texts if isinstance(t, str))
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        return f"Error: {text or 'the tool reported an error'}" if result.is_error else text

    return _run(server, headers, calling)


def _run(server: McpServer, headers: dict[str, str], work: Any) -> Any:
    from skyloop.outbound import OutboundUrlError, check_url
    from skyloop.settings import get_settings

    try:  # again at call time: the name may point elsewhere since the agent was registered
        check_url(server.url, get_settings(), what="MCP server")
    except OutboundUrlError as exc:
        raise McpError(exc.message) from None

    async def session() -> Any:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from skyloop.pinned_http import httpx2_async_transport

        transport = httpx2_async_transport("MCP server")  # connects to the address its check passed
        async with (
            httpx2.AsyncClient(headers=headers, timeout=server.timeout_s, transport=transport) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            return await work(client)

    async def bounded() -> Any:
        return await asyncio.wait_for(session(), timeout=server.timeout_s)

    try:
        return asyncio.run(bounded())
    except TimeoutError:
        raise McpError(f"MCP server {server.url} did not answer within {server.timeout_s}s") from None
    except (
        Exception
    ) as exc:  # the SDK and the transport raise many kinds; the caller words them for the model
        raise McpError(f"MCP server {server.url} failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    """ExceptionGroups from the SDK's task groups: the first real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return (str(exc) or type(exc).__name__).splitlines()[0][:300]
