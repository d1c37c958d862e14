"""One delivery attempt, per the Standard Webhooks spec, and what follows it; the same in the cloud and locally.

Each attempt posts the event's JSON as stored (the body never changes
between attempts) with ``webhook-id`` (the event id, the same on every
attempt), ``webhook-timestamp`` (this attempt's time: receivers refuse
signatures older than five minutes) and ``webhook-signature`` (``v1,`` +
base64 HMAC-SHA256 of ``id.timestamp.body``, by the ``standardwebhooks``
library; during a rotation's grace period both secrets sign, separated by a
space). A 2xx answer within the timeout counts; anything else (another
status, a redirect, a timeout, a refused connection, a URL that now resolves
where the deployment may not call) is a failure, retried after the next
delay of the schedule with +-10% jitter; after the last one the delivery is
dead, and an endpoint that has failed every attempt for
``SKYLOOP_WEBHOOK_DISABLE_AFTER_S`` is disabled with the reason.

Who calls this: the cloud's ``webhook_delivery`` function, once per queue
message (the queue redelivers on the schedule), and the local stack's
dispatcher (:mod:`skyloop.webhooks.local`). Neither runs in a turn's path, so
a slow or dead receiver never slows a turn.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from skyloop.webhooks.models import Attempt

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from skyloop.settings import Settings
    from skyloop.webhooks.models import Delivery, DeliveryStatus, Endpoint
    from skyloop.webhooks.records import WebhookRecords

log = logging.getLogger("skyloop.webhooks")
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
JITTER = 0.1
USER_AGENT = "skyloop-webhooks/1"
_client: httpx.Client | None = None


def new_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes (the Standard Webhooks secret format)."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(SECRET_BYTES)).decode()


def signed_headers(event_id: str, body: str, secrets: list[str], at: float) -> dict[str, str]:
    """The headers of one attempt: id, this attempt's timestamp, one signature per live secret."""
    from standardwebhooks.webhooks import Webhook  # stdlib only; loaded where something is signed

    stamp = datetime.fromtimestamp(int(at), UTC)
    signatures = " ".join(Webhook(secret).sign(event_id, stamp, body) for secret in secrets)
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": signatures,
    }


def next_delay(
    attempt: int, schedule: tuple[float, ...], rng: Callable[[], float] = random.random
) -> float | None:
    """Seconds before attempt ``attempt + 1`` after attempt ``attempt`` failed; None: no more attempts."""
    if attempt > len(schedule):
        return None
    base = schedule[attempt - 1]
    return max(0.0, base * (1 - JITTER + 2 * JITTER * rng()))


@dataclass(frozen=True)
class Outcome:
    """What the caller does next: nothing (``succeeded``/``dead``), or try again after ``delay_s``."""

    status: DeliveryStatus
    attempt: Attempt | None
    delay_s: float | None = None


def http_client(timeout_s: float) -> httpx.Client:
    """One pooled client per process; redirects are failures, never followed (they could point inward),
    and each connection goes to the address its check passed (:mod:`skyloop.pinned_http`)."""
    global _client
    if _client is None:
        import httpx

        from skyloop.pinned_http import httpx_transport

        _client = httpx.Client(
            timeout=timeout_s,
            follow_redirects=False,
            trust_env=False,
            transport=httpx_transport("webhook url"),
        )
    return _client


def post(
    endpoint: Endpoint, delivery: Delivery, settings: Settings, *, at: float
) -> tuple[int | None, str | None]:
    """POST the delivery once: ``(status code, error)``; the URL is checked again first (names move)."""
    import httpx

    from skyloop import outbound

    try:
        outbound.check_url(endpoint.url, settings, what="webhook url")
    except outbound.OutboundUrlError as refused:
        return None, refused.message
    headers = signed_headers(delivery.id, delivery.body, endpoint.secrets(at), at)
    try:
        response = http_client(settings.webhook_timeout_s).post(
            endpoint.url, content=delivery.body.encode(), headers=headers, timeout=settings.webhook_timeout_s
        )
    except httpx.TimeoutException:
        return None, f"no answer within {settings.webhook_timeout_s:g} s"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]
    return response.status_code, None


def attempt(
    records: WebhookRecords,
    endpoint: Endpoint | None,
    delivery: Delivery,
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    rng: Callable[[], float] = random.random,
) -> Outcome:
    """Attempt ``delivery``, record it, and say what comes next.

    Its number counts from 1 again after a redelivery (which sets the status back to ``pending``).
    """
    now = clock()
    number = 1 if delivery.status == "pending" or not delivery.attempts else delivery.attempts[-1].attempt + 1
    if delivery.status in ("succeeded",):
        return Outcome("succeeded", None)  # a duplicate of a delivered message: nothing to do
    if endpoint is None:
        return Outcome("dead", None)  # the endpoint was deleted, with its deliveries
    if endpoint.status != "enabled":
        record = Attempt(
            attempt=number,
            at=round(now, 3),
            status="failed",
            latency_ms=0,
            error=f"endpoint disabled: {endpoint.disabled_reason or 'by its owner'}",
        )
        records.record_attempt(delivery, record, "dead", None)
        return Outcome("dead", record)
    code, error = post(endpoint, delivery, settings, at=now)
    done = clock()
    ok = code is not None and 200 <= code < 300
    if code is not None and not ok:
        error = f"HTTP {code}"
    delay = None if ok else next_delay(number, settings.retry_schedule, rng)
    status: DeliveryStatus = "succeeded" if ok else ("retrying" if delay is not None else "dead")
    next_at = round(done + delay, 3) if delay is not None else None
    record = Attempt(
        attempt=number,
        at=round(now, 3),
        status="succeeded" if ok else "failed",
        response_code=code,
        latency_ms=int((done - now) * 1000),
        error=error,
        next_retry_at=next_at,
    )
    records.record_attempt(delivery, record, status, next_at)
    if ok == (endpoint.failing_since is not None):  # only a change of state is written
        records.note_result(endpoint.id, succeeded=ok, at=int(now))
    if status == "dead":
        _maybe_disable(records, endpoint, int(done), settings, error)
    return Outcome(status, record, delay)


def _maybe_disable(
    records: WebhookRecords, endpoint: Endpoint, now: int, settings: Settings, error: str | None
) -> None:
    """A dead delivery to an endpoint that has failed everything for long enough disables it."""
    fresh = records.get_endpoint(endpoint.id)
    if fresh is None or fresh.failing_since is None:
        return
    if now - fresh.failing_since < settings.webhook_disable_after_s:
        return
    since = datetime.fromtimestamp(fresh.failing_since, UTC).isoformat(timespec="seconds")
    reason = f"every delivery failed since {since} (last: {error or 'failed'}); PATCH enabled=true to resume"
    if records.disable(endpoint.id, reason, at=now):
        log.warning("webhook endpoint %s disabled: %s", endpoint.id, reason)
