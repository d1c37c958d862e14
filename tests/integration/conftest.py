"""Integration fixtures: the whole stack on in-process moto, with the real handlers and a scripted LLM.

* ``aws`` (module scope): ``mock_aws`` with real Step Functions execution, the
  Lambda hook (moto's Lambda runs ``functions/<name>/handler.py``), the
  environment, and the table, functions and state machine built by
  ``skyloop.local.resources.bootstrap`` from the same manifest and ASL as the
  cloud. One stack per module; tests stay independent by using their own
  sessions (and their own agent names and model keys).
* ``mock_llm`` (session scope): ``skyloop.mockllm`` under uvicorn on a free port.
* ``api``: calls the API function's real entry point with HTTP API v2 events.

Every handler's AWS calls (the API's, and the turn steps' run through moto's
Lambda) are checked against the function's deployed role (:mod:`skyloop.local.iam`);
the tests' own setup and assertions call as nobody and are not checked.

moto caveat handled here: moto's DynamoDB backend serves requests without any
lock, and its ``TransactWriteItems`` deep-copies the table up front and
*restores that copy* when any condition fails, so a transaction racing another
thread's write can silently undo it. Real DynamoDB is linearizable per request.
``_serialize_dynamodb`` wraps moto's DynamoDB dispatch in one lock so the
store's own optimistic concurrency (condition on ``last_seq``, retry) is what
the concurrent tests exercise, not moto's races.
"""

from __future__ import annotations

import base64
import importlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn
from moto import mock_aws

from skyloop import deps, sessions
from skyloop.local import iam, lambda_hook, moto_stepfunctions
from skyloop.local.moto_dynamodb import serialize_requests
from skyloop.local.resources import LocalResources, bootstrap
from skyloop.mockllm import MockState, QueuedResponse, create_app
from skyloop.models.agent import AgentSpec
from skyloop.settings import get_settings
from skyloop.store import keys
from skyloop.store.schema import create_table_kwargs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from skyloop.models.agent import Agent
    from skyloop.models.session import Session
    from skyloop.store import DynamoStore, StoredEvent

MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
REGION = "us-east-1"
WAIT_S = 30.0
POLL_S = 0.02

# The package re-exports the resolver as ``skyloop.api.app``, shadowing the module of that name.
api_module = importlib.import_module("skyloop.api.app")


# --------------------------------------------------------------------------- mock LLM
@dataclass
class MockLLM:
    url: str
    state: MockState

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, *responses: QueuedResponse | dict[str, Any]) -> str:
        """Configure a fresh queue under a unique key and return the key (the agent's model)."""
        key = f"it-{uuid.uuid4().hex[:12]}"
        entries = [
            r if isinstance(r, QueuedResponse) else QueuedResponse.model_validate(r) for r in responses
        ]
        self.state.configure(key, entries)
        return key

    def requests(self, key: str) -> list[Any]:
        return self.state.requests(key)

    def wait_for_gate(self, *, timeout: float = 10.0) -> None:
        """Wait until a ``block: true`` entry holds its request at a gate."""
        wait_until(self.state.has_pending_gate, timeout=timeout, what="a pending mock LLM gate")

    def release_gate(self, *, timeout: float = 10.0) -> None:
        """Wait for a ``block: true`` entry to be held at its gate, then let it answer."""
        wait_until(self.state.release_gate, timeout=timeout, what="a pending mock LLM gate")


