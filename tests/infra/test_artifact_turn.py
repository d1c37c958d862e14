"""A whole client-tool turn through the built artifacts, each step a cold start of its own.

Every Lambda invocation here is what Lambda would run: the function's asset from
synth and the dependencies layer built from the lock (``test_artifacts.py``'s
``host_build``), imported by an isolated CPython 3.12 (``-I -S -B``) with the
function's environment from the template, in a fresh process per invocation.
AWS is a moto server started by the test (DynamoDB, S3, Secrets Manager, Step
Functions), reached through ``AWS_ENDPOINT_URL``; the model is the scripted mock
LLM over HTTP.

Step Functions itself is not run: moto's server records executions without
running them, and running the real machine would need Lambda invocations moto
cannot make into these interpreters. Instead :class:`AslDriver` walks
``infra/turn.asl.json`` (the deployed definition) state by state as Step
Functions would (Choice rules, ``Parameters``, ``OutputPath``/``ResultPath``,
the Parallel ``Act`` state, ``.waitForTaskToken``), invoking each Task's
function in its own interpreter. A wait-for-token task hands its token to the
test, which answers the client call through the API function (whose
SendTaskSuccess moto accepts) before the walk goes on. A Map state (server
tools) or a Catch fails the test: a client-tool turn needs neither.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import manifest
from tests.infra.helpers import function

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.infra.conftest import Synth, TargetPython

pytest.importorskip("moto.server")

REGION = "us-east-1"
# Over the store's 32 KB inline limit: the output goes through the blob bucket (S3) and back.
OUTPUT = "hi\n" + "x" * 40_000
TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the user's machine",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}

# Run by the target interpreter: Lambda's sys.path, the handler from the asset, one invocation.
# The result goes to a file: Powertools writes its log lines to stdout.
INVOKE = """
import importlib.util, json, sys, time, uuid
task, layer, runtime, handler, result_path = sys.argv[1:6]
sys.path[:0] = [task, f"{layer}/python/lib/python3.12/site-packages", f"{layer}/python", f"{runtime}/python"]
module_name, attr = handler.rsplit(".", 1)
spec = importlib.util.spec_from_file_location(module_name, f"{task}/{module_name}.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Context:
    function_name = "skyloop-artifact"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:skyloop-artifact"
    memory_limit_in_mb = 256
    aws_request_id = str(uuid.uuid4())
    log_group_name = "/aws/lambda/skyloop-artifact"
    log_stream_name = "artifact"
    _deadline = time.time() + 120
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.time()) * 1000)

out = getattr(module, attr)(json.load(sys.stdin), Context())
with open(result_path, "w") as f:
    json.dump({"result": out, "skyloop": sys.modules["skyloop"].__file__}, f)
