"""Receiving webhooks: verify a delivery's signature and read it as a typed lifecycle event.

Deliveries follow the Standard Webhooks spec, so any of its libraries
verifies them (``standardwebhooks``, Svix's, the ``openai`` SDK's
``client.webhooks.unwrap``); this helper does it with ``standardwebhooks``
and answers the typed event (:mod:`skyloop.lifecycle_events`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyloop.client._errors import SkyloopClientError

if TYPE_CHECKING:
    from collections.abc import Mapping


class WebhookVerificationError(SkyloopClientError):
    """A delivery whose signature, timestamp or headers do not check out: answer 400 and drop it."""


def verify_webhook(payload: bytes | str, headers: Mapping[str, str], secret: str | list[str]) -> Any:
    """The verified event, typed (``SessionActionRequired``, ``SessionIdle``...), or :class:`WebhookVerificationError`.

    ``payload`` is the request body exactly as received; ``headers`` its
    headers (any case); ``secret`` the endpoint's ``whsec_...`` secret, or
    several (both sides of a rotation). Signatures older or newer than five
    minutes are refused (replays). Receivers should still dedupe on
    ``event.id`` (the ``webhook-id`` header): delivery is at least once.

    Examples:
        >>> from skyloop.client import verify_webhook, SessionActionRequired
        >>> event = verify_webhook(request.body, request.headers, os.environ["SKYLOOP_WEBHOOK_SECRET"])
        >>> if isinstance(event, SessionActionRequired):
        ...     for call in event.data.required_action.calls or []:
        ...         client.submit_tool_output(event.data.id, call.call_id, run(call.name, call.arguments))
    """
    from standardwebhooks.webhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError as Refused

    from skyloop.lifecycle_events import parse

    lowered = {k.lower(): v for k, v in headers.items()}
    last: Exception | None = None
    for candidate in [secret] if isinstance(secret, str) else secret:
        try:
            Webhook(candidate).verify(payload, lowered, json_parse=False)
        except Refused as exc:
            last = exc
            continue
        try:
            return parse(payload if isinstance(payload, (bytes, str)) else bytes(payload))
        except ValueError as exc:
            raise WebhookVerificationError(f"a verified delivery of an unknown shape: {exc}") from exc
    raise WebhookVerificationError(f"webhook signature does not verify: {last}")