@pytest.fixture(scope="session")
def mock_llm() -> Iterator[MockLLM]:
    state = MockState()
    config = uvicorn.Config(
        create_app(state),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="mock-llm", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("mock LLM server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield MockLLM(url=f"http://127.0.0.1:{port}", state=state)
    server.should_exit = True
    thread.join(timeout=5)


# ------------------------------------------------------------------------------ moto
_serialize_dynamodb = serialize_requests


def _reset_caches() -> None:
    deps.reset()


def _rebind_store() -> None:
    """Pick up a new SKYLOOP_TABLE_NAME but keep the (slow to build) boto3 clients."""
    deps.store.cache_clear()
    get_settings.cache_clear()


@dataclass
class Stack:
    """One moto stack: resources plus handy clients."""

    resources: LocalResources
    table_name: str
    mock_llm: MockLLM
    agents: dict[str, Agent] = field(default_factory=dict)

    @property
    def store(self) -> DynamoStore:
        return deps.store()

    @property
    def sfn(self) -> Any:
        return deps.client("stepfunctions")

    @property
    def ddb(self) -> Any:
        return deps.client("dynamodb")

    # ---------------------------------------------------------------- setup helpers
    def agent_yaml(self, model: str, *, name: str | None = None, **limits: int) -> tuple[str, str]:
        """An agent YAML pointing at the mock LLM; returns ``(name, yaml_text)``."""
        name = name or f"it-agent-{uuid.uuid4().hex[:10]}"
        lines = [
            f"name: {name}",
            "prompt: You are a test agent.",
            "executor:",
            "  harness: openai-agents",
            f"  model: {model}",
            "  auth:",
            "    type: api_key",
            "    api_key: mock-key",
            f"    base_url: {self.mock_llm.base_url}",
        ]
        if limits:
            lines.append("limits:")
            lines.extend(f"  {k}: {v}" for k, v in limits.items())
        return name, "\n".join(lines) + "\n"

    def register_agent(self, model: str, *, name: str | None = None, **limits: int) -> Agent:
        name = name or f"it-agent-{uuid.uuid4().hex[:10]}"
        spec = AgentSpec.model_validate(
            {
                "name": name,
                "prompt": "You are a test agent.",
                "executor": {
                    "harness": "openai-agents",
                    "model": model,
                    "auth": {"type": "api_key", "api_key": "mock-key", "base_url": self.mock_llm.base_url},
                },
                "limits": limits,
            }
        )
        return sessions.register(spec)

    def new_session(self, model: str, *, agent_name: str | None = None, **limits: int) -> Session:
        agent = self.register_agent(model, name=agent_name, **limits)
        return sessions.create_session(
            self.store, agent, sessions.Runners(deps.get_settings().default_runner_id)
        )

    # ---------------------------------------------------------------- observation
    def events(self, session_id: str, after: int = 0) -> list[StoredEvent]:
        out: list[StoredEvent] = []
        while True:
            page, after, full = self.store.read_event_page(session_id, after)
            out.extend(page)
            if not full:
                return out

    def wait_for_event(
        self,
        session_id: str,
        predicate: Callable[[StoredEvent], bool],
        *,
        timeout: float = WAIT_S,
        what: str = "event",
    ) -> StoredEvent:
        found: list[StoredEvent] = []

        def check() -> bool:
            found[:] = [e for e in self.events(session_id) if predicate(e)]
            return bool(found)

        wait_until(check, timeout=timeout, what=f"{what} in session {session_id}")
        return found[0]

    def wait_for_status(
        self, session_id: str, status: str, *, after_seq: int = 0, timeout: float = WAIT_S
    ) -> Session:
        """Wait for the session row to have ``status`` and a ``session.status`` event saying so."""

        def check() -> bool:
            session = self.store.get_session(session_id)
            if session.status != status:
                return False
            return any(
                e.type == "session.status" and e.data.get("status") == status
                for e in self.events(session_id, after_seq)
            )

        wait_until(check, timeout=timeout, what=f"session {session_id} status {status!r}")
        return self.store.get_session(session_id)

    def execution_arn(self, response_id: str) -> str:
        base = self.resources.state_machine_arn.replace(":stateMachine:", ":execution:")
        return f"{base}:{response_id}"

    def wait_for_execution(self, response_id: str, *, timeout: float = WAIT_S) -> dict[str, Any]:
        arn = self.execution_arn(response_id)
        result: dict[str, Any] = {}

        def check() -> bool:
            result.update(self.sfn.describe_execution(executionArn=arn))
            return result["status"] != "RUNNING"

        wait_until(check, timeout=timeout, what=f"execution {response_id} to end")
        return result

    def history(self, response_id: str) -> list[dict[str, Any]]:
        arn = self.execution_arn(response_id)
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            out.extend(page["events"])
            if not page.get("nextToken"):
                return out
            kwargs["nextToken"] = page["nextToken"]

    def rows(self, session_id: str) -> dict[str, dict[str, Any]]:
        """Every raw row under the session's partition (sort key -> attributes), read consistently."""
        out: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": keys.session_pk(session_id)}},
            "ConsistentRead": True,
        }
        while True:
            r = self.ddb.query(**kwargs)
            out.update({i["sk"]["S"]: i for i in r["Items"]})
            if "LastEvaluatedKey" not in r:
                return out
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    def count_agents(self) -> int:
        r = self.ddb.scan(
            TableName=self.table_name,
            FilterExpression="kind = :k",
            ExpressionAttributeValues={":k": {"S": "agent"}},
            Select="COUNT",
        )
        return int(r["Count"])


def wait_until(check: Callable[[], bool], *, timeout: float = WAIT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_S)


AWS_ENV = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
UNSET_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    "MOTO_PORT",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "SKYLOOP_STATE_MACHINE_ARN",
    "SKYLOOP_SCHEDULE_GROUP",
    "SKYLOOP_SCHEDULE_ROLE_ARN",
    "SKYLOOP_SCHEDULE_TARGET_ARN",
    "SKYLOOP_SCHEDULE_DLQ_ARN",
    "SKYLOOP_REQUIRE_TOKEN",
)