"""


# ------------------------------------------------------------------------- services
@dataclass
class Services:
    moto_url: str
    llm_url: str
    llm: Any  # skyloop.mockllm.MockState
    table: str
    bucket: str
    machine_arn: str
    token: str


def _serve_mock_llm() -> tuple[Any, Any, str]:
    import uvicorn

    from skyloop.mockllm import MockState, create_app

    state = MockState()
    server = uvicorn.Server(
        uvicorn.Config(create_app(state), host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    threading.Thread(target=server.run, name="artifact-mock-llm", daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "mock LLM did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return state, server, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def services(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[Services]:
    """A moto server (started here) with the table, bucket and state machine; the mock LLM; a token."""
    import boto3
    from moto.server import ThreadedMotoServer

    from skyloop import auth
    from skyloop.store import DynamoStore
    from skyloop.store.schema import create_table_kwargs

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch_module.setenv(key, value)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    state, llm_server, llm_url = _serve_mock_llm()
    try:
        session = boto3.session.Session(region_name=REGION)
        client = lambda service: session.client(service, endpoint_url=moto_url)  # noqa: E731
        suffix = uuid.uuid4().hex[:8]
        table, bucket = f"skyloop-artifact-{suffix}", f"skyloop-artifact-{suffix}-blobs"
        client("dynamodb").create_table(**create_table_kwargs(table))
        client("s3").create_bucket(Bucket=bucket)
        role = "arn:aws:iam::123456789012:role/skyloop-artifact-turns"
        arns = {f.name: f"arn:aws:lambda:{REGION}:123456789012:function:{f.name}" for f in manifest.FUNCTIONS}
        machine_arn = client("stepfunctions").create_state_machine(
            name=f"skyloop-artifact-{suffix}", definition=manifest.render_asl(arns), roleArn=role
        )["stateMachineArn"]
        token, _ = auth.create_token(DynamoStore(table, client("dynamodb")), "artifact-turn")
        yield Services(moto_url, llm_url, state, table, bucket, machine_arn, token)
    finally:
        llm_server.should_exit = True
        moto.stop()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# ------------------------------------------------------------------------ the artifacts
@dataclass
class Invocation:
    function: str
    event: Any
    result: Any
    package_file: str


@dataclass
class Artifacts:
    """Invokes a manifest function as Lambda would: its asset, the layer, a fresh isolated 3.12."""

    synth: Synth
    python: Path
    layer: Path
    runtime: Path
    services: Services
    tmp: Path
    log: list[Invocation] = field(default_factory=list)

    def environment(self, name: str) -> dict[str, str]:
        """The function's variables from the template, references resolved to the moto resources."""
        variables = function(self.synth.template, name)[1]["Properties"]["Environment"]["Variables"]
        resolved = {
            "SKYLOOP_TABLE_NAME": self.services.table,
            "SKYLOOP_BLOB_BUCKET": self.services.bucket,
            "SKYLOOP_STATE_MACHINE_ARN": self.services.machine_arn,
            # no warm-ups here: every invocation is a cold start of its own anyway (tests/integration
            # test_prewarm sends them through Lambda)
            "SKYLOOP_PREWARM": "",
            # the live channel's stage (this turn watches over SSE; nothing posts to it)
            "SKYLOOP_LIVE_URL": "wss://live.execute-api.us-east-1.amazonaws.com/live",
            "SKYLOOP_LIVE_ENDPOINT": "https://live.execute-api.us-east-1.amazonaws.com/live",
        }
        env: dict[str, str] = {}
        for key, value in variables.items():
            if isinstance(value, str):
                env[key] = value
            else:
                assert key in resolved, f"{name}: no stand-in for the reference in {key}"
                env[key] = resolved[key]
        return {
            **env,
            # what -c outboundAllow=127.0.0.1 sets: the mock LLM listens on loopback
            "SKYLOOP_OUTBOUND_ALLOW": "127.0.0.1",
            "POWERTOOLS_METRICS_NAMESPACE": env.get("POWERTOOLS_METRICS_NAMESPACE", "skyloop"),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": self.services.moto_url,
            "AWS_LAMBDA_FUNCTION_NAME": f"Skyloop-{name}",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        }

    def invoke(self, name: str, event: Any) -> Any:
        spec = manifest.by_name(name)
        code = self.synth.asset_dir(function(self.synth.template, name)[1]["Properties"]["Code"]["S3Key"])
        result_path = self.tmp / f"{len(self.log):02d}-{name}.json"
        proc = subprocess.run(
            [
                *(str(self.python), "-I", "-S", "-B", "-c", INVOKE),
                *(str(code), str(self.layer), str(self.runtime), spec.handler, str(result_path)),
            ],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            timeout=180,
            env=self.environment(name),
            cwd=code,
            check=False,
        )
        assert proc.returncode == 0, f"{name} failed:\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}"
        out = json.loads(result_path.read_text())
        self.log.append(Invocation(name, event, out["result"], out["skyloop"]))
        assert out["skyloop"].startswith(str(code)), out["skyloop"]  # its own copy of the package
        return out["result"]

    # ---------------------------------------------------------------- the API function
    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raw = json.dumps(body) if body is not None else None
        headers = {"host": "api.example", "authorization": f"Bearer {self.services.token}"}
        if raw is not None:
            headers["content-type"] = "application/json"
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "artifact",
                "domainName": "api.example",
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
                "timeEpoch": int(time.time() * 1000),
            },
            "body": raw,
            "isBase64Encoded": False,
        }
        out = self.invoke("api", event)
        text = out.get("body") or ""
        return int(out["statusCode"]), json.loads(text) if text else None


