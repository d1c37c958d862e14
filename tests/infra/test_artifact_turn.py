"""Whole turns through the built artifacts, each function cold-started once and then warm, as Lambda runs it.

Every Lambda invocation here is what Lambda would run: the function's asset from
synth and the dependencies layer built from the lock (``test_artifacts.py``'s
``host_build``), imported by an isolated CPython 3.12 (``-I -S -B``) with the
function's environment from the template, in an execution environment of its own
(:class:`Environments`: the first invocation starts it, the next ones reuse it).
AWS is a moto server started by the test (DynamoDB, S3, Secrets Manager, Step
Functions), reached through ``AWS_ENDPOINT_URL``; the model is the scripted mock
LLM over HTTP.

Step Functions itself is not run: moto's server records executions without
running them, and running the real machine would need Lambda invocations moto
cannot make into these interpreters. Instead :class:`AslDriver` walks
``infra/turn.asl.json`` (the deployed definition) state by state as Step
Functions would: Choice rules, ``Parameters`` and ``ItemSelector`` with the
context object, ``ResultSelector``/``ResultPath``/``OutputPath``, the Parallel
``Act`` state, the Map states of server tools (one item after the other, which
``MaxConcurrency`` allows), ``Catch``, ``TimeoutSecondsPath`` and
``.waitForTaskToken``, invoking each Task's function in its own interpreter. A
wait-for-token task hands its token to the test, which answers the client call
or the approvals through the API function; the walk goes on only once someone
really sent SendTaskSuccess for that token (:class:`TaskTokens` stands in for
moto's, which accepts any token and keeps nothing). An agent's Lambda tool
(``FunctionName.$``) is run by :class:`LambdaTools` from its code in the
template as Lambda runs inline code. The driver is strict: a field, rule,
resource or error it does not implement fails the test; nothing is skipped.

Three turns: a client-tool turn (``turn`` and ``api``); a server-tool turn
(``run_tool``'s prepare and record through ``RunTools`` and
``RunApprovedTools``, the stack's smoke echo run from the template, a failing
tool caught into its record, approvals through the API); and the scheduled
``reconcile_turns`` on a turn whose execution was stopped and on one parked on
an answer whose wake-up failed (the API function run with Step Functions
unreachable, the only variables a test changes).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from skyloop import manifest
from tests.infra.conftest import STACK_NAME
from tests.infra.helpers import as_list, by_prefix, function, one, resources, role_statements, statements_with

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.infra.conftest import Synth, TargetPython

pytest.importorskip("moto.server")

REGION = "us-east-1"
ACCOUNT = "123456789012"
# Over the store's 32 KB inline limit: the output goes through the blob bucket (S3) and back.
OUTPUT = "hi\n" + "x" * 40_000
# the reconciler's scheduled-task repair pass, with no task to repair (skyloop.schedules.repair)
NO_SCHEDULE_REPAIR = {"overdue": 0, "repaired": {}, "dispatched": [], "missed": 0, "failed": {}}
TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the user's machine",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}

# Run by the target interpreter: Lambda's sys.path, the handler from the task root, then one invocation per
# line on stdin (``{"event": ..., "report": path}``), each acknowledged by a line on the fd named in argv. An
# unhandled error is reported as Lambda's Python runtime reports it (errorMessage, errorType, requestId,
# stackTrace). The report goes to a file: Powertools writes its log lines to stdout.
INVOKE = """
import importlib.util, json, os, sys, time, traceback, uuid
task, handler, acks, *path = sys.argv[1:]
acks = os.fdopen(int(acks), "w")
sys.path[:0] = [task, *path]
module_name, attr = handler.rsplit(".", 1)
spec = importlib.util.spec_from_file_location(module_name, f"{task}/{module_name}.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Context:
    function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    function_version = "$LATEST"
    invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
    memory_limit_in_mb = 256
    log_group_name = f"/aws/lambda/{function_name}"
    log_stream_name = "artifact"
    def __init__(self):
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.time() + 120
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.time()) * 1000)

for line in sys.stdin:
    request = json.loads(line)
    context = Context()
    report = {"pid": os.getpid()}
    try:
        report["result"] = getattr(module, attr)(request["event"], context)
    except Exception as exc:
        report["error"] = {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "requestId": context.aws_request_id,
            "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
        }
    report["skyloop"] = getattr(sys.modules.get("skyloop"), "__file__", None)
    with open(request["report"], "w") as f:
        json.dump(report, f)
    acks.write("done\\n")
    acks.flush()
