"""``skyloop dev``: the whole stack on moto, in this process and the processes it starts.

moto's backends live in this process, except DynamoDB's, which has a process
of its own when Lambda runs in worker processes (the default; see
:mod:`skyloop.local.dynamodb_process`). Everything in this process (the
gateway, the stream, Step Functions' executor and the handlers) reaches them
through moto's botocore hook, with no HTTP hop; a threaded moto server on a
private port serves the same backends to other processes (``skyloop token
--endpoint-url``, tests). Lambda invocations run the real handlers; the
gateway serves the API and the stream on the public port.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyloop.local.moto_core import MOTO_CONFIG, REGION  # their home: below both moto processes
from skyloop.schedules import engine as schedule_engine
from skyloop.turns import engine as turn_engine

if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

TABLE_NAME = "skyloop-local"
EVENT_BUS = "skyloop-local"  # lifecycle events on moto's EventBridge (`skyloop events tail`)
# Webhook retries in the local stack: short, so a test or a developer sees them (third attempt within 30 s)
LOCAL_RETRY_SCHEDULE = "4,16,60,300"
SMOKE_TOOL_FILE = Path(__file__).resolve().parents[1] / "tools" / "smoke_echo.py"
OFFLINE_MODEL = "skyloop-offline"
EXAMPLE_AGENT = "coder"
EXAMPLE_OPENAI_MODEL = "gpt-4.1-mini"
EXAMPLE_BEDROCK_MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
FAKE_AWS_KEYS = ("local", "FOOBARKEY", "testing")  # what this stack and moto put in AWS_ACCESS_KEY_ID
EXAMPLE_PROMPT = (
    "You are a careful coding assistant. The user's machine runs your tools: use Glob, Grep and Read to "
    "look at files before answering, Edit or Write to change them, and Bash to run commands. Keep answers short."
)
# The example agent whose tools run in the session's hosted environment (skyloop.environments): no
# client needed, so a console message, a schedule or a webhook-started turn runs to its end.
HOSTED_AGENT = "workbench"
HOSTED_PROMPT = (
    "You are a careful coding assistant with a sandboxed workspace of your own at /workspace (no network). "
    "Use Glob, Grep and Read to look at files before answering, Write or Edit to change them, and Bash to run "
    "commands there; nobody needs to be connected. Keep answers short."
)
HOSTED_TOOLS = {name: {"type": "hosted"} for name in ("Bash", "Read", "Write", "Edit", "Glob", "Grep")}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class DevStack:
    url: str
    moto_url: str
    runner_id: str
    state_machine_arn: str
    example_agent_id: str | None
    app: Any
    example_model: str = ""  # who answers the example agent, for the banner
    # the DynamoDB process's handle (skyloop.local.dynamodb_process), None when inline; held for the
    # stack's lifetime: the process lives as long as the handle's control connection
    dynamodb: Any = None
    data_dir: Path | None = None  # where the stack keeps its data; None: nothing is kept (--ephemeral)
    loaded: list[str] = field(default_factory=list)  # what was loaded from the data directory, for the banner
    recovered: Any = None  # the turns continued after a restart (skyloop.local.recovery.Report)
    keep: list[Any] = field(
        default_factory=list
    )  # the data directory's lock and journals, held while serving


def capture_bedrock_identity(env: MutableMapping[str, str] | None = None) -> None:
    """Keep the user's real AWS identity and region for Bedrock in ``SKYLOOP_BEDROCK_*``.

    The local stack's AWS environment belongs to moto (fake keys, us-east-1),
    which would sign Bedrock calls with keys AWS rejects. Captured before that
    happens: the user's key pair if it is in the environment, else their
    profile (``AWS_PROFILE``, or ``default`` if the config files have one), so
    SSO and assume-role profiles keep refreshing. Values already set win;
    nothing here touches the network.
    """
    env = os.environ if env is None else env
    key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
    profile = env.get("AWS_PROFILE", "")
    if not profile and not key:
        import botocore.session

        profile = "default" if "default" in botocore.session.Session().available_profiles else ""
    if key and secret and key not in FAKE_AWS_KEYS:
        env.setdefault("SKYLOOP_BEDROCK_ACCESS_KEY_ID", key)
        env.setdefault("SKYLOOP_BEDROCK_SECRET_ACCESS_KEY", secret)
        if env.get("AWS_SESSION_TOKEN"):
            env.setdefault("SKYLOOP_BEDROCK_SESSION_TOKEN", env["AWS_SESSION_TOKEN"])
    elif profile:
        env.setdefault("SKYLOOP_BEDROCK_PROFILE", profile)
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region and profile:
        import botocore.exceptions
        import botocore.session

        with contextlib.suppress(botocore.exceptions.ProfileNotFound):  # the call will say so, clearly
            region = botocore.session.Session(profile=profile).get_config_variable("region")
    if region:
        env.setdefault("SKYLOOP_BEDROCK_REGION", region)


def example_executor(env: Mapping[str, str], url: str) -> tuple[dict[str, Any], str]:
    """The example agent's executor and who answers it.

    ``SKYLOOP_EXAMPLE_HARNESS=bedrock-converse``: Bedrock (``SKYLOOP_EXAMPLE_MODEL``, default
    a Claude 3.5 Haiku inference profile) with the identity :func:`capture_bedrock_identity`
    kept; else OpenAI when ``OPENAI_API_KEY`` is set; else the embedded scripted model.
    """
    harness = env.get("SKYLOOP_EXAMPLE_HARNESS") or "openai-agents"
    if harness == "bedrock-converse":
        model = env.get("SKYLOOP_EXAMPLE_MODEL") or EXAMPLE_BEDROCK_MODEL
        executor: dict[str, Any] = {"harness": harness, "model": model}
        if env.get("SKYLOOP_BEDROCK_REGION"):
            executor["region"] = env["SKYLOOP_BEDROCK_REGION"]
        return executor, f"Bedrock ({model})"
    if harness != "openai-agents":
        raise SystemExit(f"SKYLOOP_EXAMPLE_HARNESS={harness!r}: use openai-agents or bedrock-converse")
    if env.get("OPENAI_API_KEY"):
        model = env.get("SKYLOOP_EXAMPLE_MODEL") or EXAMPLE_OPENAI_MODEL
        executor = {"harness": harness, "model": model}
        if env.get("OPENAI_BASE_URL"):
            executor["auth"] = {"type": "api_key", "base_url": env["OPENAI_BASE_URL"]}
        return executor, f"OpenAI ({model})"
    executor = {
        "harness": harness,
        "model": OFFLINE_MODEL,
        "auth": {"type": "api_key", "api_key": "offline", "base_url": f"{url}/_mock/v1"},
    }
    return executor, "the offline scripted model"


def default_executor(env: Mapping[str, str], url: str) -> dict[str, Any]:
    """What a bare model name of OpenAI's Agents API runs on here: the example agent's executor.

    Without a key (the offline model takes none); the offline and Bedrock models answer whatever
    name was asked for, OpenAI (``OPENAI_API_KEY``) gets the name asked for.
    """
    executor, _ = example_executor(env, url)
    executor = {**executor}
    if isinstance(executor.get("auth"), dict):
        executor["auth"] = {k: v for k, v in executor["auth"].items() if k != "api_key"}
    if executor.get("harness") == "openai-agents" and env.get("OPENAI_API_KEY"):
        executor.pop("model", None)
    return executor


def configure_workspaces(data_path: str | None, *, reset: bool) -> list[Any]:
    """Where sessions' hosted workspaces live: ``<data dir>/workspaces`` (kept), or a temporary directory
    removed at stop (``--ephemeral``). Set before any Lambda environment starts: they inherit it."""
    import shutil
    import tempfile

    if data_path is not None:
        root = Path(data_path) / "workspaces"
        if reset:
            shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        os.environ["SKYLOOP_DATA_DIR"] = data_path  # a sandbox hides it (skyloop.environments.local)
        os.environ["SKYLOOP_WORKSPACES_DIR"] = str(root)
        return []
    held = tempfile.TemporaryDirectory(prefix="skyloop-workspaces-")
    os.environ["SKYLOOP_WORKSPACES_DIR"] = held.name
    os.environ.pop("SKYLOOP_DATA_DIR", None)
    return [held]  # kept by the stack: removed when it stops


def hosted_line() -> str:
    """What ``skyloop dev`` says about hosted tools at start."""
    from skyloop.environments import local, service
    from skyloop.settings import get_settings

    problem = service.unavailable_reason(get_settings())
    if problem is not None:
        return f"REFUSED: {problem}"
    if local.isolation() == "none":
        return "run UNISOLATED (--hosted-unisolated): commands can reach anything this user can"
    return f"bubblewrap, workspaces in {os.environ.get('SKYLOOP_WORKSPACES_DIR')}"


def configure_environment(moto_port: int) -> None:
    """The environment every function of the local stack shares (boto3 stays on AWS URLs: moto's hook
    serves them in-process)."""
    os.environ["MOTO_PORT"] = str(moto_port)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ["AWS_DEFAULT_REGION"] = REGION
    os.environ["AWS_REGION"] = REGION
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    os.environ["SKYLOOP_TABLE_NAME"] = TABLE_NAME
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "skyloop")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    # the scripted model, mock servers and a user's local MCP servers live on 127.0.0.1 (skyloop.outbound)
    os.environ.setdefault("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")
    # the live channel is served on the stack's own port; /v1/info answers it with the request's host
    os.environ["SKYLOOP_LIVE_URL"] = "/v1/live"
    # lifecycle events: moto's bus, and webhooks delivered from this process on a short schedule
    os.environ["SKYLOOP_EVENT_BUS"] = EVENT_BUS
    os.environ["SKYLOOP_WEBHOOK_LOCAL"] = "true"
    os.environ.setdefault("SKYLOOP_WEBHOOK_RETRY_SCHEDULE", LOCAL_RETRY_SCHEDULE)
    os.environ.setdefault("SKYLOOP_WEBHOOK_DISABLE_AFTER_S", "300")


def start(  # noqa: C901  (the start-up sequence, one step after another)
    host: str,
    port: int,
    *,
    moto_port: int | None = None,
    example_agent: bool = True,
    lambda_runtime: str = "process",
    lambda_tools: list[str] | None = None,
    lifecycle_events: bool = True,
    data_dir: Path | None = None,
    reset: bool = False,
) -> DevStack:
    """Bring the stack up; ``lambda_runtime`` is ``process`` (worker processes, as Lambda) or ``thread``.

    ``lifecycle_events=False`` leaves out the lifecycle publisher and webhook deliveries
    (``bench/turn_cost.py`` counts a turn's own requests).

    ``lambda_tools`` are Python files whose ``(event, context)`` functions become local
    Lambda functions (see :mod:`skyloop.local.lambda_tools`); ``smoke_echo``
    (:mod:`skyloop.tools.smoke_echo`) always is one. ``data_dir`` is where the
    stack keeps its tables, objects and secrets (:mod:`skyloop.local.persistence`;
    None keeps nothing), wiped first with ``reset``; turns that were running
    when it last stopped are continued (:mod:`skyloop.local.recovery`).
    """
    from skyloop.local.requirements import check_moto

    check_moto()
    from skyloop.local import moto_core

    moto_core.lighten()  # first: before anything imports moto.iam (moto's Lambda does) or builds a session
    moto_port = moto_port or free_port()
    capture_bedrock_identity()
    configure_environment(moto_port)
    tool_files = [str(Path(p).resolve()) for p in lambda_tools or []]
    for path in tool_files:
        if not Path(path).is_file():
            raise SystemExit(f"--lambda-tools: no such file: {path}")
    # `skyloop smoke`'s server tool, always there (the cloud stack deploys the same file: SmokeToolArn)
    tool_files.insert(0, str(SMOKE_TOOL_FILE))
    os.environ["SKYLOOP_LAMBDA_TOOLS"] = os.pathsep.join(tool_files)  # read again by every environment

    from skyloop.local import dynamodb_process

    dynamodb_mode = os.environ.get(dynamodb_process.MODE_ENV) or (
        "process" if lambda_runtime == "process" else "inline"
    )
    if dynamodb_mode not in ("process", "inline"):
        raise SystemExit(f"{dynamodb_process.MODE_ENV}={dynamodb_mode!r}: use process or inline")
    keep: list[Any] = []
    data = None
    if data_dir is not None:
        from skyloop.local.persistence import DataDir

        data = DataDir(data_dir.resolve())
        data.open(reset=reset)  # locked from here on: a second stack on the same directory stops here
        keep.append(data)
    data_path = str(data.path) if data is not None else None
    keep.extend(configure_workspaces(data_path, reset=reset))
    dynamodb = dynamodb_process.DynamoDBProcess(data_path) if dynamodb_mode == "process" else None

    from moto import mock_aws
    from moto.server import ThreadedMotoServer

    from skyloop import deps, manifest, mockllm
    from skyloop.local import (
        aws_shortcut,
        iam,
        lambda_hook,
        moto_core,
        moto_dynamodb,
        moto_items,
        moto_stepfunctions,
        trace,
    )
    from skyloop.local.gateway import create_gateway
    from skyloop.local.lambda_runtime import ProcessRuntime, dispatch_aws
    from skyloop.local.resources import bootstrap
    from skyloop.store import notifier

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    trace.install()  # only with SKYLOOP_LOCAL_TRACE set (bench/cloud_latency.py): before any client exists
    mock_aws(config=MOTO_CONFIG).start()  # in-process AWS for the whole process, for its lifetime
    moto_core.install()
    moto_core.skip_signing()
    iam.install()  # the functions' calls are checked against their deployed roles, as AWS would
    moto_dynamodb.install()
    moto_items.install()
    aws_shortcut.install(dispatch_aws)
    lambda_hook.install_invoke_shortcut()
    moto_stepfunctions.install()
    moto_stepfunctions.report_heartbeat_timeouts()
    moto_stepfunctions.bound_executions()
    lambda_hook.install()
    loaded: list[str] = []
    if dynamodb is not None:  # before anything touches the table: one table, in that process
        dynamodb_process.forward_moto(dynamodb.connect())
        os.environ[dynamodb_process.ADDRESS_ENV] = dynamodb.env_value  # the workers' way there
        dynamodb.watch(_stop_without_dynamodb)
        summary = dynamodb.loaded
    elif data_path is not None:
        tables, summary = dynamodb_process.load_tables(data_path)
        keep.append(tables)
    else:
        summary = {}
    if summary:
        loaded.append(
            f"tables: {summary['items']} item images from {summary['records']} records in {summary['seconds']} s"
        )
        loaded.extend(summary["lines"])
    notifier.enable_wakeups()  # every append happens in this process (or is forwarded to it)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    server.start()

    deps.reset()
    if data is not None:
        keep.append(_load_services(data, loaded))
    from skyloop.local import lambda_tools as local_tools

    resources = bootstrap(
        deps.client,
        table_name=TABLE_NAME,
        environment={"SKYLOOP_TABLE_NAME": TABLE_NAME},
        lambda_tools=sorted(local_tools.all_tools()),
        event_bus=EVENT_BUS,
    )
    os.environ.update(resources.environment())
    os.environ["SKYLOOP_API_FUNCTION"] = resources.function_arns["api"]  # the OpenAI paths' way to the API
    url = f"http://{host}:{port}"
    # OpenAI's Agents API: a bare model name runs as the example agent does (skyloop.openai_compat.agents)
    os.environ.setdefault("SKYLOOP_DEFAULT_EXECUTOR", json.dumps(default_executor(os.environ, url)))
    deps.reset()
    if lambda_runtime == "process":  # started now: environments take the finished environment
        # one warm environment per function a turn or a request needs (scheduled ones run in-process here)
        warm = [f.name for f in manifest.FUNCTIONS if f.local and not f.scheduled]
        lambda_hook.install(ProcessRuntime(warm))

    from skyloop.webhooks import local as local_webhooks

    if lifecycle_events:
        # before any session: it sees every one; deliveries a previous run left unfinished go out again
        local_webhooks.start(deps.store(), deps.get_settings(), resume=data is not None)

    recovered = None
    if data is not None:  # executions do not survive a restart: continue the turns the table says ran
        from skyloop.local import recovery

        recovered = recovery.recover(
            deps.store(), recovery.LocalEngine(deps.client("stepfunctions"), resources.state_machine_arn)
        )
    _start_sweeper(float(os.environ.get("SKYLOOP_SWEEP_INTERVAL_S", "60")))
    _start_reconciler(float(os.environ.get("SKYLOOP_RECONCILE_INTERVAL_S", "60")))
    _start_scheduler(
        resources.function_arns["schedule_run"], float(os.environ.get("SKYLOOP_SCHEDULER_TICK_S", "5"))
    )
    mock_app = mockllm.create_app()
    agent_id, answering = _register_example(url, mock_app) if example_agent else (None, "")
    from skyloop import console

    app = create_gateway(
        lambda_hook.direct_invoker(resources.function_arns["api"]),
        mock_app=mock_app,
        console_dir=console.console_dir(),
    )
    # Everything built so far (modules, moto's backends and models, botocore's service data: most
    # of the heap) lives as long as the stack; frozen, the collector stops re-scanning it in every
    # full collection (that scan was a tenth of a turn's CPU in this process).
    gc.collect()
    gc.freeze()
    return DevStack(
        url=url,
        moto_url=f"http://127.0.0.1:{moto_port}",
        runner_id=deps.get_settings().default_runner_id,
        state_machine_arn=resources.state_machine_arn,
        example_agent_id=agent_id,
        app=app,
        example_model=answering,
        dynamodb=dynamodb,
        data_dir=data.path if data is not None else None,
        loaded=loaded,
        recovered=recovered,
        keep=keep,
    )


def _load_services(data: Any, loaded: list[str]) -> Any:
    """S3 objects and secrets from the data directory into this process's moto; journaled from now on."""
    from skyloop import deps
    from skyloop.local.lambda_runtime import dispatch_aws
    from skyloop.local.persistence import services

    persistence = services.ServicePersistence(data.services, data.path)
    report = persistence.load(lambda m, u, h, b: dispatch_aws(m, u, list(h.items()), b)[0])
    persistence.start(lambda: services.export_state(deps.client))
    services.install(persistence)
    if report.records:
        loaded.append(f"s3 and secrets: {report.items} requests replayed")
    loaded.extend(report.lines())
    return persistence


def _stop_without_dynamodb(status: int) -> None:
    """The DynamoDB process ended under a running stack: every request would fail, so the stack stops."""
    import signal

    print(
        f"skyloop dev: the local DynamoDB process exited (status {status}); stopping the stack",
        file=sys.stderr,
        flush=True,
    )
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down on it, as on Ctrl-C


def _start_sweeper(interval_s: float) -> None:
    """moto never deletes expired TTL items, so the local stack does (the cloud relies on DynamoDB TTL)."""
    import threading
    import time

    from skyloop import deps

    def sweep() -> None:
        while True:
            time.sleep(interval_s)
            try:
                deps.store().sweep_expired()
            except Exception:  # keep sweeping; a failed pass only delays deletion
                logging.getLogger("skyloop.local").exception("TTL sweep failed")

    threading.Thread(target=sweep, name="skyloop-ttl-sweeper", daemon=True).start()


def _start_reconciler(interval_s: float) -> None:
    """What the cloud's scheduled reconcile_turns function does, in-process (see skyloop.turns.reconcile)."""
    import threading
    import time

    from skyloop import deps, function_identity
    from skyloop.turns.reconcile import reconcile

    def run() -> None:
        while True:
            time.sleep(interval_s)
            try:
                with function_identity.acting_as("reconcile_turns"):
                    reconcile(deps.store(), turn_engine.deployed())
            except Exception:  # keep going; a failed pass is retried at the next interval
                logging.getLogger("skyloop.local").exception("reconcile pass failed")

    threading.Thread(target=run, name="skyloop-reconciler", daemon=True).start()


def _start_scheduler(function_arn: str, tick_s: float) -> None:
    """EventBridge Scheduler's part, in-process: due tasks invoke the same run function (skyloop.schedules.local)."""
    from skyloop import deps
    from skyloop.schedules.local import LocalScheduler, lambda_invoker

    scheduler = LocalScheduler(
        deps.store,
        schedule_engine.deployed,
        lambda_invoker(deps.client("lambda"), function_arn),
        grace_s=deps.get_settings().schedule_missed_grace_s,
    )
    scheduler.start(tick_s)


def _register_example(url: str, mock_app: Any) -> tuple[str, str]:
    """Register ``coder`` (see :func:`example_executor`); returns its id and who answers it."""
    from skyloop import deps, sessions
    from skyloop.models.agent import AgentSpec

    executor, answering = example_executor(os.environ, url)
    if executor["model"] == OFFLINE_MODEL:
        from skyloop.local import offline_coder

        mock_app.state.mock.set_responder(OFFLINE_MODEL, offline_coder.respond)
    spec = AgentSpec.model_validate({"name": EXAMPLE_AGENT, "prompt": EXAMPLE_PROMPT, "executor": executor})
    store = deps.store()
    agent = _kept_example(spec)  # a restart with a data directory keeps its agent and sessions
    if agent is None:
        agent = sessions.register(spec)
    if not store.list_sessions(agent_name=EXAMPLE_AGENT, limit=1)[0]:
        runners = sessions.Runners(deps.get_settings().default_runner_id)
        sessions.create_session(store, agent, runners, title="example session")
    hosted = AgentSpec.model_validate(
        {
            "name": HOSTED_AGENT,
            "prompt": HOSTED_PROMPT,
            "executor": executor,
            "tools": HOSTED_TOOLS,
            "environment": {"type": "hosted", "network": "none"},
        }
    )
    if _kept_example(hosted) is None:  # registered after coder: the console offers it first
        sessions.register(hosted)
    return agent.id, answering


def _kept_example(spec: Any) -> Any:
    """The stored example agent of ``spec``'s name if it is exactly ``spec`` (its key included), else None
    (a new version is due)."""
    from skyloop import deps

    agent = deps.store().find_agent_by_name(spec.name)
    if agent is None:
        return None
    auth = spec.executor.auth
    key = auth.api_key.get_secret_value() if auth is not None and auth.api_key is not None else None
    try:
        stored_key = deps.secrets().get(agent.api_key_secret) if agent.api_key_secret else None
    except Exception:  # the secret is gone: register again
        return None
    bare = (
        spec.model_copy(
            update={
                "executor": spec.executor.model_copy(
                    update={"auth": auth.model_copy(update={"api_key": None})}
                )
            }
        )
        if auth is not None
        else spec
    )
    same = bare.model_dump(mode="json") == agent.spec.model_dump(mode="json") and key == stored_key
    return agent if same else None


def _announce(stack: DevStack) -> None:
    """What ``skyloop dev`` prints once it serves."""
    print(f"skyloop dev: serving {stack.url}", flush=True)
    from skyloop import console

    if (console.console_dir() / "index.html").is_file():
        print(f"  web console:    {stack.url}/", flush=True)
    else:
        print(
            f"  web console:    not built ({console.console_dir()}): run `{console.HOW_TO_BUILD}`", flush=True
        )
    print(f"  runner id:      {stack.runner_id}", flush=True)
    print(
        f"  example agent:  {EXAMPLE_AGENT} ({stack.example_agent_id}), answering with {stack.example_model}",
        flush=True,
    )
    print(
        f"  hosted agent:   {HOSTED_AGENT} (its tools run in a sandboxed workspace per session)", flush=True
    )
    print(f"  hosted tools:   {hosted_line()}", flush=True)
    print(f"  moto endpoint:  {stack.moto_url}", flush=True)
    print(f"  event bus:      {EVENT_BUS}  (skyloop events tail --endpoint-url {stack.moto_url})", flush=True)
    if stack.data_dir is None:
        print(
            "  data:           in memory only (--ephemeral): nothing is kept after the stack stops",
            flush=True,
        )
    else:
        print(f"  data:           {stack.data_dir}  (wipe it with --reset)", flush=True)
    for line in stack.loaded:
        print(f"  loaded          {line}", flush=True)
    if stack.recovered is not None:
        for line in stack.recovered.lines():
            print(f"  recovered       {line}", flush=True)
    from skyloop.local import lambda_tools as local_tools

    for name in sorted(local_tools.all_tools()):
        print(f"  lambda tool:    {name}  (declare it as {{type: lambda, function: {name}}})", flush=True)


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    require_token: bool = False,
    lambda_runtime: str = "process",
    lambda_tools: list[str] | None = None,
    data_dir: Path | None = None,
    reset: bool = False,
    hosted_unisolated: bool = False,
) -> int:
    """Run the stack until stopped; ``data_dir`` None keeps nothing (``--ephemeral``). Returns the exit status.

    ``hosted_unisolated``: run hosted tools' commands without bubblewrap (only where it cannot run)."""
    import uvicorn

    from skyloop.local.dynamodb_process import DynamoDBProcessError
    from skyloop.local.persistence import DataDirError
    from skyloop.local.requirements import MotoVersionError

    if require_token:
        os.environ["SKYLOOP_REQUIRE_TOKEN"] = "true"
    if hosted_unisolated:
        os.environ["SKYLOOP_HOSTED_ISOLATION"] = "none"
    try:
        stack = start(
            host,
            port,
            lambda_runtime=lambda_runtime,
            lambda_tools=lambda_tools,
            data_dir=data_dir,
            reset=reset,
        )
    except (DataDirError, MotoVersionError, DynamoDBProcessError) as exc:
        print(f"skyloop dev: {exc}", file=sys.stderr, flush=True)
        return 2
    _announce(stack)
    if require_token:
        from skyloop import auth, deps

        token, _ = auth.create_token(deps.store(), "dev")
        print(f"  bearer token:   {token}  (every route but /health requires it)", flush=True)
    sys.stdout.flush()
    uvicorn.run(stack.app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
    return 0