# ---------------------------------------------------------------------- the ASL walk
_PATH = re.compile(r"\.([A-Za-z_][\w]*)|\[(\d+)\]")
_MISSING = object()


def _read(path: str, doc: Any) -> Any:
    """A JSONPath of the simple kind the ASL uses (``$``, ``$.a.b``, ``$.a[0]``); _MISSING if absent."""
    assert path.startswith("$"), path
    value = doc
    for key, index in _PATH.findall(path[1:]):
        if key:
            if not isinstance(value, dict) or key not in value:
                return _MISSING
            value = value[key]
        else:
            if not isinstance(value, list) or int(index) >= len(value):
                return _MISSING
            value = value[int(index)]
    return value


def _write(path: str | None, doc: Any, result: Any) -> Any:
    """ResultPath: ``None`` keeps the input, ``$`` replaces it, ``$.a`` sets a field."""
    if path is None:
        return doc
    if path == "$":
        return result
    keys = path[2:].split(".")
    out = json.loads(json.dumps(doc))
    target = out
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = result
    return out


def _parameters(template: Any, doc: Any, token: str) -> Any:
    if isinstance(template, dict):
        out = {}
        for key, value in template.items():
            if key.endswith(".$"):
                out[key[:-2]] = token if value == "$$.Task.Token" else _read(value, doc)
            else:
                out[key] = _parameters(value, doc, token)
        return out
    return template


def _matches(rule: dict[str, Any], doc: Any) -> bool:
    if "And" in rule:
        return all(_matches(r, doc) for r in rule["And"])
    value = _read(rule["Variable"], doc)
    if "IsNumeric" in rule:
        return (isinstance(value, int | float) and not isinstance(value, bool)) is rule["IsNumeric"]
    if "IsPresent" in rule:
        return (value is not _MISSING) is rule["IsPresent"]
    if "IsNull" in rule:
        return (value is None) is rule["IsNull"]
    if "StringEquals" in rule:
        return value == rule["StringEquals"]
    if "BooleanEquals" in rule:
        return value is rule["BooleanEquals"]
    raise AssertionError(f"Choice rule not handled by the driver: {rule}")


