"""A local Lambda execution environment: one process, one function, one invocation at a time.

Started by :mod:`skyloop.local.lambda_runtime` (forked from a server that has
already imported what handlers need, so a new environment is ready in tens of
milliseconds). Like Lambda, the environment keeps its module state between
invocations and never runs two at once. Its boto3 clients reach the stack's
moto through the pipe to the stack process (a botocore ``before-send`` hook,
the same seam moto itself uses in-process), except DynamoDB's, which go
straight to the stack's DynamoDB process when it runs one
(:mod:`skyloop.local.dynamodb_process`); its appends' stream wake-ups are
forwarded to the stack too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import threading
import traceback
from typing import TYPE_CHECKING, Any

import botocore.handlers
from botocore.awsrequest import AWSResponse, HeadersDict

# Imported here so the fork server loads them once and every environment starts warm.
import skyloop.api.app
import skyloop.harnesses.openai_responses
import skyloop.turns.steps  # noqa: F401
from skyloop import function_identity
from skyloop.local import aws_shortcut, dynamodb_process, iam, moto_core, trace
from skyloop.local.aws_dispatch import name_process
from skyloop.local.handlers import LocalContext, error_envelope, handler_for
from skyloop.local.persistence.dynamodb import DEFER_HEADER, DEFERRED, DEFERRED_SYNC_FUNCTIONS
from skyloop.store import notifier

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection


_channel: list[Any] = []  # this environment's pipe to the stack, set when it starts serving
_dynamodb: list[dynamodb_process.Remote] = []  # the stack's DynamoDB process, when it runs one
_sync: list[tuple[str, str]] = []  # the header a turn step's DynamoDB requests carry (see main)


def preload() -> None:
    """In the fork server: load every handler and build the AWS clients, so forks start warm.

    The clients' requests go through the forwarder registered here, which uses
    the pipe of whichever environment (child) later sends them.
    """
    from skyloop import aws_session, deps, manifest
    from skyloop.local.handlers import handler_for

    trace.install()  # with SKYLOOP_LOCAL_TRACE set: before any client exists (they copy the hooks)
    iam.install()  # every call an environment makes is checked against its function's role
    aws_session.share_loader()  # any session a handler's library builds shares the clients' parsed models
    botocore.handlers.BUILTIN_HANDLERS.append(("before-send", _forward))
    aws_shortcut.install(_send)
    moto_core.skip_signing()
    _channel[:] = [_Canned()]  # warm each client's request path once (endpoints, signing, parsing)
    try:
        deps.client("dynamodb").get_item(TableName="warm-up", Key={"pk": {"S": "x"}})
        deps.client("stepfunctions").describe_execution(executionArn=_WARM_ARN)
        deps.client("lambda").get_function(FunctionName="warm-up")
        # signed (only the hot services skip signing): missing credentials fail here, at start
        deps.client("secretsmanager").describe_secret(SecretId="warm-up")
    finally:
        _channel.clear()
    for spec in manifest.FUNCTIONS:
        if spec.local:
            handler_for(spec.name)
    _warm_openai()
    _preload_lazy_imports()


def _preload_lazy_imports() -> None:
    """What a first model step or message imports lazily, imported here once for every environment.

    A module imported in an environment is its own copy (tens of MB over a
    few environments); imported here, every fork shares it.
    """
    import importlib

    for module in (
        "aws_lambda_powertools.utilities.parameters",  # the model key's read
        "skyloop.outbound",
        "skyloop.models.tools",
    ):
        importlib.import_module(module)

    "warm-up.invalid".encode("idna")  # the model URL's host: encodings.idna and stringprep


def _warm_openai() -> None:
    """Stream one scripted text and one tool-call response through the SDK, in memory.

    The SDK loads its resources lazily and pydantic builds each event type's
    validator on first use: a quarter of a second of CPU that every new
    environment would otherwise pay on its first model call.
    """
    import httpx2
    import openai

    from skyloop.mockllm._sse import response_events, sse_frame
    from skyloop.mockllm._state import QueuedResponse, ToolCall

    entries = [
        QueuedResponse(text="warm up", stream=True),
        QueuedResponse(tool_calls=[ToolCall(name="Warm", arguments="{}")]),
    ]
    answered: list[QueuedResponse] = []

    def answer(_request: httpx2.Request) -> httpx2.Response:
        entry = entries[len(answered) % len(entries)]
        answered.append(entry)
        body = "".join(sse_frame(e) for e in response_events(entry, "warm-up"))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    client = openai.OpenAI(
        api_key="warm-up",
        base_url="http://warm-up.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )
    for _ in entries:
        with client.responses.create(model="warm-up", input="warm up", stream=True) as stream:
            for _event in stream:
                pass
    client.close()
    httpx2.HTTPTransport().close()  # the real transport's modules (httpcore2, h11) load on first use


_WARM_ARN = "arn:aws:states:us-east-1:123456789012:execution:warm-up:warm-up"


class _Canned:
    """Answers the fork server's own warm-up requests with an empty success."""

    def call(self, *_request: Any) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, b"{}"