@pytest.fixture(scope="module")
def aws(request: pytest.FixtureRequest, mock_llm: MockLLM) -> Iterator[Stack]:
    """A fresh moto stack for the module (see the module docstring)."""
    table = f"skyloop-it-{request.module.__name__.rsplit('.', 1)[-1].replace('_', '-')}"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in AWS_ENV.items():
            mp.setenv(key, value)
        for key in UNSET_ENV:
            mp.delenv(key, raising=False)
        mp.setenv("SKYLOOP_TABLE_NAME", table)
        undo_lock = _serialize_dynamodb()
        with mock_aws(config=MOTO_CONFIG):
            lambda_hook.install()
            iam.install()  # every handler's AWS calls are checked against its deployed role
            undo_heartbeats = moto_stepfunctions.report_heartbeat_timeouts()
            try:
                _reset_caches()
                resources = bootstrap(
                    deps.client, table_name=table, environment={"SKYLOOP_TABLE_NAME": table}
                )
                for key, value in resources.environment().items():
                    mp.setenv(key, value)
                _reset_caches()
                yield Stack(resources=resources, table_name=table, mock_llm=mock_llm)
            finally:
                undo_heartbeats()
                iam.uninstall()
                lambda_hook.uninstall()
                undo_lock()
        _reset_caches()
    _reset_caches()


