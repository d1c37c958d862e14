"""``client.with_raw_response``: every single-request endpoint, answering :class:`RawResponse` instead of a model.

Each entry is the endpoint's request builder in ``_requests`` (named and
called like the client method) wrapped around the transport's raw send, so
the raw methods take exactly the typed methods' arguments and cannot drift
from them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from skyloop.client import _requests as api

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from skyloop.client._requests import ApiCall
    from skyloop.client._transport import AsyncTransport, RawResponse, SyncTransport

__all__ = ["AsyncRawResponses", "RawResponses"]

P = ParamSpec("P")
T = TypeVar("T")


def _sync(transport: SyncTransport, build: Callable[P, ApiCall[T]]) -> Callable[P, RawResponse[T]]:
    def method(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
        return transport.send_raw(build(*args, **kwargs))

    return functools.wraps(build)(method)


def _async(
    transport: AsyncTransport, build: Callable[P, ApiCall[T]]
) -> Callable[P, Coroutine[Any, Any, RawResponse[T]]]:
    async def method(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
        return await transport.send_raw(build(*args, **kwargs))

    return functools.wraps(build)(method)


class RawResponses:
    """``Client.with_raw_response``: the same endpoints, each answering a :class:`RawResponse`.

    Examples:
        >>> raw = client.with_raw_response.list_sessions(limit=5)
        >>> raw.status_code, raw.headers["content-type"]
        (200, 'application/json')
        >>> raw.json()["data"][0]["id"] == raw.parse().data[0].id
        True
    """

    def __init__(self, transport: SyncTransport) -> None:
        self.health = _sync(transport, api.health)
        self.list_runners = _sync(transport, api.list_runners)
        self.runner_status = _sync(transport, api.runner_status)
        self.register_agent = _sync(transport, api.register_agent)
        self.create_agent = _sync(transport, api.create_agent)
        self.list_agents = _sync(transport, api.list_agents)
        self.get_agent = _sync(transport, api.get_agent)
        self.create_session = _sync(transport, api.create_session)
        self.list_sessions = _sync(transport, api.list_sessions)
        self.get_session = _sync(transport, api.get_session)
        self.update_session = _sync(transport, api.update_session)
        self.delete_session = _sync(transport, api.delete_session)
        self.list_items = _sync(transport, api.list_items)
        self.get_session_agent = _sync(transport, api.get_session_agent)
        self.post_event = _sync(transport, api.post_event)
        self.send_message = _sync(transport, api.send_message)
        self.submit_tool_output = _sync(transport, api.submit_tool_output)
        self.interrupt = _sync(transport, api.interrupt)
        self.heartbeat = _sync(transport, api.heartbeat)
        self.create_webhook = _sync(transport, api.create_webhook)
        self.list_webhooks = _sync(transport, api.list_webhooks)
        self.get_webhook = _sync(transport, api.get_webhook)
        self.update_webhook = _sync(transport, api.update_webhook)
        self.delete_webhook = _sync(transport, api.delete_webhook)
        self.rotate_webhook_secret = _sync(transport, api.rotate_webhook_secret)
        self.list_webhook_deliveries = _sync(transport, api.list_webhook_deliveries)
        self.redeliver_webhook = _sync(transport, api.redeliver_webhook)
        self.test_webhook = _sync(transport, api.test_webhook)


class AsyncRawResponses:
    """``AsyncClient.with_raw_response``: :class:`RawResponses`, awaitable."""

    def __init__(self, transport: AsyncTransport) -> None:
        self.health = _async(transport, api.health)
        self.list_runners = _async(transport, api.list_runners)
        self.runner_status = _async(transport, api.runner_status)
        self.register_agent = _async(transport, api.register_agent)
        self.create_agent = _async(transport, api.create_agent)
        self.list_agents = _async(transport, api.list_agents)
        self.get_agent = _async(transport, api.get_agent)
        self.create_session = _async(transport, api.create_session)
        self.list_sessions = _async(transport, api.list_sessions)
        self.get_session = _async(transport, api.get_session)
        self.update_session = _async(transport, api.update_session)
        self.delete_session = _async(transport, api.delete_session)
        self.list_items = _async(transport, api.list_items)
        self.get_session_agent = _async(transport, api.get_session_agent)
        self.post_event = _async(transport, api.post_event)
        self.send_message = _async(transport, api.send_message)
        self.submit_tool_output = _async(transport, api.submit_tool_output)
        self.interrupt = _async(transport, api.interrupt)
        self.heartbeat = _async(transport, api.heartbeat)
        self.create_webhook = _async(transport, api.create_webhook)
        self.list_webhooks = _async(transport, api.list_webhooks)
        self.get_webhook = _async(transport, api.get_webhook)
        self.update_webhook = _async(transport, api.update_webhook)
        self.delete_webhook = _async(transport, api.delete_webhook)
        self.rotate_webhook_secret = _async(transport, api.rotate_webhook_secret)
        self.list_webhook_deliveries = _async(transport, api.list_webhook_deliveries)
        self.redeliver_webhook = _async(transport, api.redeliver_webhook)
        self.test_webhook = _async(transport, api.test_webhook)
