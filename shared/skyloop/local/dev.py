"""``skyloop dev``: the whole stack in one process on moto.

moto's backends live in this process. Everything in it (the gateway, the
stream, Step Functions' executor and the handlers) reaches them in-process
through moto's botocore hook, with no HTTP hop; a threaded moto server on a
private port serves the same backends to other processes (``skyloop token
--endpoint-url``, tests). Lambda invocations run the real handlers; the
gateway serves the API and the stream on the public port.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGION = "us-east-1"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
TABLE_NAME = "skyloop-local"
OFFLINE_MODEL = "skyloop-offline"
EXAMPLE_AGENT = "coder"
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


def start(
    host: str,
    port: int,
    *,
    moto_port: int | None = None,
    example_agent: bool = True,
    lambda_runtime: str = "process",
    lambda_tools: list[str] | None = None,
) -> DevStack:
    """Bring the stack up; ``lambda_runtime`` is ``process`` (worker processes, as Lambda) or ``thread``.

    ``lambda_tools`` are Python files whose ``(event, context)`` functions become local
    Lambda functions (see :mod:`skyloop.local.lambda_tools`).
    """
    moto_port = moto_port or free_port()
    configure_environment(moto_port)
    tool_files = [str(Path(p).resolve()) for p in lambda_tools or []]
    for path in tool_files:
        if not Path(path).is_file():
            raise SystemExit(f"--lambda-tools: no such file: {path}")
    os.environ["SKYLOOP_LAMBDA_TOOLS"] = os.pathsep.join(tool_files)  # read again by every environment

    from moto import mock_aws
    from moto.server import ThreadedMotoServer

    from skyloop import deps, manifest, mockllm
    from skyloop.local import aws_shortcut, lambda_hook, moto_core, moto_dynamodb, moto_stepfunctions
    from skyloop.local.gateway import create_gateway
    from skyloop.local.lambda_runtime import ProcessRuntime, dispatch_aws
    from skyloop.local.resources import bootstrap
    from skyloop.store import notifier

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    mock_aws(config=MOTO_CONFIG).start()  # in-process AWS for the whole process, for its lifetime
    moto_core.install()
    moto_core.skip_signing()
    moto_dynamodb.install()
    aws_shortcut.install(dispatch_aws)
    lambda_hook.install_invoke_shortcut()
    moto_stepfunctions.install()
    lambda_hook.install()
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
    )
    os.environ["SKYLOOP_STATE_MACHINE_ARN"] = resources.state_machine_arn
    os.environ["SKYLOOP_BLOB_BUCKET"] = resources.blob_bucket
    deps.reset()
    if lambda_runtime == "process":  # started now: environments take the finished environment
        lambda_hook.install(ProcessRuntime([f.name for f in manifest.FUNCTIONS if not f.streaming]))

    _start_sweeper(float(os.environ.get("SKYLOOP_SWEEP_INTERVAL_S", "60")))
    _start_reconciler(float(os.environ.get("SKYLOOP_RECONCILE_INTERVAL_S", "60")))
    url = f"http://{host}:{port}"
    mock_app = mockllm.create_app()
    agent_id = _register_example(url, mock_app) if example_agent else None
    app = create_gateway(lambda_hook.direct_invoker(resources.function_arns["api"]), mock_app=mock_app)
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
    )


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


def _register_example(url: str, mock_app: Any) -> str:
    """Register ``coder``: OpenAI when OPENAI_API_KEY is set, else the embedded scripted model."""
    from skyloop import deps, sessions
    from skyloop.models.agent import AgentSpec

    if os.environ.get("OPENAI_API_KEY"):
        executor: dict[str, Any] = {
            "harness": "openai-agents",
            "model": os.environ.get("SKYLOOP_EXAMPLE_MODEL", "gpt-4.1-mini"),
        }
        if os.environ.get("OPENAI_BASE_URL"):
            executor["auth"] = {"type": "api_key", "base_url": os.environ["OPENAI_BASE_URL"]}
    else:
        executor = {
            "harness": "openai-agents",
            "model": OFFLINE_MODEL,
            "auth": {"type": "api_key", "api_key": "offline", "base_url": f"{url}/_mock/v1"},
        }
        from skyloop.local import offline_coder

        mock_app.state.mock.set_responder(OFFLINE_MODEL, offline_coder.respond)
    spec = AgentSpec.model_validate({"name": EXAMPLE_AGENT, "prompt": EXAMPLE_PROMPT, "executor": executor})
    store = deps.store()
    agent = deps.register_agent(spec)
    runners = sessions.Runners(deps.get_settings().default_runner_id)
    sessions.create_session(store, agent, runners, title="example session")
    return agent.id


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
    model = "OpenAI" if os.environ.get("OPENAI_API_KEY") else "the offline scripted model"
    print(f"skyloop dev: serving {stack.url}", flush=True)
    print(f"  runner id:      {stack.runner_id}", flush=True)
    print(f"  example agent:  {EXAMPLE_AGENT} ({stack.example_agent_id}), answering with {model}", flush=True)
    print(f"  moto endpoint:  {stack.moto_url}", flush=True)
    from skyloop.local import lambda_tools as local_tools

    for name in sorted(local_tools.all_tools()):
        print(f"  lambda tool:    {name}  (declare it as {{type: lambda, function: {name}}})", flush=True)
    if require_token:
        from skyloop import auth, deps

        token, _ = auth.create_token(deps.store(), "dev")
        print(f"  bearer token:   {token}  (every route but /health requires it)", flush=True)
    sys.stdout.flush()
    uvicorn.run(stack.app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
