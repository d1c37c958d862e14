"""Helpers the commands share on top of the SDK's public API.

``--json`` prints what the server answered, not a re-serialised model (list
items are flat on the wire and folded by the SDK): the commands use
``client.with_raw_response``, whose answers carry the JSON body as sent and
parse the typed model from that same body for the tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyloop.client import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    ConfigError,
    NotFoundError,
    ResponseValidationError,
)

if TYPE_CHECKING:
    from skyloop.client import Agent, Client

__all__ = ["describe_error", "find_agent"]


def find_agent(client: Client, name: str) -> Agent:
    """The newest version of the agent called ``name`` (``GET /v1/agents?name=``).

    A server that ignores ``name=`` answers with a page of every agent; the
    match is then picked from the listing, newest first.
    """
    page = client.list_agents(name=name)
    matches = [a for a in page.data if a.name == name]
    if not matches and page.has_more:
        matches = [a for a in client.iter_agents(order="desc") if a.name == name]
    if not matches:
        raise NotFoundError(
            f"no agent named {name!r} (see 'skyloop agents ls')", code="not_found", status=404
        )
    return max(matches, key=lambda a: a.created_at or 0)


def describe_error(exc: BaseException, base_url: str | None = None) -> tuple[str, str]:
    """``(code, message)`` for the ``skyloop: <code>: <message>`` line."""
    if isinstance(exc, APIError):
        return exc.code, exc.message
    if isinstance(exc, APITimeoutError):
        return "timeout", str(exc)
    if isinstance(exc, APIConnectionError):
        where = f" (is the service running at {base_url}?)" if base_url else ""
        return "connection_error", f"{exc}{where}"
    if isinstance(exc, ConfigError):
        return "config_error", str(exc)
    if isinstance(exc, ResponseValidationError):
        return "invalid_response", str(exc)
    if isinstance(exc, OSError | ValueError):
        return "invalid_input", str(exc)
    return "error", f"{type(exc).__name__}: {exc}"
