"""What the two OpenAI-SDK harnesses share: the key, the cached client, and the error mapping."""

from __future__ import annotations

import contextlib
import functools
import os
from typing import TYPE_CHECKING, Any

from skyloop.errors import ModelCallError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.models.agent import AgentSpec

MAX_RETRIES = 3
MIN_ATTEMPT_TIMEOUT_S = 5.0
NO_KEY = "not-needed"  # servers that need no key still get a string: the SDK requires one


def api_key(spec: AgentSpec, *, required: bool) -> str:
    auth = spec.executor.auth
    key = (auth.api_key.get_secret_value() if auth and auth.api_key else None) or os.environ.get(
        "OPENAI_API_KEY"
    )
    if key:
        return key
    if required:
        raise ModelCallError(
            "no API key: set executor.auth.api_key or OPENAI_API_KEY", code="model_auth_error"
        )
    return NO_KEY


def client_for(spec: AgentSpec, key: str, timeout_s: float) -> Any:
    """The cached client of the agent's endpoint, with a per-attempt timeout that keeps retries inside ``timeout_s``."""
    auth = spec.executor.auth
    per_attempt = max(MIN_ATTEMPT_TIMEOUT_S, timeout_s / (MAX_RETRIES + 1))
    return _client(key, auth.base_url if auth and auth.base_url else None).with_options(timeout=per_attempt)


@functools.lru_cache(maxsize=32)
def _client(key: str, base_url: str | None) -> Any:
    """One SDK client per endpoint and key, reused by a warm container.

    Building a client builds an HTTP connection pool and a TLS context (tens of
    milliseconds of CPU); the SDK's clients are thread-safe.
    """
    import openai

    if base_url is None:  # OpenAI's own API: no outbound check to keep
        return openai.OpenAI(api_key=key, max_retries=MAX_RETRIES)
    from skyloop.pinned_http import httpx2_transport

    # the agent's endpoint: each connection goes to the address its check passed (skyloop.pinned_http)
    http_client = openai.DefaultHttpxClient(transport=httpx2_transport("executor.auth.base_url"))
    return openai.OpenAI(api_key=key, base_url=base_url, max_retries=MAX_RETRIES, http_client=http_client)


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """The SDK's exceptions as ModelCallError with skyloop's codes (after the SDK's own retries)."""
    import openai

    try:
        yield
    except openai.APIStatusError as exc:
        raise ModelCallError(
            f"model endpoint answered {exc.status_code}: {short(exc.message)}",
            code="model_rate_limited" if exc.status_code == 429 else "model_http_error",
            retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
        ) from exc
    except openai.APITimeoutError as exc:
        raise ModelCallError("model call timed out", code="model_timeout", retryable=True) from exc
    except openai.APIConnectionError as exc:
        raise ModelCallError(
            f"model endpoint unreachable: {exc}", code="model_unreachable", retryable=True
        ) from exc
    except openai.APIError as exc:  # e.g. an error object inside an otherwise good stream
        raise ModelCallError(f"model endpoint error: {short(str(exc))}", code="model_error") from exc
