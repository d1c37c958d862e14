"""Unit: Standard Webhooks signatures (checked by two independent verifiers), the retry schedule, URL checks,
the SDK's verify helper, and the delivery functions' small import graphs."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from skyloop import manifest
from skyloop.client import SessionActionRequired, WebhookVerificationError, verify_webhook
from skyloop.errors import InvalidInputError
from skyloop.lifecycle_events import SessionFacts, derive
from skyloop.settings import Settings
from skyloop.store import StoredEvent
from skyloop.webhooks.delivery import new_secret, next_delay, signed_headers
from skyloop.webhooks.service import check_url

BODY = json.dumps(
    {
        "id": "evt_1",
        "object": "event",
        "type": "agent.session.idle",
        "created_at": 1,
        "data": {"id": "s", "environment_type": "none"},
    }
)


def test_signatures_verify_with_standardwebhooks_and_openai() -> None:
    from openai import OpenAI
    from standardwebhooks.webhooks import Webhook

    secret = new_secret()
    assert secret.startswith("whsec_")
    headers = signed_headers("evt_1", BODY, [secret], time.time())
    assert headers["webhook-id"] == "evt_1"
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(BODY, headers)["id"] == "evt_1"
    unwrapped = OpenAI(api_key="x", webhook_secret=secret).webhooks.unwrap(BODY, headers)
    assert unwrapped.type == "agent.session.idle"
    # a changed body, another secret or an old timestamp fail
    with pytest.raises(Exception, match="signature"):
        Webhook(new_secret()).verify(BODY, headers)
    with pytest.raises(Exception, match="signature"):
        Webhook(secret).verify(BODY.replace("idle", "failed"), headers)
    stale = signed_headers("evt_1", BODY, [secret], time.time() - 600)
    with pytest.raises(Exception, match="too old"):
        Webhook(secret).verify(BODY, stale)


def test_during_a_rotation_both_secrets_sign() -> None:
    from standardwebhooks.webhooks import Webhook

    old, new = new_secret(), new_secret()
    headers = signed_headers("evt_1", BODY, [new, old], time.time())
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(BODY, headers)


def test_the_default_schedules() -> None:
    cloud = Settings().retry_schedule
    low, high = (lambda: 0.0), (lambda: 1.0)
    # the cloud retries for at least 24 hours whatever the jitter, each delay within SQS's 12 hours
    assert sum(next_delay(n, cloud, low) or 0 for n in range(1, len(cloud) + 1)) >= 24 * 3600
    assert max(next_delay(n, cloud, high) or 0 for n in range(1, len(cloud) + 1)) <= 12 * 3600
    assert next_delay(len(cloud) + 1, cloud) is None  # then dead
    # the local stack's third attempt comes within 30 s of the first, whatever the jitter
    from skyloop.local.dev import LOCAL_RETRY_SCHEDULE

    local = Settings.model_validate({"SKYLOOP_WEBHOOK_RETRY_SCHEDULE": LOCAL_RETRY_SCHEDULE}).retry_schedule
    assert (next_delay(1, local, high) or 0) + (next_delay(2, local, high) or 0) < 30
    # and the schedule grows (exponential backoff)
    assert all(b > a for a, b in itertools.pairwise(cloud) if b != a)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "http://",
        "example.com/hook",
        "http://example.com:99999/",
        " http://example.com/",
        "http://exa mple.com/",
        "http://10.1.2.3/",
        "http://[::1]/",
        "http://169.254.169.254/",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidInputError):
        check_url(url, Settings())


def test_loopback_only_where_allowed() -> None:
    allowed = Settings.model_validate({"SKYLOOP_OUTBOUND_ALLOW_LOOPBACK": "true"})
    assert check_url("http://127.0.0.1:9/hook", allowed)
    with pytest.raises(InvalidInputError, match="loopback"):
        check_url("http://127.0.0.1:9/hook", Settings())
    assert check_url("https://hooks.example.com/in", Settings())


def test_the_sdk_verifies_and_types_a_delivery() -> None:
    secret = new_secret()
    event = derive(
        SessionFacts(id="s", owner="o"),
        [
            StoredEvent(
                3,
                "response.output_item.done",
                {
                    "item": {
                        "type": "function_call",
                        "status": "action_required",
                        "call_id": "c",
                        "name": "Read",
                        "arguments": "{}",
                        "response_id": "r",
                    }
                },
            )
        ],
        at=time.time(),
    )[0]
    body = event.model_dump_json()
    headers = {k.title(): v for k, v in signed_headers(event.id, body, [secret], time.time()).items()}
    got = verify_webhook(body.encode(), headers, [new_secret(), secret])  # either side of a rotation
    assert isinstance(got, SessionActionRequired)
    assert got.data.required_action.calls[0].call_id == "c"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, headers, new_secret())


CHECK = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {"openai", "starlette", "uvicorn", "mcp", "yaml", "websockets"} or m.startswith(("skyloop.turns", "skyloop.api")))))
"""


@pytest.mark.parametrize("name", ["lifecycle_events", "webhook_delivery"])
def test_the_lifecycle_functions_import_no_heavy_module(name: str) -> None:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SKYLOOP_TABLE_NAME": "t"}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(manifest.by_name(name).handler_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