@dataclass
class AslDriver:
    """Walks the turn machine's definition, invoking each Task's function through the artifacts."""

    artifacts: Artifacts
    on_token: Callable[[str, str], None]  # (state name, task token) once a .waitForTaskToken task parked
    visited: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        keep = {f.name: f"${{{f.asl_key}FunctionArn}}" for f in manifest.FUNCTIONS if f.asl_key}
        self.asl = json.loads(manifest.render_asl(keep))  # task resources rendered, functions kept
        self.function_of = {f"${{{f.asl_key}FunctionArn}}": f.name for f in manifest.FUNCTIONS if f.asl_key}

    def run(self, doc: Any) -> Any:
        return self._run(self.asl, doc)

    def _run(self, machine: dict[str, Any], doc: Any) -> Any:
        name = machine["StartAt"]
        while True:
            state = machine["States"][name]
            self.visited.append(name)
            kind = state["Type"]
            if kind == "Succeed":
                return doc
            if kind == "Fail":
                raise AssertionError(f"the turn reached {name}: {state.get('Cause')}")
            if kind == "Choice":
                name = next((c["Next"] for c in state["Choices"] if _matches(c, doc)), state.get("Default"))
                assert name, "a Choice with no match and no Default"
                continue
            if kind == "Task":
                doc = self._task(name, state, doc)
            elif kind == "Parallel":
                for branch in state["Branches"]:
                    self._run(branch, doc)
                assert state.get("ResultPath", "$") is None, "the driver keeps a Parallel's input only"
            else:
                raise AssertionError(f"{kind} state {name} is not part of a client-tool turn")
            if state.get("End"):
                return doc
            name = state["Next"]

    def _task(self, name: str, state: dict[str, Any], doc: Any) -> Any:
        resource = state["Resource"]
        assert resource.startswith("arn:aws:states:::lambda:invoke"), resource
        parameters = state["Parameters"]
        fn = self.function_of[parameters["FunctionName"]]  # a step of the manifest, never a tool here
        token = f"token-{uuid.uuid4().hex}"
        payload = (
            _read(parameters["Payload.$"], doc)
            if "Payload.$" in parameters
            else _parameters(parameters["Payload"], doc, token)
        )
        out = self.artifacts.invoke(fn, payload)
        if resource.endswith(".waitForTaskToken"):
            self.on_token(name, token)  # the task's result is what SendTaskSuccess sends
            result: Any = {"resumed": True}
        else:
            result = {"Payload": out, "StatusCode": 200}
        if "ResultSelector" in state:
            result = _parameters(state["ResultSelector"], result, token)
        doc = _write(state.get("ResultPath", "$"), doc, result)
        if "OutputPath" in state:
            doc = _read(state["OutputPath"], doc)
        return doc


# ---------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def artifacts(
    synth: Synth,
    target_python: TargetPython,
    host_build: tuple[Path, Path],
    services: Services,
    tmp_path_factory: pytest.TempPathFactory,
) -> Artifacts:
    layer, runtime = host_build
    return Artifacts(
        synth, target_python.path, layer, runtime, services, tmp_path_factory.mktemp("invocations")
    )


def _store(services: Services) -> Any:
    import boto3

    from skyloop.store import DynamoStore
    from skyloop.store.blobs import S3Blobs

    session = boto3.session.Session(region_name=REGION)
    ddb = session.client("dynamodb", endpoint_url=services.moto_url)
    blobs = S3Blobs(session.client("s3", endpoint_url=services.moto_url), services.bucket)
    return DynamoStore(services.table, ddb, blobs=blobs)


