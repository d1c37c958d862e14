"""Harness ``bedrock-converse``: Amazon Bedrock's ConverseStream through boto3, signed with the function's role.

``executor.model`` is a model id (``anthropic.claude-3-5-haiku-20241022-v1:0``),
an inference-profile id (``us.anthropic...``) or an ARN; the region is
``executor.region``, else the ARN's, else ``SKYLOOP_BEDROCK_REGION``, else the
function's own. No key: boto3's credential chain signs the request (the Lambda
role in the cloud). ``SKYLOOP_BEDROCK_ACCESS_KEY_ID``/``_SECRET_ACCESS_KEY``/
``_SESSION_TOKEN`` or ``SKYLOOP_BEDROCK_PROFILE`` override it: ``skyloop dev``
captures the user's real AWS identity there before moto replaces the
process's AWS environment. ``executor.auth.base_url`` (or
``SKYLOOP_BEDROCK_ENDPOINT_URL``) overrides the endpoint, e.g. to
``skyloop mock-llm``'s root URL.

Retries are ours, not botocore's: throttling, unavailability, internal and
stream errors are retried with exponential backoff inside ``timeout_s``, but
only while no text has been streamed (a retry after deltas would splice two
answers together).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import os
import random
import re
import time
from typing import TYPE_CHECKING, Any

from skyloop.errors import ModelCallError
from skyloop.harnesses.base import FunctionCall, ModelResult, Usage
from skyloop.ids import new_id

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from skyloop.models.agent import AgentSpec
    from skyloop.models.session import ClientTool, ConversationItem

MAX_ATTEMPTS = 4
BACKOFF_S = 0.5  # the first retry's wait; doubles each time, with jitter, capped at MAX_BACKOFF_S
MAX_BACKOFF_S = 8.0
READ_TIMEOUT_S = 120.0  # the longest silence between two stream events
CONNECT_TIMEOUT_S = 10.0
DEFAULT_REGION = "us-east-1"
NO_OUTPUT = "(no output: the call was cancelled before it answered)"
EMPTY_OUTPUT = "(empty output)"  # Bedrock refuses blank text blocks
# Exceptions worth another attempt (lower-cased: in-stream exceptions are named in lower camel case).
RETRYABLE = {
    "throttlingexception",
    "serviceunavailableexception",
    "internalserverexception",
    "modelstreamerrorexception",
    "modelnotreadyexception",
    "modeltimeoutexception",
}
AUTH_ERRORS = {"accessdeniedexception", "unrecognizedclientexception", "expiredtokenexception"}
IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DATA_URL = re.compile(r"^data:(?P<mime>image/[a-z0-9.+-]+);base64,(?P<data>.*)$", re.IGNORECASE | re.DOTALL)
_ARN_REGION = re.compile(r"^arn:aws[a-z-]*:bedrock:(?P<region>[a-z0-9-]+):")


# -- conversation mapping ---------------------------------------------------------------


def to_messages(items: list[ConversationItem]) -> list[dict[str, Any]]:
    """Conversation items as Converse messages.

    Converse wants user and assistant messages to alternate, the calls of one
    response as ``toolUse`` blocks of one assistant message, and every one of
    them answered by a ``toolResult`` block in the user message right after.
    skyloop's items are in arrival order, where a steering message can sit
    between a call and its output, so results are placed right after their
    calls; a call that never got an output (or was cancelled) is answered
    with ``status: error`` so the history stays valid. Consecutive messages of
    one role are merged.
    """
    outputs = {
        item.data["call_id"]: str(item.data.get("output", ""))
        for item in items
        if item.type == "function_call_output"
    }
    builder = _Messages(outputs)
    for item in items:
        d = item.data
        if item.type == "function_call":
            builder.call(d["call_id"], d["name"], d.get("arguments"))
        elif item.type == "function_call_output":
            builder.output_seen(d.get("call_id"))
        elif item.type == "message":
            builder.flush_calls()
            role = "assistant" if d.get("role") == "assistant" else "user"
            builder.add(role, _content_blocks(d.get("content")))
    builder.flush_calls()
    return builder.messages


class _Messages:
    """Converse messages being assembled: same-role blocks merge, calls wait for their response to end."""

    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs
        self.messages: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # the toolUse blocks of the response being assembled
        self.answered = False  # an output of a pending call was seen: the next call is another response's

    def add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": role, "content": list(blocks)})

    def call(self, call_id: str, name: str, arguments: Any) -> None:
        if self.answered:
            self.flush_calls()
        self.pending.append({"toolUseId": call_id, "name": name, "input": _tool_input(arguments)})

    def output_seen(self, call_id: Any) -> None:
        self.answered = self.answered or any(use["toolUseId"] == call_id for use in self.pending)

    def flush_calls(self) -> None:
        """The pending calls as one assistant message's toolUse blocks, their results in the next user message."""
        from skyloop.models.session import CANCELLED_OUTPUT

        if not self.pending:
            return
        self.add("assistant", [{"toolUse": use} for use in self.pending])
        results = []
        for use in self.pending:
            output = self.outputs.get(use["toolUseId"])
            text = NO_OUTPUT if output is None else (output or EMPTY_OUTPUT)
            result: dict[str, Any] = {"toolUseId": use["toolUseId"], "content": [{"text": text}]}
            if output is None or output == CANCELLED_OUTPUT:
                result["status"] = "error"
            results.append({"toolResult": result})
        self.add("user", results)
        self.pending = []
        self.answered = False


