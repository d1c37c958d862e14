"""The one list of Lambda functions: read by the CDK stack and by the local stack.

Each entry's code lives in ``functions/<name>/`` with a ``handler.py``; the
state machine refers to step functions through ``${<Logical>FunctionArn}``
substitutions named by ``asl_key``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = PROJECT_ROOT / "functions"
ASL_PATH = PROJECT_ROOT / "infra" / "turn.asl.json"


class FunctionSpec(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    handler: str = "handler.handler"
    memory_mb: int = Field(ge=128, le=10240)
    timeout_s: int = Field(ge=1, le=900)
    description: str
    asl_key: str | None = None  # the ${...FunctionArn} placeholder in the ASL file
    streaming: bool = False  # served through the Lambda Web Adapter on a function URL
    scheduled: bool = False  # run on a schedule (EventBridge in the cloud, a thread locally), not by the ASL
    # functions this one warms as its environment starts (skyloop.prewarm): what a turn needs next
    prewarm: tuple[str, ...] = ()
    # the most modules importing the handler may load (the built artifacts, tracer off): cold start is
    # mostly import, so a new module-level import must be a decision (tests/infra/test_artifacts.py)
    import_budget: int = 600
    # cloud only: the live channel's WebSocket routes, the table stream's consumers and the webhook
    # queue's; the local stack does the same in its own process (skyloop.live.local,
    # skyloop.webhooks.local) and creates no function for them
    cloud_only: bool = False

    @property
    def local(self) -> bool:
        """Whether the local stack creates it as a moto Lambda function (streaming: mounted as ASGI)."""
        return not (self.streaming or self.cloud_only)

    # the function this one hands requests to (skyloop.stream.proxy): its name in SKYLOOP_API_FUNCTION
    proxies_to: str | None = None

    @property
    def code_dir(self) -> Path:
        return FUNCTIONS_DIR / self.name

    @property
    def handler_file(self) -> Path:
        if self.handler.endswith(".sh"):
            return self.code_dir / self.handler
        module = self.handler.rsplit(".", 1)[0]
        return self.code_dir / f"{module.replace('.', '/')}.py"


FUNCTIONS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        name="api",
        import_budget=720,
        memory_mb=512,
        timeout_s=29,
        prewarm=("turn",),
        description="REST API (HTTP API payload v2)",
    ),
    FunctionSpec(
        name="stream",
        import_budget=610,
        handler="run.sh",
        memory_mb=256,
        timeout_s=900,
        streaming=True,
        prewarm=("api", "turn"),  # a client opens the stream first, then posts
        proxies_to="api",  # the OpenAI Agents API's plain requests on its stream paths
        description="SSE stream of a session's events (Lambda Web Adapter, RESPONSE_STREAM)",
    ),
    FunctionSpec(
        name="turn",
        import_budget=590,
        memory_mb=512,
        timeout_s=900,
        asl_key="Turn",
        description="Turn steps: model calls, parking on client calls and approvals, finishing, failing",
    ),
    FunctionSpec(
        name="run_tool",
        import_budget=585,
        memory_mb=256,
        timeout_s=330,  # an MCP call may take its tool's timeout (at most 300 s) plus recording
        asl_key="RunTool",
        description="Turn step: prepare and record one server tool call (runs MCP calls itself)",
    ),
    FunctionSpec(
        name="live",
        import_budget=585,
        memory_mb=256,
        timeout_s=60,  # a subscribe may replay a long log (API Gateway stops waiting after 29 s; posts go on)
        cloud_only=True,
        description="Live channel: WebSocket $connect, $disconnect and frames (auth, subscribe, replay)",
    ),
    FunctionSpec(
        name="push_fanout",
        import_budget=580,
        memory_mb=256,
        timeout_s=60,
        cloud_only=True,
        description="Live channel: new events from the table stream, posted to their subscribers",
    ),
    FunctionSpec(
        name="lifecycle_events",
        memory_mb=256,
        timeout_s=60,
        cloud_only=True,  # the local stack follows the log in its own process (skyloop.webhooks.local)
        description="Lifecycle events: new events and sessions from the table stream, to EventBridge and webhooks",
    ),
    FunctionSpec(
        name="webhook_delivery",
        memory_mb=256,
        timeout_s=30,  # one attempt: a 10 s receiver timeout and two table writes
        cloud_only=True,
        description="Webhooks: one signed delivery attempt per queue message, retried on the schedule",
    ),
    FunctionSpec(
        name="reconcile_turns",
        import_budget=585,
        memory_mb=256,
        timeout_s=120,
        scheduled=True,
        description="Reconciler: re-send lost wake-ups, reset sessions whose execution ended",
    ),
)


NAMES = frozenset(f.name for f in FUNCTIONS)


def by_name(name: str) -> FunctionSpec:
    for spec in FUNCTIONS:
        if spec.name == name:
            return spec
    raise KeyError(name)


# Task resources, by placeholder: each is a whole placeholder (cfn-lint then skips the value
# instead of checking it against an ``arn:aws:`` pattern that knows no other partition).
TASK_RESOURCES = {
    "LambdaInvoke": "states:::lambda:invoke",
    "LambdaInvokeWaitForTaskToken": "states:::lambda:invoke.waitForTaskToken",
}


def asl_substitutions(arn_of: dict[str, str], *, partition: str = "aws") -> dict[str, str]:
    """The ASL placeholders: ``{"TurnFunctionArn": arn, ..., "LambdaInvoke": "arn:aws:states:::..."}``.

    Step Functions refuses an ``arn:aws:`` task resource in ``aws-cn`` or
    ``aws-us-gov``, so the stack passes its own partition (``AWS::Partition``)
    and the local stack ``aws``.
    """
    return {
        **{f"{f.asl_key}FunctionArn": arn_of[f.name] for f in FUNCTIONS if f.asl_key},
        **{key: f"arn:{partition}:{resource}" for key, resource in TASK_RESOURCES.items()},
    }


def render_asl(arn_of: dict[str, str], *, partition: str = "aws") -> str:
    text = ASL_PATH.read_text()
    for key, value in asl_substitutions(arn_of, partition=partition).items():
        text = text.replace("${" + key + "}", value)
    return text