def test_a_client_tool_turn_runs_through_the_built_handlers(artifacts: Artifacts, services: Services) -> None:
    import boto3

    from skyloop.mockllm import QueuedResponse, ToolCall

    aws = boto3.session.Session(region_name=REGION)
    sfn = aws.client("stepfunctions", endpoint_url=services.moto_url)
    secrets = aws.client("secretsmanager", endpoint_url=services.moto_url)
    store = _store(services)

    # Given a scripted model that calls the client's read_file tool, then answers with text
    model = f"artifact-{uuid.uuid4().hex[:8]}"
    services.llm.configure(
        model,
        [
            QueuedResponse(
                tool_calls=[ToolCall(call_id="call_read", name="read_file", arguments='{"path": "a.txt"}')]
            ),
            QueuedResponse(text="The file says hi.", stream=True),
        ],
    )
    # And an agent registered through the API function, its key kept in Secrets Manager
    status, agent = artifacts.api(
        "POST",
        "/v1/agents",
        {
            "name": model,
            "prompt": "You are a test agent.",
            "executor": {
                "harness": "openai-agents",
                "model": model,
                "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{services.llm_url}/v1"},
            },
        },
    )
    assert status == 201, agent
    prefix = artifacts.environment("api")["SKYLOOP_SECRETS_PREFIX"]
    secret = secrets.get_secret_value(SecretId=f"{prefix}/{agent['id']}/api_key")
    assert secret["SecretString"] == "mock-key"
    status, session = artifacts.api("POST", "/v1/sessions", {"agent_id": agent["id"]})
    assert status in (200, 201), session
    session_id = session.get("id") or session["session_id"]

    # When a message offering the tool is posted: the API starts the turn's execution
    status, body = artifacts.api(
        "POST",
        f"/v1/sessions/{session_id}/events",
        {
            "type": "message",
            "data": {"role": "user", "content": [{"type": "input_text", "text": "What is in a.txt?"}]},
            "tools": [TOOL],
        },
    )
    assert status == 202, body
    (execution,) = sfn.list_executions(stateMachineArn=services.machine_arn)["executions"][-1:]
    turn_input = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert turn_input["session_id"] == session_id

    # And the steps run as the machine runs them; when the turn parks, the client answers
    parked: list[tuple[str, list[dict[str, Any]]]] = []

    def answer(state_name: str, token: str) -> None:
        events = _all_events(store, session_id)
        calls = [
            e.data["item"]
            for e in events
            if e.type == "response.output_item.done"
            and e.data.get("item", {}).get("status") == "action_required"
        ]
        parked.append((state_name, calls))
        assert store.get_session(session_id).status == "running"
        assert store.get_turn(session_id, turn_input["response_id"]).task_token == token
        code, out = artifacts.api(
            "POST",
            f"/v1/sessions/{session_id}/events",
            {"type": "function_call_output", "data": {"call_id": "call_read", "output": OUTPUT}},
        )
        assert code == 202, out

    driver = AslDriver(artifacts, on_token=answer)
    final = driver.run(turn_input)

    # Then the call was published as action_required while the turn was parked on its token
    ((state_name, calls),) = parked
    assert state_name in {"AwaitClient", "AwaitClientAndApprovals"}
    assert [(c["name"], c["call_id"], json.loads(c["arguments"])) for c in calls] == [
        ("read_file", "call_read", {"path": "a.txt"})
    ]
    # And the walk went model -> park -> model (which ended the turn), each invocation a cold start
    # of the one turn function
    steps = [i.function for i in artifacts.log if i.function != "api"]
    assert steps == ["turn", "turn", "turn"], steps
    tasks = [s for s in driver.visited if s in {"CallModel", "AwaitClient", "FinishTurn", "FailTurn"}]
    assert tasks == ["CallModel", "AwaitClient", "CallModel"], driver.visited
    assert driver.visited[-1] == "Done", driver.visited
    assert final is not None
    # And the model saw the tool, then the client's output
    first, second = services.llm.requests(model)
    assert [t["name"] for t in first["tools"]] == ["read_file"]
    outputs = [i for i in second["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("call_read", OUTPUT)]
    # And that output went through the blob bucket: kept under the session's prefix, read back whole
    s3 = aws.client("s3", endpoint_url=services.moto_url)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=services.bucket).get("Contents", [])]
    assert keys
    assert all(k.startswith(f"sessions/{session_id}/") for k in keys), keys
    # And the session is idle with the answer, as the API reports it
    status, snapshot = artifacts.api("GET", f"/v1/sessions/{session_id}")
    assert status == 200, snapshot
    assert snapshot["status"] == "idle"
    types = [e.type for e in _all_events(store, session_id)]
    assert "response.completed" in types
    assert "The file says hi." in json.dumps([e.data for e in _all_events(store, session_id)])

    # And the scheduled reconciler, run the same way, finds nothing stranded
    report = artifacts.invoke("reconcile_turns", {"source": "aws.events", "detail-type": "Scheduled Event"})
    assert report == {"checked": 0, "resumed": [], "reset": []}


def _all_events(store: Any, session_id: str) -> list[Any]:
    out: list[Any] = []
    after = 0
    while True:
        page, after, full = store.read_event_page(session_id, after)
        out.extend(page)
        if not full:
            return out
