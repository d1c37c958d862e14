"""Environment settings, validated once per cold start."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field


class Settings(BaseModel):
    """What every function reads from its environment (identical across functions)."""

    table_name: str = Field(default="skyloop", alias="SKYLOOP_TABLE_NAME")
    state_machine_arn: str | None = Field(default=None, alias="SKYLOOP_STATE_MACHINE_ARN")
    default_runner_id: str = Field(default="default", alias="SKYLOOP_DEFAULT_RUNNER_ID")
    event_ttl_s: int = Field(default=24 * 3600, ge=60, alias="SKYLOOP_EVENT_TTL_S")
    stream_max_s: float = Field(default=14 * 60, gt=0, alias="SKYLOOP_STREAM_MAX_S")
    heartbeat_s: float = Field(default=15.0, gt=0, alias="SKYLOOP_HEARTBEAT_S")
    # while a turn runs, how often a cloud stream reads the log: a client sees each event ~50 ms after it
    # is written (10 strongly consistent Queries a second, only while something happens)
    poll_busy_s: float = Field(default=0.1, gt=0, alias="SKYLOOP_POLL_BUSY_S")
    poll_idle_s: float = Field(default=2.0, gt=0, alias="SKYLOOP_POLL_IDLE_S")
    require_token: bool = Field(default=False, alias="SKYLOOP_REQUIRE_TOKEN")
    model_timeout_s: float = Field(default=600.0, gt=0, alias="SKYLOOP_MODEL_TIMEOUT_S")
    blob_bucket: str | None = Field(default=None, alias="SKYLOOP_BLOB_BUCKET")
    secrets_prefix: str = Field(default="skyloop/agents", min_length=1, alias="SKYLOOP_SECRETS_PREFIX")
    # Where MCP header secrets must live (the stack sets <stack>/tools; the turn and run_tool functions
    # may read only there); each principal names its own under <prefix>/<principal>/. The local stack
    # keeps the same rule beside its agents' prefix (its IAM check allows nothing else either).
    tool_secrets_prefix: str | None = Field(
        default="skyloop/tools", min_length=1, alias="SKYLOOP_TOOL_SECRETS_PREFIX"
    )
    # OIDC sign-in (skyloop.oidc): JWTs from this issuer for this audience are accepted as bearer tokens.
    jwt_issuer: str | None = Field(default=None, alias="SKYLOOP_JWT_ISSUER")
    jwt_audience: str | None = Field(default=None, alias="SKYLOOP_JWT_AUDIENCE")
    jwt_jwks_url: str | None = Field(default=None, alias="SKYLOOP_JWT_JWKS_URL")
    jwt_principal_claim: str = Field(default="sub", min_length=1, alias="SKYLOOP_JWT_PRINCIPAL_CLAIM")
    jwt_leeway_s: int = Field(default=60, ge=0, le=300, alias="SKYLOOP_JWT_LEEWAY_S")
    # The web console's OIDC sign-in (authorization code + PKCE, a public client registered at the
    # issuer with the redirect URI <console>/oidc/callback): its client id and the scopes it asks for.
    console_client_id: str | None = Field(default=None, alias="SKYLOOP_CONSOLE_CLIENT_ID")
    console_scopes: str = Field(default="openid", min_length=1, alias="SKYLOOP_CONSOLE_SCOPES")
    # Quotas per principal (skyloop.quotas); unset means unlimited.
    quota_running_turns: int | None = Field(default=None, ge=1, alias="SKYLOOP_QUOTA_RUNNING_TURNS")
    quota_turns_per_minute: int | None = Field(default=None, ge=1, alias="SKYLOOP_QUOTA_TURNS_PER_MINUTE")
    quota_sessions: int | None = Field(default=None, ge=1, alias="SKYLOOP_QUOTA_SESSIONS")
    quota_scheduled_tasks: int | None = Field(default=None, ge=1, alias="SKYLOOP_QUOTA_SCHEDULED_TASKS")
    quota_scheduled_runs_per_hour: int | None = Field(
        default=None, ge=1, alias="SKYLOOP_QUOTA_SCHEDULED_RUNS_PER_HOUR"
    )
    # Scheduled tasks (skyloop.schedules): the EventBridge Scheduler schedule group holding one schedule per
    # task, the role it invokes the run function with, that function, and the dead-letter queue of the
    # invocations it gave up on. Unset group: no schedules are kept (a scheduler of its own fires the tasks).
    schedule_group: str | None = Field(default=None, min_length=1, alias="SKYLOOP_SCHEDULE_GROUP")
    schedule_role_arn: str | None = Field(default=None, min_length=1, alias="SKYLOOP_SCHEDULE_ROLE_ARN")
    schedule_target_arn: str | None = Field(default=None, min_length=1, alias="SKYLOOP_SCHEDULE_TARGET_ARN")
    schedule_dlq_arn: str | None = Field(default=None, min_length=1, alias="SKYLOOP_SCHEDULE_DLQ_ARN")
    schedule_retries: int = Field(default=3, ge=0, le=185, alias="SKYLOOP_SCHEDULE_RETRIES")
    schedule_max_event_age_s: int = Field(
        default=900, ge=60, le=86400, alias="SKYLOOP_SCHEDULE_MAX_EVENT_AGE_S"
    )
    # the missed-run policy (skyloop.schedules.runs.catch_up): an occurrence found passed by at most this
    # long still runs; older ones are recorded as missed
    schedule_missed_grace_s: int = Field(default=900, ge=0, alias="SKYLOOP_SCHEDULE_MISSED_GRACE_S")
    # Session files (/v1/sessions/{id}/resources/files): per file (a request body is at most 6 MiB), and per
    # session a count and a total; over any, 413 with a code naming it.
    file_max_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1, le=6 * 1024 * 1024, alias="SKYLOOP_FILE_MAX_BYTES"
    )
    session_files_max: int = Field(default=100, ge=1, alias="SKYLOOP_SESSION_FILES_MAX")
    session_files_max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1, alias="SKYLOOP_SESSION_FILES_MAX_BYTES"
    )
    # Hosted environments (skyloop.environments): where sessions' workspaces live and their commands run
    # ("local": directories under workspaces_dir, commands in bubblewrap, as skyloop dev runs them;
    # "agentcore": an AgentCore Code Interpreter session per skyloop session, snapshotted to the blob
    # bucket), the data directory a local sandbox hides, a workspace's size cap, the interpreter, and how
    # long an interpreter session may go without a command or write before the reconciler stops it (its
    # workspace snapshotted first; its files come back from the snapshot at the next call).
    hosted_engine: Literal["local", "agentcore"] = Field(default="local", alias="SKYLOOP_HOSTED_ENGINE")
    workspaces_dir: str | None = Field(default=None, min_length=1, alias="SKYLOOP_WORKSPACES_DIR")
    data_dir: str | None = Field(default=None, min_length=1, alias="SKYLOOP_DATA_DIR")
    workspace_max_bytes: int = Field(default=1024**3, ge=1, alias="SKYLOOP_WORKSPACE_MAX_BYTES")
    code_interpreter_id: str | None = Field(default=None, min_length=1, alias="SKYLOOP_CODE_INTERPRETER_ID")
    code_interpreter_public_id: str | None = Field(
        default=None, min_length=1, alias="SKYLOOP_CODE_INTERPRETER_PUBLIC_ID"
    )
    hosted_idle_s: int = Field(default=900, ge=60, le=28800, alias="SKYLOOP_HOSTED_IDLE_S")
    # How long a run_tool invocation waits for a hosted command (its function has 330 s): a command
    # allowed longer runs in the background and the state machine polls it (Wait, then PollTool)
    hosted_sync_s: float = Field(default=240, gt=0, le=300, alias="SKYLOOP_HOSTED_SYNC_S")
    hosted_poll_s: int = Field(default=10, ge=1, le=300, alias="SKYLOOP_HOSTED_POLL_S")  # between two looks
    # Outbound URLs (model base_url, MCP servers; skyloop.outbound): hosts or CIDRs allowed even when
    # private, comma-separated; the local stack sets allow_loopback.
    outbound_allow: str = Field(default="", alias="SKYLOOP_OUTBOUND_ALLOW")
    outbound_allow_loopback: bool = Field(default=False, alias="SKYLOOP_OUTBOUND_ALLOW_LOOPBACK")
    # How long a model step that asked for client tools waits for their outputs itself (publishing the
    # calls, polling the turn) before the turn parks on a task token; 0: park at once (skyloop.turns.hot_wait).
    hot_wait_s: float = Field(default=10.0, ge=0, le=60, alias="SKYLOOP_HOT_WAIT_S")
    # Functions to warm as this one cold-starts (comma-separated names; read by skyloop.prewarm itself,
    # before anything else is imported, and listed here so every SKYLOOP_ variable has one home).
    prewarm: str = Field(default="", alias="SKYLOOP_PREWARM")
    # The live channel (skyloop.live): the WebSocket URL /v1/info advertises to clients (a path such as
    # /v1/live means "on this host", as the local stack serves it), and the stage's management endpoint
    # the live and fan-out functions post through (https://<api>.execute-api.<region>.amazonaws.com/<stage>).
    live_url: str | None = Field(default=None, min_length=1, alias="SKYLOOP_LIVE_URL")
    live_endpoint: str | None = Field(default=None, min_length=1, alias="SKYLOOP_LIVE_ENDPOINT")
    # OpenAI's Agents API (skyloop.openai_compat): the executor a bare model name runs on (JSON, no key),
    # model prices for spend control (skyloop.pricing), and the API function the stream function hands
    # requests on the OpenAI paths to (skyloop.stream.proxy). Each is read by its module; listed here so
    # every SKYLOOP_ variable has one home.
    default_executor: str = Field(default="", alias="SKYLOOP_DEFAULT_EXECUTOR")
    model_prices: str = Field(default="", alias="SKYLOOP_MODEL_PRICES")
    api_function: str = Field(default="", alias="SKYLOOP_API_FUNCTION")
    # Lifecycle events (skyloop.lifecycle_events, skyloop.webhooks): the EventBridge bus they are put on
    # (unset: none), the delivery queue webhooks are attempted from and its dead-letter queue (cloud only;
    # the local stack delivers from a thread pool), and the delivery rules.
    event_bus: str | None = Field(default=None, min_length=1, alias="SKYLOOP_EVENT_BUS")
    webhook_queue_url: str | None = Field(default=None, min_length=1, alias="SKYLOOP_WEBHOOK_QUEUE_URL")
    webhook_dlq_url: str | None = Field(default=None, min_length=1, alias="SKYLOOP_WEBHOOK_DLQ_URL")
    # The local stack delivers in its own process: the API reaches its dispatcher through the notifier.
    webhook_local: bool = Field(default=False, alias="SKYLOOP_WEBHOOK_LOCAL")
    # Seconds between attempts, after the first (each jittered by +-10%): more than 24 hours in all by
    # default; the local stack sets a short one (its third attempt within 30 s).
    webhook_retry_schedule: str = Field(
        default="5,60,300,1800,7200,18000,36000,36000",
        pattern=r"^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$",
        alias="SKYLOOP_WEBHOOK_RETRY_SCHEDULE",
    )
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=30, alias="SKYLOOP_WEBHOOK_TIMEOUT_S")
    # An endpoint whose deliveries all failed for this long is disabled when one is dead-lettered.
    webhook_disable_after_s: float = Field(default=24 * 3600, ge=0, alias="SKYLOOP_WEBHOOK_DISABLE_AFTER_S")
    webhook_delivery_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, alias="SKYLOOP_WEBHOOK_DELIVERY_TTL_S")

    @property
    def retry_schedule(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self.webhook_retry_schedule.split(",") if x.strip())

    @classmethod
    def from_env(cls) -> Settings:
        return cls.model_validate({k: v for k, v in os.environ.items() if k.startswith("SKYLOOP_")})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