def _tool_input(arguments: Any) -> dict[str, Any]:
    """A call's JSON arguments as the object Converse wants (anything else becomes ``{}``)."""
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """Text and image blocks; blank text is dropped (Converse refuses it)."""
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "input_image":
            blocks.append(image_block(str(block.get("image_url", ""))))
        elif isinstance(block.get("text"), str) and block["text"].strip():
            blocks.append({"text": block["text"]})
    return blocks


def image_block(url: str) -> dict[str, Any]:
    """A ``data:image/...;base64,`` URL as an inline ``image`` block; anything else as a note.

    The API refuses other images for this harness up front; a note keeps a
    history that predates the check sendable.
    """
    match = _DATA_URL.match(url)
    fmt = IMAGE_FORMATS.get(match["mime"].lower()) if match else None
    if match and fmt:
        with contextlib.suppress(binascii.Error, ValueError):
            return {
                "image": {"format": fmt, "source": {"bytes": base64.b64decode(match["data"], validate=True)}}
            }
    return {"text": "[an image was attached that Bedrock cannot take: only inline png, jpeg, gif or webp]"}


def to_tools(tools: list[ClientTool], items: list[ConversationItem]) -> list[dict[str, Any]]:
    """Client tools as ``toolSpec``s, plus a stub for every tool the history calls that is no longer offered:
    Converse refuses ``toolUse`` blocks in a request that declares no such tool."""
    specs = []
    for t in tools:
        spec: dict[str, Any] = {
            "name": t.name,
            "inputSchema": {"json": t.parameters or {"type": "object", "properties": {}}},
        }
        if t.description:
            spec["description"] = t.description
        specs.append({"toolSpec": spec})
    offered = {t.name for t in tools}
    for name in dict.fromkeys(i.data["name"] for i in items if i.type == "function_call"):
        if name not in offered:
            stub = {"type": "object", "properties": {}}
            specs.append(
                {
                    "toolSpec": {
                        "name": name,
                        "description": "(no longer offered)",
                        "inputSchema": {"json": stub},
                    }
                }
            )
    return specs


def to_request(spec: AgentSpec, items: list[ConversationItem], tools: list[ClientTool]) -> dict[str, Any]:
    """The ``converse_stream`` keyword arguments of one call."""
    request: dict[str, Any] = {"modelId": spec.executor.model, "messages": to_messages(items)}
    if spec.prompt:
        request["system"] = [{"text": spec.prompt}]
    specs = to_tools(tools, items)
    if specs:
        request["toolConfig"] = {"tools": specs}
    inference: dict[str, Any] = {}
    if spec.executor.max_tokens is not None:
        inference["maxTokens"] = spec.executor.max_tokens
    if spec.executor.temperature is not None:
        inference["temperature"] = spec.executor.temperature
    if inference:
        request["inferenceConfig"] = inference
    return request