class Channel:
    """The environment's pipe to the stack, shared by every thread of the environment.

    One thread (:meth:`serve`) reads it: invocations go to ``on_invoke``, answers
    to AWS requests go back to the thread waiting for them (each request has an
    id), so the invocations an environment runs at once can each call AWS.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self._ids = itertools.count()
        self._waiting: dict[int, tuple[threading.Event, list[Any]]] = {}
        self.closed = False

    def call(self, *request: Any) -> Any:
        """One AWS request ``(method, url, headers, body)``; its ``(status, headers, body)``."""
        call_id = next(self._ids)
        done, answer = threading.Event(), list[Any]()
        self._waiting[call_id] = (done, answer)
        try:
            self.send(("aws", call_id, *request))
            while not done.wait(1.0):
                if self.closed:
                    raise ConnectionError("the local stack has gone away")
        finally:
            self._waiting.pop(call_id, None)
        return answer[0]

    def send(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.send(message)

    def serve(self, on_invoke: Callable[[int, bytes, tuple[Any, ...]], None]) -> None:
        """Read the pipe until the stack closes it."""
        try:
            while True:
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return
                if message[0] == "aws":
                    waiting = self._waiting.get(message[1])
                    if waiting is not None:
                        waiting[1].append(message[2])
                        waiting[0].set()
                elif message[0] == "notify":  # forwarded by the stack (an output recorded elsewhere)
                    notifier.deliver(message[1], message[2])
                else:
                    _, invocation_id, payload, context_fields = message
                    on_invoke(invocation_id, payload, context_fields)
        finally:
            self.closed = True


# Services outside the local stack: their requests go to the network (a real model, or the scripted one).
PASSTHROUGH_EVENTS = ("before-send.bedrock-runtime",)


def _forward(request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
    """botocore ``before-send``: answer the request from the stack's moto instead of the network."""
    if event_name.startswith(PASSTHROUGH_EVENTS):
        return None
    if not _channel:
        raise RuntimeError("an AWS call from the local Lambda fork server itself")
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode()
    headers = list(request.headers.items())
    if aws_shortcut.is_dynamodb(request.method, request.url):
        headers += _sync
    if _dynamodb and aws_shortcut.is_dynamodb(request.method, request.url):
        status, out_headers, out_body = _dynamodb[0].call(request.method, request.url, headers, body or b"")
    else:
        status, out_headers, out_body = _channel[0].call(request.method, request.url, headers, body or b"")
    return AWSResponse(request.url, status, HeadersDict(out_headers), aws_shortcut.BufferedBody(out_body))


def _send(method: str, url: str, headers: list[tuple[str, Any]], body: bytes) -> Any:
    """A DynamoDB request to the stack's DynamoDB process, else its moto (see :mod:`skyloop.local.aws_shortcut`)."""
    headers = headers + _sync
    if _dynamodb:
        return _dynamodb[0].call(method, url, headers, body)
    if not _channel:
        raise RuntimeError("an AWS call from the local Lambda fork server itself")
    return _channel[0].call(method, url, headers, body)


def main(conn: Connection, function_name: str, environment: dict[str, str]) -> None:
    """Serve invocations of ``function_name`` until the stack closes the pipe.

    Each invocation runs on a thread of its own; the stack sends an
    environment as many at once as its function allows (one, except for the
    turn function: see :data:`skyloop.local.lambda_runtime.CONCURRENCY`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stack, which then closes the pipe
    name_process(function_name)
    os.environ.clear()
    os.environ.update(environment)
    function_identity.set_process(function_name)
    channel = Channel(conn)
    _channel[:] = [channel]
    remote = dynamodb_process.remote_from_env(environment)  # connects on first use, in this process
    _dynamodb[:] = [remote] if remote is not None else []
    if ("before-send", _forward) not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append(("before-send", _forward))
    notifier.set_publisher(lambda session_id, kind: channel.send(("notify", session_id, kind)))
    # A turn step's reads and writes answer no client: they need not wait for the data directory's
    # disk (what a client is then told or shown waits for it; see persistence.dynamodb.DEFER_HEADER)
    _sync[:] = [(DEFER_HEADER, DEFERRED)] if function_name in DEFERRED_SYNC_FUNCTIONS else []
    handler = handler_for(function_name)

    def run(invocation_id: int, payload: bytes, context_fields: tuple[Any, ...]) -> None:
        context = LocalContext(*context_fields)
        try:
            event = json.loads(payload) if payload else {}
            body, failed = json.dumps(handler(event, context)).encode(), False
        except Exception as exc:  # Lambda's unhandled-error envelope
            envelope = error_envelope(type(exc).__name__, str(exc), traceback.format_tb(exc.__traceback__))
            body, failed = json.dumps(envelope).encode(), True
        with contextlib.suppress(EOFError, OSError):  # the stack is gone: nobody waits for it
            channel.send(("result", invocation_id, body, failed))

    def start(invocation_id: int, payload: bytes, context_fields: tuple[Any, ...]) -> None:
        threading.Thread(
            target=run, args=(invocation_id, payload, context_fields), name=f"invocation-{invocation_id}"
        ).start()

    channel.serve(start)