@pytest.fixture
def fresh_table(aws: Stack) -> Iterator[str]:
    """A table of the test's own, for tests that write a lot.

    moto's TransactWriteItems deep-copies the whole table on every call, so the
    cost of each append grows with everything earlier tests wrote; a fresh
    table keeps appends cheap and the test independent of the others. Handlers
    read SKYLOOP_TABLE_NAME from this process's environment (the Lambda hook
    does not apply each function's own variables), so they follow the switch.
    """
    base = aws.table_name
    name = f"{base}-{uuid.uuid4().hex[:8]}"
    aws.ddb.create_table(**create_table_kwargs(name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_TABLE_NAME", name)
        _rebind_store()
        aws.table_name = name
        try:
            yield name
        finally:
            aws.table_name = base
    _rebind_store()
    aws.ddb.delete_table(TableName=name)


# ------------------------------------------------------------------------------- API
def http_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    base64_body: bool = False,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, as the gateway would send it."""
    hdrs = {"host": "api.local", "user-agent": "pytest", **{k.lower(): v for k, v in (headers or {}).items()}}
    raw = body.encode() if isinstance(body, str) else body
    if raw is None:
        text, encoded = None, False
    elif base64_body:
        text, encoded = base64.b64encode(raw).decode(), True
    else:
        text, encoded = raw.decode(), False
    now = time.time()
    query_string = "&".join(f"{k}={v}" for k, v in (query or {}).items())
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query_string,
        "headers": hdrs,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "api.local",
            "domainPrefix": "api",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "pytest",
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]
    body: Any

    def error(self) -> dict[str, str]:
        """The ``{"error": {"code", "message"}}`` body, asserted to have exactly that shape."""
        assert isinstance(self.body, dict), self.body
        assert set(self.body) == {"error"}, self.body
        err = self.body["error"]
        assert isinstance(err, dict), self.body
        assert {"code", "message"} <= set(err), self.body
        assert isinstance(err["code"], str), self.body
        assert err["code"], self.body
        assert isinstance(err["message"], str), self.body
        assert err["message"], self.body
        return err


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body; ``files`` maps name -> (filename, data, content type)."""
    boundary = f"----skyloop{uuid.uuid4().hex}"
    out = bytearray()
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    for name, (filename, data, ctype) in files.items():
        out += (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            f"Content-Type: {ctype}\r\n\r\n"
        ).encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


class Api:
    """Calls the API Lambda's real entry point (``functions/api/handler.py``) in-process."""

    def __init__(self) -> None:
        self._handler = lambda_hook.handler_for("api")

    def call(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        event = http_event(method, path, **kwargs)
        context = lambda_hook.LocalContext(
            "skyloop-api",
            "$LATEST",
            "arn:aws:lambda:us-east-1:123456789012:function:skyloop-api",
            512,
            str(uuid.uuid4()),
            "/aws/lambda/skyloop-api",
            "local",
            time.time() + 29,
        )
        out = self._handler(event, context)  # as the api function: its calls are checked against its role
        raw = out.get("body") or ""
        if out.get("isBase64Encoded"):
            raw = base64.b64decode(raw).decode()
        headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        body = json.loads(raw) if raw and "json" in headers.get("content-type", "") else raw
        return ApiResponse(status=int(out["statusCode"]), headers=headers, body=body)

    def get(self, path: str, **query: str) -> ApiResponse:
        return self.call("GET", path, query=query or None)

    def post_json(self, path: str, data: Any) -> ApiResponse:
        return self.call("POST", path, headers={"content-type": "application/json"}, body=json.dumps(data))

    def patch_json(self, path: str, data: Any) -> ApiResponse:
        return self.call("PATCH", path, headers={"content-type": "application/json"}, body=json.dumps(data))

    def post_multipart(
        self, path: str, files: dict[str, tuple[str, bytes, str]], fields: dict[str, str]
    ) -> ApiResponse:
        """A form upload; the body travels base64-encoded, as API Gateway delivers binary bodies."""
        body, ctype = multipart(fields, files)
        return self.call("POST", path, headers={"content-type": ctype}, body=body, base64_body=True)

    def post_event(self, session_id: str, event: dict[str, Any]) -> ApiResponse:
        return self.post_json(f"/v1/sessions/{session_id}/events", event)

    def post_message(
        self, session_id: str, text: str, tools: list[dict[str, Any]] | None = None
    ) -> ApiResponse:
        event: dict[str, Any] = {
            "type": "message",
            "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
        }
        if tools is not None:
            event["tools"] = tools
        return self.post_event(session_id, event)

    def post_output(self, session_id: str, call_id: str, output: str) -> ApiResponse:
        return self.post_event(
            session_id, {"type": "function_call_output", "data": {"call_id": call_id, "output": output}}
        )


@pytest.fixture(scope="module")
def api(aws: Stack) -> Api:
    return Api()