# -- the client -------------------------------------------------------------------------


def region_for(spec: AgentSpec) -> str:
    arn = _ARN_REGION.match(spec.executor.model)
    return (
        spec.executor.region
        or (arn["region"] if arn else None)
        or os.environ.get("SKYLOOP_BEDROCK_REGION")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or DEFAULT_REGION
    )


def endpoint_for(spec: AgentSpec) -> str | None:
    auth = spec.executor.auth
    return (
        (auth.base_url if auth and auth.base_url else None)
        or os.environ.get("SKYLOOP_BEDROCK_ENDPOINT_URL")
        or None
    )


def credentials() -> tuple[str | None, str | None, str | None, str | None]:
    """(access key, secret key, session token, profile) from ``SKYLOOP_BEDROCK_*``; all None: boto3's chain."""
    env = os.environ.get
    key, secret = (
        env("SKYLOOP_BEDROCK_ACCESS_KEY_ID") or None,
        env("SKYLOOP_BEDROCK_SECRET_ACCESS_KEY") or None,
    )
    if key and secret:
        return key, secret, env("SKYLOOP_BEDROCK_SESSION_TOKEN") or None, None
    return None, None, None, env("SKYLOOP_BEDROCK_PROFILE") or None


def client_for(spec: AgentSpec) -> Any:
    return _client(region_for(spec), endpoint_for(spec), credentials())


@functools.lru_cache(maxsize=32)
def _client(region: str, endpoint_url: str | None, creds: tuple[str | None, ...]) -> Any:
    """One client per (region, endpoint, identity), reused by a warm container; botocore clients are thread-safe.

    botocore's own retries are off: :func:`call_model` retries stream errors too, inside its deadline.
    """
    import boto3
    from botocore.config import Config

    key, secret, token, profile = creds
    session = boto3.session.Session(
        aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token, profile_name=profile
    )
    config = Config(
        retries={"total_max_attempts": 1},
        read_timeout=READ_TIMEOUT_S,
        connect_timeout=CONNECT_TIMEOUT_S,
        user_agent_extra="skyloop",
    )
    return session.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url, config=config)


# -- the call ---------------------------------------------------------------------------


