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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

REGION = "us-east-1"
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "core": {"passthrough": {"services": ["bedrockruntime"]}},  # models are real (or the scripted one)
}
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


def start(
    host: str,
    port: int,
    *,
    moto_port: int | None = None,
    example_agent: bool = True,
    lambda_runtime: str = "process",
    lambda_tools: list[str] | None = None,
    lifecycle_events: bool = True,
) -> DevStack:
    """Bring the stack up; ``lambda_runtime`` is ``process`` (worker processes, as Lambda) or ``thread``.

    ``lifecycle_events=False`` leaves out the lifecycle publisher and webhook deliveries
    (``bench/turn_cost.py`` counts a turn's own requests).

    ``lambda_tools`` are Python files whose ``(event, context)`` functions become local
    Lambda functions (see :mod:`skyloop.local.lambda_tools`); ``smoke_echo``
    (:mod:`skyloop.tools.smoke_echo`) always is one.
    """
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
    dynamodb = dynamodb_process.DynamoDBProcess() if dynamodb_mode == "process" else None

    from moto import mock_aws
    from moto.server import ThreadedMotoServer

    from skyloop import deps, manifest, mockllm
    from skyloop.local import aws_shortcut, lambda_hook, moto_core, moto_dynamodb, moto_stepfunctions, trace
    from skyloop.local.gateway import create_gateway
    from skyloop.local.lambda_runtime import ProcessRuntime, dispatch_aws
    from skyloop.local.resources import bootstrap
    from skyloop.store import notifier

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    trace.install()  # only with SKYLOOP_LOCAL_TRACE set (bench/cloud_latency.py): before any client exists
    mock_aws(config=MOTO_CONFIG).start()  # in-process AWS for the whole process, for its lifetime
    moto_core.install()
    moto_core.skip_signing()
    moto_dynamodb.install()
    aws_shortcut.install(dispatch_aws)
    lambda_hook.install_invoke_shortcut()
    moto_stepfunctions.install()
    moto_stepfunctions.report_heartbeat_timeouts()
    lambda_hook.install()
    if dynamodb is not None:  # before anything touches the table: one table, in that process
        dynamodb_process.forward_moto(dynamodb.connect())
        os.environ[dynamodb_process.ADDRESS_ENV] = dynamodb.env_value  # the workers' way there
        dynamodb.watch(_stop_without_dynamodb)
    notifier.enable_wakeups()  # every append happens in this process (or is forwarded to it)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    server.start()

    deps.reset()
    from skyloop.local import lambda_tools as local_tools

    resources = bootstrap(
        deps.client,
        table_name=TABLE_NAME,
        environment={"SKYLOOP_TABLE_NAME": TABLE_NAME},
        lambda_tools=sorted(local_tools.all_tools()),
        event_bus=EVENT_BUS,
    )
    os.environ["SKYLOOP_STATE_MACHINE_ARN"] = resources.state_machine_arn
    os.environ["SKYLOOP_BLOB_BUCKET"] = resources.blob_bucket
    os.environ["SKYLOOP_API_FUNCTION"] = resources.function_arns["api"]  # the OpenAI paths' way to the API
    url = f"http://{host}:{port}"
    # OpenAI's Agents API: a bare model name runs as the example agent does (skyloop.openai_compat.agents)
    os.environ.setdefault("SKYLOOP_DEFAULT_EXECUTOR", json.dumps(default_executor(os.environ, url)))
    deps.reset()
    if lambda_runtime == "process":  # started now: environments take the finished environment
        lambda_hook.install(ProcessRuntime([f.name for f in manifest.FUNCTIONS if f.local]))

    from skyloop.webhooks import local as local_webhooks

    if lifecycle_events:
        local_webhooks.start(deps.store(), deps.get_settings())  # before any session: it sees every one
    _start_sweeper(float(os.environ.get("SKYLOOP_SWEEP_INTERVAL_S", "60")))
    _start_reconciler(float(os.environ.get("SKYLOOP_RECONCILE_INTERVAL_S", "60")))
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
    )


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

    from skyloop import deps
    from skyloop.turns.reconcile import reconcile

    def run() -> None:
        while True:
            time.sleep(interval_s)
            try:
                reconcile(deps.store(), deps.engine())
            except Exception:  # keep going; a failed pass is retried at the next interval
                logging.getLogger("skyloop.local").exception("reconcile pass failed")

    threading.Thread(target=run, name="skyloop-reconciler", daemon=True).start()


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
    agent = deps.register_agent(spec)
    runners = sessions.Runners(deps.get_settings().default_runner_id)
    sessions.create_session(store, agent, runners, title="example session")
    return agent.id, answering


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    require_token: bool = False,
    lambda_runtime: str = "process",
    lambda_tools: list[str] | None = None,
) -> None:
    import uvicorn

    if require_token:
        os.environ["SKYLOOP_REQUIRE_TOKEN"] = "true"
    stack = start(host, port, lambda_runtime=lambda_runtime, lambda_tools=lambda_tools)
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
    print(f"  moto endpoint:  {stack.moto_url}", flush=True)
    print(f"  event bus:      {EVENT_BUS}  (skyloop events tail --endpoint-url {stack.moto_url})", flush=True)
    from skyloop.local import lambda_tools as local_tools

    for name in sorted(local_tools.all_tools()):
        print(f"  lambda tool:    {name}  (declare it as {{type: lambda, function: {name}}})", flush=True)
    if require_token:
        from skyloop import auth, deps

        token, _ = auth.create_token(deps.store(), "dev")
        print(f"  bearer token:   {token}  (every route but /health requires it)", flush=True)
    sys.stdout.flush()
    uvicorn.run(stack.app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
