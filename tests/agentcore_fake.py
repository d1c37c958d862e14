"""A loopback fake of the AgentCore Code Interpreter data plane, built from botocore's service model.

moto does not serve ``bedrock-agentcore``'s code interpreter, so the cloud-shaped
tests point the real boto3 client (``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE``) at this
server. It routes each request by the model's HTTP bindings (method, URI
template, headers, query, JSON body), rebuilds the operation's parameters and
validates them with botocore's own ``ParamValidator`` against the input shape
(a request the real service would refuse as malformed is a 400
``ValidationException`` here), and answers ``InvokeCodeInterpreter`` with the AWS
event-stream framing botocore parses (``result`` events, or a modeled exception
event). Behind it, each interpreter session is a directory whose commands run
in bubblewrap (the local engine's sandbox), ``network: none`` for the ``SANDBOX``
interpreter; a session can be expired to play AgentCore stopping it.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
import uvicorn
from botocore.validate import ParamValidator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from skyloop.environments.local import LocalSandbox
from skyloop.mockllm import _eventstream

SERVICE = "bedrock-agentcore"
OPERATIONS = (
    "StartCodeInterpreterSession",
    "InvokeCodeInterpreter",
    "StopCodeInterpreterSession",
    "GetCodeInterpreterSession",
)
SANDBOX_ID = "skyloop-sandbox-abc123"
PUBLIC_ID = "skyloop-public-def456"


@dataclass
class FakeSession:
    id: str
    interpreter: str
    root: Path
    timeout_s: int
    created_at: float = field(default_factory=time.time)
    status: str = "READY"


class AgentCoreFake:
    """The server's state: interpreters, sessions, and what was asked (for assertions)."""

    def __init__(self) -> None:
        self.model = botocore.session.get_session().get_service_model(SERVICE)
        self.interpreters = {SANDBOX_ID: "none", PUBLIC_ID: "public"}
        self.sessions: dict[str, FakeSession] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="agentcore-fake-"))
        self.lock = threading.Lock()
        self.url = ""
        self._server: uvicorn.Server | None = None

    # ------------------------------------------------------------------------------ control
    def expire(self, session_id: str) -> None:
        """What AgentCore does to a session past its timeout (its lifetime), or stopped: it is gone, its
        files with it."""
        with self.lock:
            found = self.sessions.pop(session_id, None)
        if found is not None:
            shutil.rmtree(found.root, ignore_errors=True)

    def tool_calls(self, name: str) -> list[dict[str, Any]]:
        return [
            params for op, params in self.calls if op == "InvokeCodeInterpreter" and params["name"] == name
        ]

    # ------------------------------------------------------------------------------ routing
    def _match(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        for name in OPERATIONS:
            http = self.model.operation_model(name).http
            if http["method"] != method:
                continue
            template = http["requestUri"].split("?")[0]
            regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            found = re.match(regex, path)
            if found:
                return name, found.groupdict()
        return None

    def _params(self, name: str, request: Request, uri: dict[str, str], body: bytes) -> dict[str, Any]:
        shape = self.model.operation_model(name).input_shape
        data = json.loads(body) if body.strip() else {}
        params: dict[str, Any] = {}
        for member, member_shape in shape.members.items():
            location = member_shape.serialization.get("location")
            wire = member_shape.serialization.get("name", member)
            if location == "uri":
                params[member] = uri[wire]
            elif location == "header":
                if wire.lower() in request.headers:
                    params[member] = request.headers[wire.lower()]
            elif location == "querystring":
                if wire in request.query_params:
                    params[member] = request.query_params[wire]
            elif member in data:
                params[member] = data[member]
        return params

    async def handle(self, request: Request) -> Response:
        matched = self._match(request.method, request.url.path)
        if matched is None:
            return _error(404, "UnknownOperationException", f"{request.method} {request.url.path}")
        name, uri = matched
        params = self._params(name, request, uri, await request.body())
        report = ParamValidator().validate(params, self.model.operation_model(name).input_shape)
        if report.has_errors():
            return _error(400, "ValidationException", report.generate_report())
        with self.lock:
            self.calls.append((name, params))
        return getattr(self, "_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())(params)

    # ------------------------------------------------------------------------------ operations
    def _start_code_interpreter_session(self, params: dict[str, Any]) -> Response:
        interpreter = params["codeInterpreterIdentifier"]
        if interpreter not in self.interpreters:
            return _error(404, "ResourceNotFoundException", f"no code interpreter {interpreter}")
        session = FakeSession(
            id=uuid.uuid4().hex.upper()[:26],
            interpreter=interpreter,
            root=self.tmp / uuid.uuid4().hex,
            timeout_s=int(params.get("sessionTimeoutSeconds", 900)),
        )
        session.root.mkdir(parents=True)
        with self.lock:
            self.sessions[session.id] = session
        return _json(
            {
                "codeInterpreterIdentifier": interpreter,
                "sessionId": session.id,
                "createdAt": session.created_at,
            }
        )

    def _session(self, params: dict[str, Any]) -> FakeSession | None:
        found = self.sessions.get(params["sessionId"])
        if found is not None and time.time() - found.created_at >= found.timeout_s:
            self.expire(found.id)  # sessionTimeoutSeconds is a lifetime, "regardless of ongoing activity"
            return None
        return (
            found if found is not None and found.interpreter == params["codeInterpreterIdentifier"] else None
        )

    def _get_code_interpreter_session(self, params: dict[str, Any]) -> Response:
        session = self._session(params)
        if session is None:
            return _error(404, "ResourceNotFoundException", "no such session")
        return _json(
            {
                "codeInterpreterIdentifier": session.interpreter,
                "sessionId": session.id,
                "createdAt": session.created_at,
                "sessionTimeoutSeconds": session.timeout_s,
                "status": session.status,
            }
        )

    def _stop_code_interpreter_session(self, params: dict[str, Any]) -> Response:
        session = self._session(params)
        if session is None:
            return _error(404, "ResourceNotFoundException", "no such session")
        self.expire(session.id)
        return _json(
            {
                "codeInterpreterIdentifier": session.interpreter,
                "sessionId": session.id,
                "lastUpdatedAt": time.time(),
            }
        )

    def _invoke_code_interpreter(self, params: dict[str, Any]) -> Response:
        session = self._session(params)
        if session is None:
            return _error(404, "ResourceNotFoundException", f"session {params['sessionId']} not found")
        sandbox = LocalSandbox(
            session.root,
            network=self.interpreters[session.interpreter],
            hidden=(str(self.tmp),),
            max_bytes=10**12,
        )
        arguments = params.get("arguments") or {}
        tool = params["name"]
        if tool == "executeCommand":
            result = sandbox.run(str(arguments.get("command", "")), timeout_s=600, env={})
            body = {
                "content": [{"type": "text", "text": result.output}],
                "structuredContent": {
                    "stdout": result.output,
                    "stderr": "",
                    "exitCode": result.exit_code if result.exit_code is not None else 137,
                    "executionTime": result.duration_ms / 1000,
                },
                "isError": bool(result.exit_code),
            }
        elif tool == "startCommandExecution":
            task_id = uuid.uuid4().hex
            command = str(arguments.get("command", ""))
            self.tasks[task_id] = {"taskStatus": "working"}

            def run() -> None:
                result = sandbox.run(command, timeout_s=3600, env={})
                self.tasks[task_id] = {
                    "taskStatus": "completed",
                    "stdout": result.output,
                    "stderr": "",
                    "exitCode": result.exit_code if result.exit_code is not None else 137,
                    "executionTime": result.duration_ms / 1000,
                }

            threading.Thread(target=run, daemon=True).start()
            body = {"content": [], "structuredContent": {"taskId": task_id, "taskStatus": "submitted"}}
        elif tool == "getTask":
            found = self.tasks.get(str(arguments.get("taskId")))
            if found is None:
                return _stream(_eventstream.exception("resourceNotFoundException", "no such task"))
            body = {"content": [], "structuredContent": {"taskId": arguments["taskId"], **found}}
        elif tool == "readFiles":
            body = self._read(sandbox, arguments.get("paths") or [])
        elif tool == "writeFiles":
            for block in arguments.get("content") or []:
                data = (
                    base64.b64decode(block["blob"])
                    if "blob" in block
                    else str(block.get("text", "")).encode()
                )
                sandbox.write(_relative(block["path"]), data)
            body = {
                "content": [{"type": "text", "text": f"wrote {len(arguments.get('content') or [])} file(s)"}]
            }
        else:
            return _stream(
                _eventstream.exception("validationException", f"tool {tool} is not served by the fake")
            )
        return _stream(
            _eventstream.event("result", body), headers={"x-amzn-code-interpreter-session-id": session.id}
        )

    @staticmethod
    def _read(sandbox: LocalSandbox, paths: list[str]) -> dict[str, Any]:
        content = []
        for path in paths:
            try:
                data = sandbox.read(_relative(path))
            except (OSError, ValueError) as exc:
                return {"content": [{"type": "text", "text": f"{path}: {exc}"}], "isError": True}
            try:
                resource = {"type": "text", "uri": f"file://{path}", "text": data.decode("utf-8")}
            except UnicodeDecodeError:
                resource = {"type": "blob", "uri": f"file://{path}", "blob": base64.b64encode(data).decode()}
            content.append({"type": "resource", "resource": resource})
        return {"content": content}

    # ------------------------------------------------------------------------------ serving
    def start(self) -> AgentCoreFake:
        app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "PUT", "POST", "DELETE"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        threading.Thread(target=self._server.run, name="agentcore-fake", daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the AgentCore fake did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        shutil.rmtree(self.tmp, ignore_errors=True)


def _relative(path: str) -> str:
    from skyloop import workspace as paths

    return paths.relative(path)


def _json(body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), media_type="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return Response(
        json.dumps({"message": message}),
        status_code=status,
        media_type="application/json",
        headers={"x-amzn-ErrorType": code},
    )


def _stream(message: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(message, media_type=_eventstream.CONTENT_TYPE, headers=headers or {})