def call_model(
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """Stream one response; text deltas go to ``on_delta``; retryable failures are retried before any text."""
    deadline = time.monotonic() + timeout_s
    request = to_request(spec, items, tools)
    streamed = False

    def relay(text: str) -> None:
        nonlocal streamed
        streamed = True
        on_delta(text)

    attempt = 0
    while True:
        attempt += 1
        try:
            with mapped_errors():
                client = client_for(spec)
                response = client.converse_stream(**request)
                result = read_stream(response["stream"], relay, deadline=deadline)
            return result.model_copy(update={"model": spec.executor.model})
        except ModelCallError as exc:
            wait = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
            if (
                not exc.retryable
                or streamed
                or attempt >= MAX_ATTEMPTS
                or time.monotonic() + wait >= deadline
            ):
                raise
            time.sleep(wait)


class _ToolUse:
    def __init__(self, tool_use_id: str, name: str) -> None:
        self.id = tool_use_id
        self.name = name
        self.input: list[str] = []


class _Assembly:
    """A ConverseStream response being put together from boto3's parsed events."""

    def __init__(self, on_delta: Callable[[str], None]) -> None:
        self.on_delta = on_delta
        self.texts: list[str] = []
        self.uses: dict[int, _ToolUse] = {}
        self.stop_reason: str | None = None
        self.usage: Usage | None = None

    def add(self, event: dict[str, Any]) -> None:
        if "contentBlockStart" in event:
            body = event["contentBlockStart"]
            start = (body.get("start") or {}).get("toolUse")
            if start:
                self.uses[body["contentBlockIndex"]] = _ToolUse(
                    start.get("toolUseId", ""), start.get("name", "")
                )
        elif "contentBlockDelta" in event:
            body = event["contentBlockDelta"]
            delta = body.get("delta") or {}
            if delta.get("text"):
                self.texts.append(delta["text"])
                self.on_delta(delta["text"])
            elif "toolUse" in delta:
                use = self.uses.get(body["contentBlockIndex"])
                if use is None:
                    raise ModelCallError(
                        "tool input streamed before its contentBlockStart", code="model_error"
                    )
                use.input.append(delta["toolUse"].get("input", ""))
        elif "messageStop" in event:
            self.stop_reason = event["messageStop"].get("stopReason") or "end_turn"
        elif "metadata" in event:
            usage = event["metadata"].get("usage") or {}
            self.usage = Usage(
                input_tokens=usage.get("inputTokens") or 0, output_tokens=usage.get("outputTokens") or 0
            )

    def result(self) -> ModelResult:
        if self.stop_reason is None:
            raise ModelCallError("model stream ended without messageStop", retryable=True)
        if self.stop_reason == "content_filtered":
            raise ModelCallError("the model's content filter stopped the response", code="model_error")
        calls = []
        for index in sorted(self.uses):
            use = self.uses[index]
            if not use.name:
                raise ModelCallError(f"tool use {index} streamed without a name", code="model_error")
            calls.append(
                FunctionCall(
                    call_id=use.id or "call_" + new_id(), name=use.name, arguments="".join(use.input) or "{}"
                )
            )
        usage = self.usage.to_api() if self.usage else None
        return ModelResult(text="".join(self.texts), calls=calls, usage=usage)


def read_stream(
    events: Iterable[dict[str, Any]], on_delta: Callable[[str], None], *, deadline: float | None = None
) -> ModelResult:
    """Assemble a ConverseStream into one result; text deltas go on as they arrive."""
    assembly = _Assembly(on_delta)
    try:
        for event in events:
            assembly.add(event)
            if deadline is not None and time.monotonic() > deadline:
                raise ModelCallError("model call timed out", code="model_timeout", retryable=True)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return assembly.result()


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """botocore's exceptions as ModelCallError with skyloop's codes, and whether another attempt may help."""
    from botocore import exceptions as bx

    try:
        yield
    except bx.ClientError as exc:  # EventStreamError (in-stream) is one too
        raise _client_error(exc) from exc
    except (bx.ReadTimeoutError, bx.ConnectTimeoutError) as exc:
        raise ModelCallError("model call timed out", code="model_timeout", retryable=True) from exc
    except (bx.EndpointConnectionError, bx.ConnectionClosedError) as exc:
        raise ModelCallError(f"Bedrock unreachable: {exc}", code="model_unreachable", retryable=True) from exc
    except (bx.NoCredentialsError, bx.PartialCredentialsError, bx.ProfileNotFound) as exc:
        raise ModelCallError(
            f"no AWS credentials for Bedrock: {exc} (the function's role, or SKYLOOP_BEDROCK_* locally)",
            code="model_auth_error",
        ) from exc
    except bx.BotoCoreError as exc:
        raise ModelCallError(f"Bedrock call failed: {exc}", code="model_error") from exc


def _client_error(exc: Any) -> ModelCallError:
    error = exc.response.get("Error") or {}
    name = str(error.get("Code") or "UnknownError")
    name = name[:1].upper() + name[1:]  # in-stream exceptions are named like their event member
    message = str(error.get("Message") or "")
    status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    where = f"Bedrock answered {status} {name}" if status else f"Bedrock stream failed with {name}"
    text = f"{where}: {message}" if message else where
    lowered = name.lower()
    if lowered == "throttlingexception":
        return ModelCallError(text, code="model_rate_limited", retryable=True)
    if lowered == "modeltimeoutexception":
        return ModelCallError(text, code="model_timeout", retryable=True)
    if lowered in RETRYABLE:
        return ModelCallError(text, code="model_http_error", retryable=True)
    if lowered in AUTH_ERRORS or status in (401, 403):
        return ModelCallError(text, code="model_auth_error")
    return ModelCallError(text, code="model_http_error")