"""


@dataclass
class _Environment:
    proc: subprocess.Popen[bytes]
    acks: IO[str]
    log: Path


class Environments:
    """Execution environments as Lambda keeps them: a function's first invocation (in one configuration) is a
    cold start, a fresh isolated interpreter (``-I -S -B``); the next ones reuse it warm while it is idle, as
    Lambda reuses an environment, so what a module keeps between invocations is exercised too. Busy
    environments are not shared: a concurrent invocation starts another.
    """

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._lock = threading.Lock()
        self._idle: dict[tuple[Any, ...], list[_Environment]] = {}
        self._all: list[_Environment] = []

    def run(
        self,
        python: Path,
        task: Path,
        handler: str,
        path: list[str],
        event: Any,
        env: dict[str, str],
        report_path: Path,
        timeout_s: float,
    ) -> dict[str, Any]:
        """One invocation: the INVOKE report (result or error, pid)."""
        key = (str(python), str(task), handler, tuple(path), tuple(sorted(env.items())))
        with self._lock:
            idle = self._idle.setdefault(key, [])
            environment = idle.pop() if idle else None
        if environment is None:
            environment = self._start(python, task, handler, path, env)
        assert environment.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it ended already: said below, with its log
            environment.proc.stdin.write(
                json.dumps({"event": event, "report": str(report_path)}).encode() + b"\n"
            )
            environment.proc.stdin.flush()
        ready, _, _ = select.select([environment.acks], [], [], timeout_s)
        if not ready:
            environment.proc.kill()
            raise subprocess.TimeoutExpired([str(python), handler], timeout_s)
        if not environment.acks.readline():  # the interpreter ended before it answered
            environment.proc.wait(timeout=10)
            log = environment.log.read_text(errors="replace")
            raise AssertionError(f"{task.name} crashed ({environment.proc.returncode}):\n{log[-6000:]}")
        with self._lock:
            self._idle[key].append(environment)
        report: dict[str, Any] = json.loads(report_path.read_text())
        return report

    def _start(
        self, python: Path, task: Path, handler: str, path: list[str], env: dict[str, str]
    ) -> _Environment:
        read_end, write_end = os.pipe()
        log = self.tmp / f"environment-{len(self._all):02d}-{task.name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(python), "-I", "-S", "-B", "-c", INVOKE, str(task), handler, str(write_end), *path],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=task,
                pass_fds=(write_end,),
            )
        os.close(write_end)
        environment = _Environment(proc, os.fdopen(read_end), log)
        with self._lock:
            self._all.append(environment)
        return environment

    def close(self) -> None:
        for environment in self._all:
            if environment.proc.stdin is not None:
                environment.proc.stdin.close()  # its loop ends
            try:
                environment.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                environment.proc.kill()
                environment.proc.wait()
            environment.acks.close()


# ------------------------------------------------------------------------- task tokens
class TaskTokens:
    """Task tokens as Step Functions keeps them: handed to a parked task, completed once by SendTaskSuccess.

    moto's server records executions without running them, and its SendTaskSuccess accepts any
    token and keeps nothing. The module puts this in its place (the server runs in this process),
    so the walk goes on past a parked task only once someone sent SendTaskSuccess for its token,
    and an unknown or completed token is refused (InvalidToken) as Step Functions refuses it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self.sent: dict[str, str] = {}  # token -> the output SendTaskSuccess carried

    def hand_out(self) -> str:
        token = f"token-{uuid.uuid4().hex}"
        with self._lock:
            self._open.add(token)
        return token

    def send_task_success(self, token: str, output: str) -> None:
        from moto.stepfunctions.exceptions import InvalidToken

        with self._lock:
            if token not in self._open:
                raise InvalidToken(
                    "the task was completed already" if token in self.sent else "Invalid token"
                )
            self._open.remove(token)
            self.sent[token] = output

    def result(self, token: str) -> Any:
        """What the parked task returns: the output its SendTaskSuccess sent (or the walk fails)."""
        with self._lock:
            assert token in self.sent, "the task is still parked: nobody sent SendTaskSuccess for its token"
            return json.loads(self.sent[token])


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
    tokens: TaskTokens


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
    from moto.stepfunctions.models import StepFunctionBackend

    from skyloop import auth
    from skyloop.store import DynamoStore
    from skyloop.store.schema import create_table_kwargs

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch_module.setenv(key, value)
    tokens = TaskTokens()
    monkeypatch_module.setattr(
        StepFunctionBackend,
        "send_task_success",
        lambda _backend, task_token, outcome: tokens.send_task_success(task_token, outcome),
    )
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
        role = f"arn:aws:iam::{ACCOUNT}:role/skyloop-artifact-turns"
        arns = {f.name: f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{f.name}" for f in manifest.FUNCTIONS}
        machine_arn = client("stepfunctions").create_state_machine(
            name=f"skyloop-artifact-{suffix}", definition=manifest.render_asl(arns), roleArn=role
        )["stateMachineArn"]
        token, _ = auth.create_token(DynamoStore(table, client("dynamodb")), "artifact-turn")
        yield Services(moto_url, llm_url, state, table, bucket, machine_arn, token, tokens)
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
    package_file: str | None
    pid: int
    seconds: float


@dataclass
class Artifacts:
    """Invokes a manifest function as Lambda would: its asset, the layer, a fresh isolated 3.12."""

    synth: Synth
    python: Path
    layer: Path
    runtime: Path
    services: Services
    tmp: Path
    environments: Environments
    log: list[Invocation] = field(default_factory=list)

    def environment(self, name: str) -> dict[str, str]:
        """The function's variables from the template, references resolved to the moto resources."""
        variables = function(self.synth.template, name)[1]["Properties"]["Environment"]["Variables"]
        resolved = {
            "SKYLOOP_TABLE_NAME": self.services.table,
            "SKYLOOP_BLOB_BUCKET": self.services.bucket,
            "SKYLOOP_STATE_MACHINE_ARN": self.services.machine_arn,
            # no warm-ups here: nothing pings these environments between invocations (tests/integration
            # test_prewarm sends them through Lambda)
            "SKYLOOP_PREWARM": "",
            # the live channel's stage (this turn watches over SSE; nothing posts to it)
            "SKYLOOP_LIVE_URL": "wss://live.execute-api.us-east-1.amazonaws.com/live",
            "SKYLOOP_LIVE_ENDPOINT": "https://live.execute-api.us-east-1.amazonaws.com/live",
            # webhook deliveries (no endpoint is registered in this turn: nothing is sent)
            "SKYLOOP_WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/deliveries.fifo",
            # scheduled tasks' schedules (this turn arms none)
            "SKYLOOP_SCHEDULE_GROUP": "skyloop-artifact",
            "SKYLOOP_SCHEDULE_ROLE_ARN": "arn:aws:iam::123456789012:role/skyloop-artifact-scheduler",
            "SKYLOOP_SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:skyloop-artifact-dlq",
            "SKYLOOP_SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:schedule_run",
            # hosted environments' code interpreters (this turn calls no hosted tool)
            "SKYLOOP_CODE_INTERPRETER_ID": "Skyloop_sandbox-abcdefghij",
            "SKYLOOP_CODE_INTERPRETER_PUBLIC_ID": "Skyloop_public-abcdefghij",
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

    def asset(self, name: str) -> Path:
        return self.synth.asset_dir(function(self.synth.template, name)[1]["Properties"]["Code"]["S3Key"])

    def invoke(self, name: str, event: Any, *, env: dict[str, str] | None = None) -> Any:
        """One invocation of the function; ``env`` overrides (a stand-in for a failing network)."""
        spec = manifest.by_name(name)
        code = self.asset(name)
        layers = [f"{self.layer}/python/lib/python3.12/site-packages", f"{self.layer}/python"]
        started = time.perf_counter()
        report = self.environments.run(
            self.python,
            code,
            spec.handler,
            [*layers, f"{self.runtime}/python"],
            event,
            {**self.environment(name), **(env or {})},
            self.tmp / f"{len(self.log):02d}-{name}.json",
            180,
        )
        seconds = time.perf_counter() - started
        assert "error" not in report, f"{name} failed: {json.dumps(report['error'], indent=1)[-4000:]}"
        self.log.append(Invocation(name, event, report["result"], report["skyloop"], report["pid"], seconds))
        assert report["skyloop"].startswith(str(code)), report["skyloop"]  # its own copy of the package
        return report["result"]

    # ---------------------------------------------------------------- the API function
    def api(
        self, method: str, path: str, body: Any = None, *, env: dict[str, str] | None = None
    ) -> tuple[int, Any]:
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
                "accountId": ACCOUNT,
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
        out = self.invoke("api", event, env=env)
        text = out.get("body") or ""
        return int(out["statusCode"]), json.loads(text) if text else None

    # ------------------------------------------------------------ the scheduled function
    def scheduled_event(self) -> dict[str, Any]:
        """What the reconciler's EventBridge rule sends its function (the rule passes the event whole)."""
        template = self.synth.template
        rule_id, rule = by_prefix(template, "AWS::Events::Rule", "ReconcilerSchedule")
        (target,) = rule["Properties"]["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [function(template, "reconcile_turns")[0], "Arn"]}
        assert not {"Input", "InputPath", "InputTransformer"} & set(target), target
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{STACK_NAME}-{rule_id}-ARTIFACT"],
            "detail": {},
        }


# ----------------------------------------------------------------------- Lambda tools
@dataclass(frozen=True)
class ToolFunction:
    """A Lambda function an agent may name as its tool: inline code, its handler and timeout."""

    name: str
    code: str  # index.py, as Lambda writes a Python function's ZipFile
    handler: str
    timeout_s: int

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}"


@dataclass
class LambdaTools:
    """The functions the turn machine invokes as agents' tools (``FunctionName.$``), run as Lambda runs them.

    From the template: every function with inline code that the state machine's role may invoke
    (the smoke echo), named as CloudFormation names it. Its code is the template's ``ZipFile``, what
    Lambda deploys and runs (``infra/constructs/smoke_tool.py`` inlines ``skyloop/tools/smoke_echo.py``
    there), rather than the source file: a change to the inlining shows here. Each runs in an isolated
    CPython 3.12 (:class:`Environments`) on Lambda's sys.path for a function without layers (the task
    root, then the runtime's own packages), with Lambda's variables only: no credentials, no endpoint.
    """

    python: Path
    runtime: Path
    tmp: Path
    environments: Environments
    # by name and by ARN, as Lambda finds them
    functions: dict[str, ToolFunction] = field(default_factory=dict)
    of_stack: dict[str, ToolFunction] = field(default_factory=dict)  # the template's, by logical id
    log: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)  # (function, payload, report)

    @classmethod
    def from_template(
        cls, template: dict[str, Any], python: Path, runtime: Path, tmp: Path, environments: Environments
    ) -> LambdaTools:
        _, machine = one(template, "AWS::StepFunctions::StateMachine")
        role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        granted = set()
        for statement in statements_with(role_statements(template, role_id), "lambda:InvokeFunction"):
            targets = as_list(statement["Resource"])
            granted |= {t["Fn::GetAtt"][0] for t in targets if isinstance(t, dict) and "Fn::GetAtt" in t}
        tools = cls(python, runtime, tmp, environments)
        for logical_id, resource in resources(template, "AWS::Lambda::Function").items():
            props = resource["Properties"]
            if logical_id in granted and "ZipFile" in props["Code"]:
                assert props["Runtime"] == "python3.12", props["Runtime"]
                assert not props.get("Layers"), f"{logical_id}: layers are not modelled for tools"
                tools.deploy(
                    ToolFunction(
                        f"{STACK_NAME}-{logical_id}-ARTIFACT",
                        props["Code"]["ZipFile"],
                        props["Handler"],
                        props["Timeout"],
                    ),
                    logical_id=logical_id,
                )
        return tools

    def deploy(self, fn: ToolFunction, *, logical_id: str | None = None) -> None:
        self.functions[fn.name] = self.functions[fn.arn] = fn
        if logical_id:
            self.of_stack[logical_id] = fn

    def stack_tool(self, prefix: str) -> ToolFunction:
        """The template's inline function ``<prefix><hash>``, which the state machine's role may invoke."""
        found = [fn for lid, fn in self.of_stack.items() if re.fullmatch(rf"{prefix}[0-9A-F]{{8}}", lid)]
        assert len(found) == 1, (
            f"the turn machine may invoke no inline {prefix}* (it may: {sorted(self.of_stack)})"
        )
        return found[0]

    def invoke(self, function_name: str, payload: Any, timeout_s: int) -> Any:
        """The function's return value, or :class:`TaskFailed` as Step Functions reports a function error."""
        fn = self.functions.get(function_name)
        assert fn is not None, f"{function_name}: no such tool function (ResourceNotFound is not modelled)"
        assert fn.handler.startswith("index."), fn.handler
        task = self.tmp / fn.name
        if not task.exists():
            task.mkdir(parents=True)
            (task / "index.py").write_text(fn.code)
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
            "AWS_LAMBDA_FUNCTION_NAME": fn.name,
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(fn.timeout_s),
            "LAMBDA_TASK_ROOT": str(task),
            "_HANDLER": fn.handler,
        }
        limit = min(fn.timeout_s, timeout_s)
        try:
            report = self.environments.run(
                self.python,
                task,
                fn.handler,
                [f"{self.runtime}/python"],
                payload,
                env,
                self.tmp / f"{len(self.log):02d}-{fn.name}.json",
                limit,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{fn.name} ran over {limit}s: timeouts are not modelled") from exc
        self.log.append((function_name, payload, report))
        if "error" in report:  # Lambda answers FunctionError: Unhandled; the task fails with its type
            raise TaskFailed(report["error"]["errorType"], json.dumps(report["error"]))
        return report["result"]


# ---------------------------------------------------------------------- the ASL walk
_STEP = r"\.[A-Za-z_]\w*|\[\d+\]"
_PATH = re.compile(rf"\$(?:{_STEP})*")
_MISSING = object()
# What the driver implements of each state type; any other field fails the walk.
_FIELDS = {
    "Task": {
        *("Type", "Comment", "Resource", "Parameters", "ResultSelector", "ResultPath", "OutputPath"),
        *("TimeoutSecondsPath", "Retry", "Catch", "Next", "End"),
    },
    "Choice": {"Type", "Comment", "Choices", "Default"},
    "Parallel": {"Type", "Comment", "Branches", "ResultPath", "Catch", "Next", "End"},
    "Map": {
        *("Type", "Comment", "ItemsPath", "ItemSelector", "MaxConcurrency", "ItemProcessor"),
        *("ResultPath", "Next", "End"),
    },
    "Succeed": {"Type", "Comment"},
    "Fail": {"Type", "Comment", "Error", "Cause"},
}
_COMPARISONS = {"IsNumeric", "IsPresent", "IsNull", "StringEquals", "BooleanEquals"}
# Errors a States.ALL catcher or retrier does not match (Step Functions: terminal ones).
_UNCATCHABLE = {"States.DataLimitExceeded", "States.Runtime"}
LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
WAIT_FOR_TOKEN = "arn:aws:states:::lambda:invoke.waitForTaskToken"


class TaskFailed(Exception):
    """A state's error as Step Functions reports it, for a Catch: ``{"Error", "Cause"}``."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause[:1000]}")
        self.error = error
        self.cause = cause


def _read(path: str, doc: Any) -> Any:
    """A JSONPath of the simple kind the ASL uses (``$``, ``$.a.b``, ``$.a[0]``); _MISSING if absent."""
    assert _PATH.fullmatch(path), f"a path the driver does not read: {path}"
    value = doc
    for step in re.findall(_STEP, path[1:]):
        if step.startswith("."):
            if not isinstance(value, dict) or step[1:] not in value:
                return _MISSING
            value = value[step[1:]]
        else:
            if not isinstance(value, list) or int(step[1:-1]) >= len(value):
                return _MISSING
            value = value[int(step[1:-1])]
    return value


def _need(path: str, doc: Any) -> Any:
    value = _read(path, doc)
    assert value is not _MISSING, f"States.Runtime: {path} is not in the state's input"
    return value


def _write(path: str | None, doc: Any, result: Any) -> Any:
    """ResultPath: ``None`` keeps the input, ``$`` replaces it, ``$.a.b`` sets a field."""
    if path is None:
        return doc
    if path == "$":
        return result
    assert re.fullmatch(r"\$(?:\.[A-Za-z_]\w*)+", path), f"a ResultPath the driver does not write: {path}"
    keys = path[2:].split(".")
    out = json.loads(json.dumps(doc))
    target = out
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        assert isinstance(target, dict), f"States.ResultPathMatchFailure: {path}"
    target[keys[-1]] = result
    return out


def _parameters(template: Any, doc: Any, context: dict[str, Any]) -> Any:
    """``Parameters``/``ItemSelector``/``ResultSelector``: ``.$`` fields read the input or ``$$`` the context."""
    if isinstance(template, list):
        return [_parameters(v, doc, context) for v in template]
    if not isinstance(template, dict):
        return template
    out = {}
    for key, value in template.items():
        if key.endswith(".$"):
            assert isinstance(value, str), f"{key}: {value!r}"
            assert not value.startswith("States."), f"intrinsic functions are not implemented: {value}"
            if value.startswith("$$"):
                found = _read(value[1:], context)
                assert found is not _MISSING, f"{value} is not in the context object here"
                out[key[:-2]] = found
            else:
                out[key[:-2]] = _need(value, doc)
        else:
            out[key] = _parameters(value, doc, context)
    return out


def _matches(rule: dict[str, Any], doc: Any) -> bool:
    """One Choice rule; a Variable missing from the input fails (States.Runtime) unless tested IsPresent."""
    if "And" in rule:
        assert set(rule) <= {"And", "Next"}, rule
        return all(_matches(r, doc) for r in rule["And"])  # in order, stopping at the first false
    (operator,) = set(rule) - {"Variable", "Next"}
    assert operator in _COMPARISONS, f"Choice rule not handled by the driver: {rule}"
    value = _read(rule["Variable"], doc)
    if operator == "IsPresent":
        return (value is not _MISSING) is rule["IsPresent"]
    assert value is not _MISSING, f"States.Runtime: {rule['Variable']} is not in the Choice's input"
    if operator == "IsNumeric":
        return (isinstance(value, int | float) and not isinstance(value, bool)) is rule["IsNumeric"]
    if operator == "IsNull":
        return (value is None) is rule["IsNull"]
    if operator == "StringEquals":
        return value == rule["StringEquals"]
    return value is rule["BooleanEquals"]


def _error_matches(names: list[str], error: str) -> bool:
    assert "States.TaskFailed" not in names, "States.TaskFailed matching is not implemented"
    return error in names or ("States.ALL" in names and error not in _UNCATCHABLE)


@dataclass
class Step:
    """One Task state the walk ran: what it invoked, with what, and how it ended."""

    state: str
    function: str
    payload: Any
    result: Any = None
    error: str | None = None


@dataclass
class AslDriver:
    """Walks the turn machine's definition, invoking each Task's function through the artifacts."""

    artifacts: Artifacts
    tools: LambdaTools
    on_token: Callable[[str, str], None]  # (state name, task token) once a .waitForTaskToken task parked
    visited: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    caught: list[tuple[str, str, str]] = field(default_factory=list)  # (state, error, catcher's Next)

    def __post_init__(self) -> None:
        keep = {f.name: f"${{{f.asl_key}FunctionArn}}" for f in manifest.FUNCTIONS if f.asl_key}
        self.asl = json.loads(manifest.render_asl(keep))  # task resources rendered, functions kept
        self.function_of = {f"${{{f.asl_key}FunctionArn}}": f.name for f in manifest.FUNCTIONS if f.asl_key}
        self.tokens = self.artifacts.services.tokens

    def run(self, doc: Any) -> Any:
        return self._run(self.asl, doc)

    def _run(self, machine: dict[str, Any], doc: Any) -> Any:
        """A machine, a Parallel branch or a Map's item processor, from StartAt to its end."""
        assert set(machine) <= {"Comment", "StartAt", "States", "ProcessorConfig"}, sorted(machine)
        name = machine["StartAt"]
        while True:
            state = machine["States"][name]
            self.visited.append(name)
            kind = state["Type"]
            assert kind in _FIELDS, f"{kind} state {name} is not implemented"
            unknown = set(state) - _FIELDS[kind]
            assert not unknown, f"{name}: the driver does not implement {sorted(unknown)}"
            if kind == "Succeed":
                return doc
            if kind == "Fail":
                raise AssertionError(f"the turn reached {name}: {state.get('Cause')}")
            if kind == "Choice":
                name = next((c["Next"] for c in state["Choices"] if _matches(c, doc)), state.get("Default"))
                assert name, "States.NoChoiceMatched: no rule matched and no Default"
                continue
            try:
                doc = {"Task": self._task, "Parallel": self._parallel, "Map": self._map}[kind](
                    name, state, doc
                )
            except TaskFailed as exc:
                doc, name = self._catch(name, state, doc, exc)
                continue
            if state.get("End"):
                return doc
            name = state["Next"]

    def _catch(self, name: str, state: dict[str, Any], doc: Any, exc: TaskFailed) -> tuple[Any, str]:
        """The first catcher matching the error: ``{Error, Cause}`` at its ResultPath of the state's input."""
        for retrier in state.get("Retry", []):
            assert not _error_matches(retrier["ErrorEquals"], exc.error), (
                f"{name}: {exc.error} would be retried ({retrier}); the driver walks retry-free paths only"
            )
        for catcher in state.get("Catch", []):
            assert set(catcher) <= {"ErrorEquals", "ResultPath", "Next"}, catcher
            if _error_matches(catcher["ErrorEquals"], exc.error):
                self.caught.append((name, exc.error, catcher["Next"]))
                result = {"Error": exc.error, "Cause": exc.cause}
                return _write(catcher.get("ResultPath", "$"), doc, result), catcher["Next"]
        raise exc

    def _task(self, name: str, state: dict[str, Any], doc: Any) -> Any:
        resource = state["Resource"]
        assert resource in (LAMBDA_INVOKE, WAIT_FOR_TOKEN), f"{name}: {resource} is not implemented"
        parked = resource == WAIT_FOR_TOKEN
        token = self.tokens.hand_out() if parked else None
        parameters = _parameters(state["Parameters"], doc, {"Task": {"Token": token}} if parked else {})
        assert set(parameters) == {"FunctionName", "Payload"}, f"{name}: {sorted(parameters)}"
        timeout_s = 99_999_999  # Step Functions' default: a Task without a timeout waits a year
        if "TimeoutSecondsPath" in state:
            timeout_s = _need(state["TimeoutSecondsPath"], doc)
            assert type(timeout_s) is int, f"States.Runtime: {state['TimeoutSecondsPath']} = {timeout_s!r}"
            assert timeout_s >= 1, f"States.Runtime: {state['TimeoutSecondsPath']} = {timeout_s}"
        target, payload = parameters["FunctionName"], parameters["Payload"]
        step = Step(name, self.function_of.get(target, target), payload)
        self.steps.append(step)
        if target in self.function_of:  # a step of the manifest, from its artifact
            out = self.artifacts.invoke(self.function_of[target], payload)
        else:  # an agent's Lambda tool, named by the state's input
            assert not parked, f"{name}: a tool parked on a token"
            try:
                out = self.tools.invoke(target, payload, timeout_s)
            except TaskFailed as exc:
                step.error = exc.error
                raise
        step.result = out
        if parked:
            assert token is not None
            self.on_token(name, token)
            result: Any = self.tokens.result(token)  # what the SendTaskSuccess that woke it carried
        else:
            result = {"ExecutedVersion": "$LATEST", "Payload": out, "StatusCode": 200}
        if "ResultSelector" in state:
            result = _parameters(state["ResultSelector"], result, {})
        doc = _write(state.get("ResultPath", "$"), doc, result)
        if "OutputPath" in state:
            doc = _need(state["OutputPath"], doc)
        return doc

    def _parallel(self, name: str, state: dict[str, Any], doc: Any) -> Any:
        """Each branch on the state's input, one after the other (a schedule Step Functions may run)."""
        results = [self._run(branch, doc) for branch in state["Branches"]]
        return _write(state.get("ResultPath", "$"), doc, results)

    def _map(self, name: str, state: dict[str, Any], doc: Any) -> Any:
        """Each item through the item processor, one after the other (any MaxConcurrency allows it)."""
        processor = state["ItemProcessor"]
        assert processor.get("ProcessorConfig", {}) == {"Mode": "INLINE"}, f"{name}: {processor}"
        items = _need(state.get("ItemsPath", "$"), doc)
        assert isinstance(items, list), f"States.Runtime: {name}'s items are not an array"
        results = []
        for index, item in enumerate(items):
            context = {"Map": {"Item": {"Index": index, "Value": item}}}
            selected = _parameters(state["ItemSelector"], doc, context) if "ItemSelector" in state else item
            results.append(self._run(processor, selected))
        return _write(state.get("ResultPath", "$"), doc, results)


# ------------------------------------------------------------------- the driver's limits
# What the driver does not implement fails the walk (these run the walk alone: nothing is invoked).
_SUCCEED = {"S": {"Type": "Succeed"}}
_UNIMPLEMENTED = {
    "a state type": ({"W": {"Type": "Wait", "Seconds": 1, "End": True}}, "Wait state W is not implemented"),
    "a field": (
        {"T": {"Type": "Task", "InputPath": "$.a", "Resource": LAMBDA_INVOKE, "End": True}},
        r"does not implement \['InputPath'\]",
    ),
    "a Map's reader": (
        {
            "M": {
                "Type": "Map",
                "ItemReader": {},
                "ItemProcessor": {"StartAt": "S", "States": _SUCCEED},
                "End": True,
            }
        },
        r"does not implement \['ItemReader'\]",
    ),
    "a Choice rule": (
        {
            "C": {"Type": "Choice", "Choices": [{"Not": {"Variable": "$.a", "IsNull": True}, "Next": "S"}]},
            **_SUCCEED,
        },
        "Choice rule not handled",
    ),
    "a Variable not in the input": (
        {"C": {"Type": "Choice", "Choices": [{"Variable": "$.b", "IsNull": False, "Next": "S"}]}, **_SUCCEED},
        r"States.Runtime: \$.b",
    ),
}


@pytest.mark.parametrize(("states", "match"), list(_UNIMPLEMENTED.values()), ids=list(_UNIMPLEMENTED))
def test_the_driver_fails_on_what_it_does_not_implement(states: dict[str, Any], match: str) -> None:
    driver = AslDriver.__new__(AslDriver)
    driver.visited, driver.steps, driver.caught = [], [], []
    with pytest.raises(AssertionError, match=match):
        driver._run({"StartAt": next(iter(states)), "States": states}, {"a": 1})


def test_environments_are_reused_warm_per_configuration_and_report_a_crash_or_a_timeout(
    target_python: TargetPython, tmp_path: Path
) -> None:
    """The harness itself: what its turns rely on when they assert on cold and warm starts."""
    task = tmp_path / "task"
    task.mkdir()
    (task / "index.py").write_text(
        "import os, sys, time\n"
        "calls = []\n"
        "def handler(event, context):\n"
        "    calls.append(event)\n"
        "    if event == 'crash':\n"
        "        print('dying', file=sys.stderr)\n"
        "        os._exit(3)\n"
        "    if event == 'hang':\n"
        "        time.sleep(30)\n"
        "    return {'calls': len(calls), 'pid': os.getpid(), 'id': context.aws_request_id}\n"
    )
    environments = Environments(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "AWS_LAMBDA_FUNCTION_NAME": "harness"}

    def invoke(event: Any, variables: dict[str, str] = env, timeout_s: float = 60) -> dict[str, Any]:
        report = tmp_path / f"{uuid.uuid4().hex}.json"
        return environments.run(
            target_python.path, task, "index.handler", [], event, variables, report, timeout_s
        )

    try:
        first, second = invoke("a")["result"], invoke("b")["result"]
        assert (first["calls"], second["calls"]) == (1, 2)  # warm: the module's state carried over
        assert first["pid"] == second["pid"]
        assert first["id"] != second["id"]
        other = invoke("c", {**env, "SOMETHING": "else"})["result"]
        assert (other["calls"], other["pid"] != first["pid"]) == (1, True)  # another configuration: cold
        with pytest.raises(AssertionError, match=r"crashed \(3\):\ndying"):
            invoke("crash")
        assert invoke("d")["result"]["calls"] == 1  # the crashed environment is not reused
        with pytest.raises(subprocess.TimeoutExpired):
            invoke("hang", timeout_s=1)
        assert invoke("e")["result"]["calls"] == 1
    finally:
        environments.close()
    assert all(e.proc.returncode is not None for e in environments._all)


def test_the_driver_catches_and_retries_as_step_functions_matches_errors() -> None:
    driver = AslDriver.__new__(AslDriver)
    driver.caught = []
    catch_all = {"Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "F"}]}
    doc, then = driver._catch("T", catch_all, {"a": 1}, TaskFailed("LookupError", "{}"))
    assert (doc, then) == ({"a": 1, "error": {"Error": "LookupError", "Cause": "{}"}}, "F")
    with pytest.raises(TaskFailed):  # terminal: States.ALL does not catch it
        driver._catch("T", catch_all, {}, TaskFailed("States.DataLimitExceeded", "too big"))
    with pytest.raises(AssertionError, match="would be retried"):
        driver._catch(
            "T",
            {"Retry": [{"ErrorEquals": ["Lambda.Unknown"]}], **catch_all},
            {},
            TaskFailed("Lambda.Unknown", ""),
        )


# ---------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def artifacts(
    synth: Synth,
    target_python: TargetPython,
    host_build: tuple[Path, Path],
    services: Services,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Artifacts]:
    layer, runtime = host_build
    tmp = tmp_path_factory.mktemp("invocations")
    environments = Environments(tmp)
    try:
        yield Artifacts(synth, target_python.path, layer, runtime, services, tmp, environments)
    finally:
        environments.close()


@pytest.fixture(scope="module")
def tools(
    synth: Synth,
    target_python: TargetPython,
    host_build: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LambdaTools]:
    tmp = tmp_path_factory.mktemp("tools")
    environments = Environments(tmp)
    try:
        yield LambdaTools.from_template(synth.template, target_python.path, host_build[1], tmp, environments)
    finally:
        environments.close()


def _store(services: Services) -> Any:
    import boto3

    from skyloop.store import DynamoStore
    from skyloop.store.blobs import S3Blobs

    session = boto3.session.Session(region_name=REGION)
    ddb = session.client("dynamodb", endpoint_url=services.moto_url)
    blobs = S3Blobs(session.client("s3", endpoint_url=services.moto_url), services.bucket)
    return DynamoStore(services.table, ddb, blobs=blobs)


def _register_agent(
    artifacts: Artifacts, services: Services, model: str, tools: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An agent of the scripted model, registered through the API function."""
    spec: dict[str, Any] = {
        "name": model,
        "prompt": "You are a test agent.",
        "executor": {
            "harness": "openai-agents",
            "model": model,
            "auth": {"type": "api_key", "api_key": "mock-key", "base_url": f"{services.llm_url}/v1"},
        },
    }
    if tools is not None:
        spec["tools"] = tools
    status, agent = artifacts.api("POST", "/v1/agents", spec)
    assert status == 201, agent
    return dict(agent)


def _new_session(artifacts: Artifacts, agent_id: str) -> str:
    status, session = artifacts.api("POST", "/v1/sessions", {"agent_id": agent_id})
    assert status in (200, 201), session
    return str(session.get("id") or session["session_id"])


def _post_message(
    artifacts: Artifacts, services: Services, session_id: str, text: str, tools: list[Any] | None = None
) -> dict[str, Any]:
    """Post a message through the API function; the input of the execution it started (moto records it)."""
    import boto3

    body: dict[str, Any] = {
        "type": "message",
        "data": {"role": "user", "content": [{"type": "input_text", "text": text}]},
    }
    if tools is not None:
        body["tools"] = tools
    status, out = artifacts.api("POST", f"/v1/sessions/{session_id}/events", body)
    assert status == 202, out
    response_id = _store(services).get_session(session_id).active_response_id
    assert response_id
    sfn = boto3.session.Session(region_name=REGION).client("stepfunctions", endpoint_url=services.moto_url)
    execution_arn = services.machine_arn.replace(":stateMachine:", ":execution:") + ":" + response_id
    execution = sfn.describe_execution(executionArn=execution_arn)
    assert execution["status"] == "RUNNING"
    turn_input: dict[str, Any] = json.loads(execution["input"])
    assert turn_input["session_id"] == session_id
    assert turn_input["response_id"] == response_id
    return turn_input


def test_a_client_tool_turn_runs_through_the_built_handlers(
    artifacts: Artifacts, tools: LambdaTools, services: Services
) -> None:
    import boto3

    from skyloop.mockllm import QueuedResponse, ToolCall

    aws = boto3.session.Session(region_name=REGION)
    secrets = aws.client("secretsmanager", endpoint_url=services.moto_url)
    store = _store(services)
    mark = len(artifacts.log)

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
    agent = _register_agent(artifacts, services, model)
    prefix = artifacts.environment("api")["SKYLOOP_SECRETS_PREFIX"]
    secret = secrets.get_secret_value(SecretId=f"{prefix}/{agent['id']}/api_key")
    assert secret["SecretString"] == "mock-key"
    session_id = _new_session(artifacts, agent["id"])

    # When a message offering the tool is posted: the API starts the turn's execution
    turn_input = _post_message(artifacts, services, session_id, "What is in a.txt?", tools=[TOOL])

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

    driver = AslDriver(artifacts, tools, on_token=answer)
    final = driver.run(turn_input)

    # Then the call was published as action_required while the turn was parked on its token
    ((state_name, calls),) = parked
    assert state_name in {"AwaitClient", "AwaitClientAndApprovals"}
    assert [(c["name"], c["call_id"], json.loads(c["arguments"])) for c in calls] == [
        ("read_file", "call_read", {"path": "a.txt"})
    ]
    # And the walk went model -> park -> model (which ended the turn), each invocation one of the turn
    # function
    steps = [i.function for i in artifacts.log[mark:] if i.function != "api"]
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
    report = artifacts.invoke("reconcile_turns", artifacts.scheduled_event())
    assert report == {
        "checked": 0,
        "resumed": [],
        "reset": [],
        "schedules": NO_SCHEDULE_REPAIR,
        "interpreters_stopped": 0,
    }


def _all_events(store: Any, session_id: str) -> list[Any]:
    out: list[Any] = []
    after = 0
    while True:
        page, after, full = store.read_event_page(session_id, after)
        out.extend(page)
        if not full:
            return out


# ---------------------------------------------------------------------- server tools
# A Lambda tool deployed beside the stack (as an operator's -c toolFunctions would grant it) that fails
# as a tool can: an unhandled error, which Lambda reports and Step Functions fails the task with.
LOOKUP = """
def handler(event, context):
    raise LookupError(f"no record {event['arguments']['id']}")
"""


def _lambda_tool(function_name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "lambda",
        "function": function_name,
        "description": f"the tool {function_name}",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        **extra,
    }


def _call_items(events: list[Any], call_id: str) -> list[tuple[str, str]]:
    """(item type, status) of every published item of one call, in order."""
    return [
        (e.data["item"]["type"], e.data["item"]["status"])
        for e in events
        if e.type == "response.output_item.done" and e.data["item"].get("call_id") == call_id
    ]


def test_a_server_tool_turn_runs_its_map_states_through_the_built_run_tool(
    artifacts: Artifacts, tools: LambdaTools, services: Services
) -> None:
    from skyloop.mockllm import QueuedResponse, ToolCall
    from skyloop.turns import lifecycle

    store = _store(services)
    mark, tool_mark = len(artifacts.log), len(tools.log)

    # Given the stack's smoke echo tool, declared twice (once behind an approval), and a tool that fails
    smoke = tools.stack_tool("SmokeToolEcho")
    lookup = ToolFunction(f"artifact-lookup-{uuid.uuid4().hex[:8]}", LOOKUP, "index.handler", 10)
    tools.deploy(lookup)
    model = f"artifact-tools-{uuid.uuid4().hex[:8]}"
    agent = _register_agent(
        artifacts,
        services,
        model,
        {
            "echo": _lambda_tool(smoke.arn),
            "echo_approved": _lambda_tool(smoke.arn, approval="required"),
            "lookup": _lambda_tool(lookup.arn, timeout_s=5),
        },
    )
    # And a scripted model that calls each: two to run at once, two to wait for the user's approval
    calls = {
        "c_echo": ("echo", {"text": "hello"}),
        "c_lookup": ("lookup", {"id": 42}),
        "c_yes": ("echo_approved", {"text": "approved"}),
        "c_no": ("echo_approved", {"text": "declined"}),
    }
    services.llm.configure(
        model,
        [
            QueuedResponse(
                tool_calls=[
                    ToolCall(call_id=c, name=n, arguments=json.dumps(a)) for c, (n, a) in calls.items()
                ]
            ),
            QueuedResponse(text="All four settled.", stream=True),
        ],
    )
    session_id = _new_session(artifacts, agent["id"])
    turn_input = _post_message(artifacts, services, session_id, "Use your tools.")
    response_id = turn_input["response_id"]

    # When the machine runs the turn; when it parks, the user approves one call and declines the other
    parked: list[tuple[str, str, list[str], list[str]]] = []

    def answer(state_name: str, token: str) -> None:
        requests = [
            e.data for e in _all_events(store, session_id) if e.type == "response.elicitation_request"
        ]
        ran = [payload["call_id"] for _, payload, _ in tools.log[tool_mark:]]
        parked.append((state_name, token, sorted(r["elicitation_id"] for r in requests), ran))
        for elicitation_id, action in (("approve_c_yes", "accept"), ("approve_c_no", "decline")):
            code, out = artifacts.api(
                "POST",
                f"/v1/sessions/{session_id}/events",
                {"type": "approval", "data": {"elicitation_id": elicitation_id, "action": action}},
            )
            assert code == 202, out

    driver = AslDriver(artifacts, tools, on_token=answer)
    driver.run(turn_input)

    # Then the turn parked on the approvals only, the approved tool not yet run
    ((state_name, token, asked, ran_before),) = parked
    assert state_name == "AwaitClientAndApprovals"
    assert asked == ["approve_c_no", "approve_c_yes"]
    assert not {"c_yes", "c_no"} & set(ran_before)
    # And the last answer woke it (SendTaskSuccess, once) with the iteration it parked
    assert json.loads(services.tokens.sent[token]) == {"resumed_iteration": 0}
    # And the machine ran the Map states: each call prepared, invoked unless declined, recorded; the failing
    # tool's error caught into its outcome, the declined call done without invoking anything
    assert [s.state for s in driver.steps] == [
        "CallModel",
        *("PrepareTool", "InvokeTool", "RecordTool"),
        *("PrepareTool", "InvokeTool", "RecordTool"),
        "AwaitClientAndApprovals",
        *("PrepareApprovedTool", "InvokeApprovedTool", "RecordApprovedTool"),
        "PrepareApprovedTool",
        "CallModel",
    ]
    assert driver.visited.count("ApprovedToolDone") == 1
    assert driver.visited[-1] == "Done"
    assert driver.caught == [("InvokeTool", "LookupError", "RecordTool")]
    # And Step Functions invoked the functions the agent names, with what prepare handed it
    invoked = [(fn, payload) for fn, payload, _ in tools.log[tool_mark:]]
    assert invoked == [
        (fn, {"name": calls[c][0], "arguments": calls[c][1], "session_id": session_id, "call_id": c})
        for fn, c in ((smoke.arn, "c_echo"), (lookup.arn, "c_lookup"), (smoke.arn, "c_yes"))
    ]
    # And every run_tool step ran run_tool's own artifact
    runs = [i for i in artifacts.log[mark:] if i.function == "run_tool"]
    assert [(i.event["action"], i.event["call_id"]) for i in runs] == [
        *(("prepare", "c_echo"), ("record", "c_echo")),
        *(("prepare", "c_lookup"), ("record", "c_lookup")),
        *(("prepare", "c_yes"), ("record", "c_yes")),
        ("prepare", "c_no"),
    ]
    assert artifacts.asset("run_tool") != artifacts.asset("turn")
    assert all(i.package_file and i.package_file.startswith(str(artifacts.asset("run_tool"))) for i in runs)
    # in one environment of its own, started once and then reused warm (the steps run one at a time);
    # no two functions shared an interpreter
    pids: dict[str, set[int]] = {}
    for invocation in artifacts.log[mark:]:
        pids.setdefault(invocation.function, set()).add(invocation.pid)
    assert len(pids["run_tool"]) == 1, pids
    assert len(set().union(*pids.values())) == sum(map(len, pids.values())), pids
    assert runs[0].result == {
        "invoke": {"function": smoke.arn, "payload": invoked[0][1], "timeout_s": 60},
        "poll": None,
    }
    assert runs[2].result["invoke"]["timeout_s"] == 5
    assert runs[-1].result == {"invoke": None, "poll": None}
    assert [runs[i].result for i in (1, 3, 5)] == [{"recorded": True}] * 3
    assert runs[1].event["outcome"] == {"payload": "smoke_echo: hello"}
    failure = runs[3].event["outcome"]
    assert failure["Error"] == "LookupError"
    assert json.loads(failure["Cause"])["errorMessage"] == "no record 42"

    # And the outputs were recorded once each, and the model read them on its next call
    outputs = {
        "c_echo": "smoke_echo: hello",
        "c_lookup": "Error: tool 'lookup' failed: LookupError: no record 42",
        "c_yes": "smoke_echo: approved",
        "c_no": lifecycle.DENIED_OUTPUT,
    }
    for call_id, output in outputs.items():
        stored = store.get_call(session_id, response_id, call_id)
        assert stored is not None
        assert stored.output == output, call_id
    first, second = services.llm.requests(model)
    assert sorted(t["name"] for t in first["tools"]) == ["echo", "echo_approved", "lookup"]
    seen = {i["call_id"]: i["output"] for i in second["input"] if i.get("type") == "function_call_output"}
    assert seen == outputs
    # And the events tell it: the server calls announced running, the approvals asked and resolved
    events = _all_events(store, session_id)
    for call_id in ("c_echo", "c_lookup", "c_yes"):
        assert _call_items(events, call_id) == [
            ("function_call", "in_progress"),
            ("function_call", "completed"),
            ("function_call_output", "completed"),
        ], call_id
    assert ("function_call", "in_progress") not in _call_items(events, "c_no")
    resolved = [e.data for e in events if e.type == "response.elicitation_resolved"]
    assert [(r["elicitation_id"], r["action"]) for r in resolved] == [
        ("approve_c_yes", "accept"),
        ("approve_c_no", "decline"),
    ]
    assert [e.type for e in events][-2:] == ["response.completed", "session.status"]
    # And the session is idle again
    assert store.get_session(session_id).status == "idle"


# ----------------------------------------------------------------------- the reconciler
def _backdate(services: Services, session_id: str, seconds: int = 600) -> None:
    """As if the session last changed ``seconds`` ago: the reconciler leaves younger ones alone (grace)."""
    import boto3

    from skyloop.store import codec, keys

    ddb = boto3.session.Session(region_name=REGION).client("dynamodb", endpoint_url=services.moto_url)
    ddb.update_item(
        TableName=services.table,
        Key={k: codec.attr(v) for k, v in keys.session_key(session_id).items()},
        UpdateExpression="SET updated_at = :t",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":t": codec.attr(int(time.time()) - seconds)},
    )


def _unreachable_step_functions() -> dict[str, str]:
    """Variables under which a function's Step Functions calls fail to connect (a closed port), at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"AWS_ENDPOINT_URL_SFN": f"http://127.0.0.1:{port}", "AWS_MAX_ATTEMPTS": "1"}


def test_the_scheduled_reconciler_resets_a_turn_without_execution_and_wakes_a_parked_answered_one(
    artifacts: Artifacts, tools: LambdaTools, services: Services
) -> None:
    import boto3

    from skyloop.mockllm import QueuedResponse, ToolCall
    from skyloop.turns import lifecycle

    store = _store(services)
    sfn = boto3.session.Session(region_name=REGION).client("stepfunctions", endpoint_url=services.moto_url)
    mark = len(artifacts.log)
    model = f"artifact-reconcile-{uuid.uuid4().hex[:8]}"
    smoke = tools.stack_tool("SmokeToolEcho")
    agent = _register_agent(
        artifacts, services, model, {"echo": _lambda_tool(smoke.arn, approval="required")}
    )
    services.llm.configure(
        model,
        [
            QueuedResponse(tool_calls=[ToolCall(call_id="c_ask", name="echo", arguments='{"text": "x"}')]),
            QueuedResponse(text="Carried on.", stream=True),
        ],
    )

    # Given a session left running whose turn's execution was stopped before it could end the turn
    stranded = _new_session(artifacts, agent["id"])
    stranded_rid = _post_message(artifacts, services, stranded, "Hello?")["response_id"]
    prefix = services.machine_arn.replace(":stateMachine:", ":execution:")
    sfn.stop_execution(executionArn=f"{prefix}:{stranded_rid}", error="Redeployed", cause="artifact test")
    # And a turn parked on an approval the user answered while Step Functions was unreachable: the
    # answer is recorded, its wake-up (SendTaskSuccess) failed, and nobody posts again
    parked = _new_session(artifacts, agent["id"])
    turn_input = _post_message(artifacts, services, parked, "Echo x.")
    parked_rid = turn_input["response_id"]
    reports: list[Any] = []
    woken: list[str] = []

    def answer_unheard_then_reconcile(state_name: str, token: str) -> None:
        code, out = artifacts.api(
            "POST",
            f"/v1/sessions/{parked}/events",
            {"type": "approval", "data": {"elicitation_id": "approve_c_ask", "action": "decline"}},
            env=_unreachable_step_functions(),
        )
        assert code == 500, out
        turn = store.get_turn(parked, parked_rid)
        assert (turn.task_token, turn.unanswered, turn.resumed_iteration) == (token, 0, None)
        assert token not in services.tokens.sent
        # When both have been so for longer than the reconciler's grace, and its schedule fires
        _backdate(services, stranded)
        _backdate(services, parked)
        reports.append(artifacts.invoke("reconcile_turns", artifacts.scheduled_event()))
        woken.append(token)

    driver = AslDriver(artifacts, tools, on_token=answer_unheard_then_reconcile)
    driver.run(turn_input)

    # Then one pass checked both: it reset the turn without an execution and woke the parked one
    assert reports == [
        {
            "checked": 2,
            "resumed": [parked],
            "reset": [stranded],
            "schedules": NO_SCHEDULE_REPAIR,
            "interpreters_stopped": 0,
        }
    ]
    (run,) = [i for i in artifacts.log[mark:] if i.function == "reconcile_turns"]
    assert run.package_file
    assert run.package_file.startswith(str(artifacts.asset("reconcile_turns")))
    # And the stranded session failed with runner_error, saying why, as a request would end it
    error = {
        "code": "runner_error",
        "message": "the turn's execution ended (ABORTED) without finishing the turn",
    }
    session = store.get_session(stranded)
    assert session.status == "failed"
    assert session.active_response_id is None
    assert session.last_response_id == stranded_rid
    assert session.last_task_error is not None
    assert session.last_task_error.model_dump(exclude_none=True) == error
    failed, status = _all_events(store, stranded)[-2:]
    assert (failed.type, failed.data["response"]["status"]) == ("response.failed", "failed")
    assert failed.data["response"]["error"] == error
    assert (status.type, status.data["status"], status.data["error"]) == ("session.status", "failed", error)
    # And the parked turn's wake-up was the reconciler's (SendTaskSuccess for its token, once), after
    # which it ran on: the declined call done without its tool, the model told, the session idle
    (token,) = woken
    assert json.loads(services.tokens.sent[token]) == {"resumed_iteration": 0}
    assert store.get_turn(parked, parked_rid).resumed_iteration == 0
    assert [s.state for s in driver.steps] == [
        "CallModel",
        "AwaitClientAndApprovals",
        "PrepareApprovedTool",
        "CallModel",
    ]
    assert driver.visited[-1] == "Done"
    assert all(payload["session_id"] != parked for _, payload, _ in tools.log)
    _, second = services.llm.requests(model)
    seen = {i["call_id"]: i["output"] for i in second["input"] if i.get("type") == "function_call_output"}
    assert seen == {"c_ask": lifecycle.DENIED_OUTPUT}
    assert store.get_session(parked).status == "idle"
