"""``client.with_raw_response``: every single-request endpoint, answering :class:`RawResponse` instead of a model.

Each entry is the endpoint's request builder in ``_requests`` (named and
called like the client method) wrapped around the transport's raw send, so
the raw methods take exactly the typed methods' arguments and cannot drift
from them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from skyloop.client import _requests as api

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from skyloop.client._async._transport import AsyncTransport
    from skyloop.client._requests import ApiCall
    from skyloop.client._transport import RawResponse

__all__ = ["AsyncRawResponses"]

P = ParamSpec("P")
T = TypeVar("T")


def _raw(transport: AsyncTransport, build: Callable[P, ApiCall[T]]) -> Callable[P, Awaitable[RawResponse[T]]]:
    async def method(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
        return await transport.send_raw(build(*args, **kwargs))

    return functools.wraps(build)(method)


class AsyncRawResponses:
    """``AsyncClient.with_raw_response``: the same endpoints, each answering a :class:`RawResponse`.

    Examples:
        >>> raw = await client.with_raw_response.list_sessions(limit=5)
        >>> raw.status_code, raw.headers["content-type"]
        (200, 'application/json')
        >>> raw.json()["data"][0]["id"] == raw.parse().data[0].id
        True
    """

    def __init__(self, transport: AsyncTransport) -> None:
        self.health = _raw(transport, api.health)
        self.list_runners = _raw(transport, api.list_runners)
        self.runner_status = _raw(transport, api.runner_status)
        self.register_agent = _raw(transport, api.register_agent)
        self.create_agent = _raw(transport, api.create_agent)
        self.list_agents = _raw(transport, api.list_agents)
        self.get_agent = _raw(transport, api.get_agent)
        self.create_session = _raw(transport, api.create_session)
        self.list_sessions = _raw(transport, api.list_sessions)
        self.get_session = _raw(transport, api.get_session)
        self.update_session = _raw(transport, api.update_session)
        self.delete_session = _raw(transport, api.delete_session)
        self.list_items = _raw(transport, api.list_items)
        self.get_session_agent = _raw(transport, api.get_session_agent)
        self.post_event = _raw(transport, api.post_event)
        self.send_message = _raw(transport, api.send_message)
        self.submit_tool_output = _raw(transport, api.submit_tool_output)
        self.interrupt = _raw(transport, api.interrupt)
        self.heartbeat = _raw(transport, api.heartbeat)
        self.create_webhook = _raw(transport, api.create_webhook)
        self.list_webhooks = _raw(transport, api.list_webhooks)
        self.get_webhook = _raw(transport, api.get_webhook)
        self.update_webhook = _raw(transport, api.update_webhook)
        self.delete_webhook = _raw(transport, api.delete_webhook)
        self.rotate_webhook_secret = _raw(transport, api.rotate_webhook_secret)
        self.list_webhook_deliveries = _raw(transport, api.list_webhook_deliveries)
        self.redeliver_webhook = _raw(transport, api.redeliver_webhook)
        self.test_webhook = _raw(transport, api.test_webhook)
        self.create_scheduled_task = _raw(transport, api.create_scheduled_task)
        self.list_scheduled_tasks = _raw(transport, api.list_scheduled_tasks)
        self.get_scheduled_task = _raw(transport, api.get_scheduled_task)
        self.update_scheduled_task = _raw(transport, api.update_scheduled_task)
        self.delete_scheduled_task = _raw(transport, api.delete_scheduled_task)
        self.run_scheduled_task = _raw(transport, api.run_scheduled_task)
        self.list_scheduled_runs = _raw(transport, api.list_scheduled_runs)
