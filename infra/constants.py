"""Names, sizes and versions of the cloud stack, in one place.

Pure Python (no CDK import), so ``layers/build.py`` can read the Lambda
platform from here without starting jsii.
"""

from __future__ import annotations

STACK_NAME = "Skyloop"
SERVICE_NAME = "skyloop"  # POWERTOOLS_SERVICE_NAME and the metrics namespace

# ---------------------------------------------------------------- CDK
# The oldest aws-cdk-lib whose OAC function-URL origin also grants lambda:InvokeFunction (dual auth,
# aws/aws-cdk#35872); pyproject.toml's floor must not admit anything older.
CDK_MIN_VERSION = "2.273.0"

# ---------------------------------------------------------------- Lambda platform
# One Python version for the functions and the layer's wheels (pydantic-core is
# a compiled wheel: the layer must be built for exactly this ABI).
LAMBDA_PYTHON_VERSION = "3.12"
LAYER_PLATFORM = "manylinux2014_aarch64"  # arm64 (Graviton): cheaper per GB-second
LAYER_IMPLEMENTATION = "cp"

# ---------------------------------------------------------------- context keys (cdk.json / -c)
CTX_PROD = "prod"  # "true": RETAIN + deletion protection on stateful resources
CTX_LWA_LAYER_VERSION = "lwaLayerVersion"
CTX_ALARM_TOPIC_ARN = "alarmTopicArn"  # optional: an existing SNS topic the alarms notify
CTX_POWERTOOLS_TRACER = "powertoolsTracer"
CTX_CORS_ORIGINS = "corsOrigins"  # comma-separated browser origins allowed to call the API; empty: no CORS
CTX_RECONCILE_MINUTES = "reconcileMinutes"  # how often the reconciler runs (1-5)
CTX_BEDROCK_MODEL_ARNS = "bedrockModelArns"  # models / inference profiles call_model may invoke
BEDROCK_MODEL_ACTIONS = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
# Grants whose resources are a context value: function -> (context key, actions). The stack grants them
# (infra/constructs/functions.py) only when the value is given, so the export (synthesized without deploy
# context) records them as such and the local IAM check reads the value from the developer's cdk.json.
CONTEXT_GRANTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "turn": ((CTX_BEDROCK_MODEL_ARNS, BEDROCK_MODEL_ACTIONS),),
}
CTX_LAMBDA_TOOL_ARNS = "lambdaToolArns"  # Lambda tools the turn machine may invoke
CTX_COGNITO = "cognito"  # "true": a Cognito user pool and app client issue the JWTs
CTX_JWT_ISSUER = "jwtIssuer"  # or: trust an existing OIDC issuer ...
CTX_JWT_AUDIENCE = "jwtAudience"  # ... for this audience (its client id)
CTX_JWT_JWKS_URL = "jwtJwksUrl"  # optional: the issuer's JWKS URL when discovery is not wanted
CTX_CONSOLE_CLIENT_ID = "consoleClientId"  # the web console's public OIDC client at jwtIssuer (code + PKCE)
CTX_JWT_AUTHORIZER_ON_API = "jwtAuthorizerOnApi"  # "true": the HTTP API itself requires a JWT
CTX_QUOTA_RUNNING_TURNS = "quotaRunningTurns"
CTX_QUOTA_TURNS_PER_MINUTE = "quotaTurnsPerMinute"
CTX_QUOTA_SESSIONS = "quotaSessions"
CTX_QUOTA_SCHEDULED_TASKS = "quotaScheduledTasks"
CTX_QUOTA_SCHEDULED_RUNS_PER_HOUR = "quotaScheduledRunsPerHour"
CTX_OUTBOUND_ALLOW = "outboundAllow"  # hosts / CIDRs outbound URLs may reach even when private

# ---------------------------------------------------------------- Lambda Web Adapter
LWA_LAYER_ACCOUNT = "753240598075"  # AWS's publishing account for the Lambda Web Adapter layers
# Where the arm64 layer is published, and by which account: the adapter's release pipeline
# (awslabs/aws-lambda-web-adapter, .github/workflows/prod.json and cn-prod.json, "arm64_supported",
# as of 5187096, 2026-02-10). No GovCloud region: there, or in a region added since, copy the layer
# into your account and pass -c lwaLayerArn=<its ARN> (docs/deploy.md).
LWA_LAYER_ACCOUNTS: dict[str, str] = {
    **{
        region: LWA_LAYER_ACCOUNT
        for region in (
            "af-south-1",
            "ap-east-1",
            "ap-east-2",
            "ap-northeast-1",
            "ap-northeast-2",
            "ap-northeast-3",
            "ap-south-1",
            "ap-south-2",
            "ap-southeast-1",
            "ap-southeast-2",
            "ap-southeast-3",
            "ap-southeast-4",
            "ap-southeast-5",
            "ap-southeast-6",
            "ap-southeast-7",
            "ca-central-1",
            "ca-west-1",
            "eu-central-1",
            "eu-central-2",
            "eu-north-1",
            "eu-south-1",
            "eu-south-2",
            "eu-west-1",
            "eu-west-2",
            "eu-west-3",
            "il-central-1",
            "me-central-1",
            "me-south-1",
            "mx-central-1",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
        )
    },
    "cn-north-1": "041581134020",
    "cn-northwest-1": "069767869989",
}
CTX_STREAM_CONCURRENCY = "streamConcurrency"  # reserved concurrency of the SSE stream function (unset: none)
CTX_LWA_LAYER_ARN = "lwaLayerArn"  # the adapter layer to use instead (a region without a published one)
LWA_LAYER_NAME_ARM64 = "LambdaAdapterLayerArm64"
LWA_DEFAULT_LAYER_VERSION = 25
LWA_PORT = 8080  # run.sh binds uvicorn to $AWS_LWA_PORT
LWA_READINESS_CHECK_PATH = "/healthz"

# ---------------------------------------------------------------- reconciler
RECONCILE_DEFAULT_MINUTES = 2  # the grace period is 60 s: a stranded turn is fixed within ~3 minutes
RECONCILE_MIN_MINUTES = 1
RECONCILE_MAX_MINUTES = 5

# ---------------------------------------------------------------- blobs and secrets
BLOB_MULTIPART_ABORT_DAYS = 1  # incomplete multipart uploads are removed after a day
SECRETS_PREFIX_PURPOSE = "agents"  # SKYLOOP_SECRETS_PREFIX = <stack>/agents: agents' model keys
INTERPRETER_SANDBOX_PURPOSE = "sandbox"  # <stack>_sandbox: the code interpreter of network: none
INTERPRETER_PUBLIC_PURPOSE = "public"  # <stack>_public: network: public
TOOL_SECRETS_PURPOSE = "tools"  # <stack>/tools/...: the secrets MCP headers may name

# ---------------------------------------------------------------- environment
ENV_REQUIRE_TOKEN = "true"  # the deployed API is never open (bearer tokens, checked in the functions)
POWERTOOLS_LOG_LEVEL = "INFO"

# ---------------------------------------------------------------- logs
LOG_RETENTION = "ONE_MONTH"  # aws_logs.RetentionDays member (30 days): functions, turns, API access
# Step Functions delivers logs as a "vended" log source: under this prefix CloudWatch Logs needs no
# resource policy per log group (that policy is limited to 5,120 characters per account and region,
# so busy accounts run out). The name is <prefix><stack>-turns-<region>-<8 hex of the stack id>:
# unique per stack instance, so a log group retained by a deleted prod stack never blocks a redeploy.
TURNS_LOG_GROUP_PREFIX = "/aws/vendedlogs/states/"
TURNS_LOG_GROUP_PURPOSE = "turns"

# ---------------------------------------------------------------- account-global names
# CloudFront resources are global to the account: their names must differ between regions (and
# stacks) of one account. Each is <stack>-<purpose>-<region>, within the service's length limit.
NAME_MAX_REGION_LENGTH = 14  # the longest region names today, e.g. "ap-southeast-4"
OAC_NAME_PURPOSE = "stream-oac"  # CloudFront Origin Access Control: 64 characters at most
OAC_NAME_MAX_LENGTH = 64
EDGE_FUNCTION_NAME_PURPOSE = "stream-auth"  # CloudFront Function: 64 characters of [A-Za-z0-9_-]
EDGE_FUNCTION_NAME_MAX_LENGTH = 64

# ---------------------------------------------------------------- HTTP API
API_THROTTLE_RATE_PER_S = 50
API_THROTTLE_BURST = 100

# ---------------------------------------------------------------- live channel (WebSocket API)
LIVE_STAGE_NAME = "live"  # wss://<api>.execute-api.<region>.amazonaws.com/live
LIVE_THROTTLE_RATE_PER_S = 100  # client frames (auth, subscribe, ping) per second, across connections
LIVE_THROTTLE_BURST = 200
# The fan-out's event source mapping on the table stream: bounded retries, then the failure queue.
# Scheduled tasks (infra/constructs/schedules.py): EventBridge Scheduler's retries of a run function
# invocation that failed, for at most this long, then the dead-letter queue (kept 14 days).
SCHEDULE_RETRIES = 3
SCHEDULE_MAX_EVENT_AGE_S = 900
SCHEDULE_DLQ_RETENTION_DAYS = 14
# The reconciler also repairs scheduled tasks whose schedule stopped firing (skyloop.schedules.repair),
# each pass; every this many hours a rule sends it {"job": "orphan_schedules"}: delete the schedules
# whose task is gone. The alarm ScheduledTasksRepaired fires on any repair (the metric's Sum >= 1).
ORPHAN_SCHEDULES_HOURS = 1
SCHEDULE_REPAIRED_METRIC = "ScheduledTasksRepaired"

FANOUT_BATCH_SIZE = 100
FANOUT_RETRY_ATTEMPTS = 3
FANOUT_MAX_RECORD_AGE_S = 600  # a live event older than this is no longer worth pushing (the log has it)
FANOUT_PARALLELIZATION = 4  # concurrent batches per shard; one session's records stay in order

# ---------------------------------------------------------------- lifecycle events and webhooks
# The publisher's event source mapping: lifecycle events must not be lost, so it retries far longer
# than the live fan-out (bisecting a failing batch), for as long as the stream keeps records.
LIFECYCLE_BATCH_SIZE = 100
LIFECYCLE_RETRY_ATTEMPTS = 100
LIFECYCLE_MAX_RECORD_AGE_S = 24 * 3600  # the stream's retention: a record is never dropped for age before
LIFECYCLE_PARALLELIZATION = 4  # per-partition order holds: one session's events stay in order
# The delivery queue (FIFO): a message is received once per attempt (BatchSize 1) and hidden for
# the schedule's next delay in between; the redrive policy only catches messages the function
# cannot handle at all (it dead-letters exhausted deliveries itself).
WEBHOOK_QUEUE_RETENTION_DAYS = 4  # > the 24-hour-plus retry schedule
WEBHOOK_MAX_RECEIVES = 30  # > the schedule's 9 attempts, plus crashes
WEBHOOK_DEAD_RETENTION_DAYS = 14
LIFECYCLE_ITERATOR_AGE_MS = 60_000  # lifecycle events a minute behind the table stream

# ---------------------------------------------------------------- CORS (only with corsOrigins)
# What a browser client sends and reads. Bearer tokens travel in Authorization, not cookies, so
# credentials (cookies) stay disallowed.
CORS_API_METHODS = ("GET", "POST", "PATCH", "DELETE")  # the REST routes' methods
# The SDKs' own headers too: a browser's preflight names every header the request will carry, and one
# not allowed fails the request. OpenAI's sends OpenAI-Beta on /openai/v1; Anthropic's sends
# anthropic-version and anthropic-beta on /anthropic/v1, and its key in x-api-key (a skyloop token there).
CORS_API_HEADERS = (
    "authorization",
    "content-type",
    "idempotency-key",
    "openai-beta",
    "anthropic-beta",
    "anthropic-version",
    "x-api-key",
)
CORS_API_EXPOSE_HEADERS = ("x-request-id",)
# The function URL's CORS answers the preflight of every request on a stream path: OPTIONS stays on
# the stream origin (STREAM_ORIGIN_METHODS) even when the request it asks for goes to the API. POST:
# OpenAI's event post on .../events, whose preflight reaches the URL though the post itself reaches
# the HTTP API (the stream behaviours' viewer-request function); no POST reaches the URL.
CORS_STREAM_METHODS = ("GET", "POST")
CORS_STREAM_HEADERS = (
    "authorization",
    "last-event-id",
    "content-type",
    "idempotency-key",
    "openai-beta",
    "anthropic-beta",
    "anthropic-version",
    "x-api-key",  # Anthropic's SDK's key on the Claude stream (skyloop.stream.anthropic reads it)
)
CORS_MAX_AGE_S = 600  # browsers cache a preflight answer this long

# ---------------------------------------------------------------- edge
STREAM_PATH_PATTERN = "/v1/sessions/*/stream"
# OpenAI's Agents API streams on a path it also takes posts on (GET vs POST .../events): the
# behaviour is the stream function's, and its viewer-request function sends every request with a body
# to the API instead (Origin Access Control cannot sign a function URL request's body for a client
# that did not hash it: Lambda refuses it). A create with ``stream: true`` is the API's too: it answers
# 303 to the session's events stream, which the SDKs follow (docs/deploy.md, "Routing").
OPENAI_STREAM_PATH_PATTERNS = ("/openai/v1/agents/sessions/*/events",)
# Claude Managed Agents' stream has a path of its own (only ever a GET).
ANTHROPIC_STREAM_PATH_PATTERNS = ("/anthropic/v1/sessions/*/events/stream",)
# Every stream path of the compatible APIs, behind the same stream behaviour.
COMPAT_STREAM_PATH_PATTERNS = (*OPENAI_STREAM_PATH_PATTERNS, *ANTHROPIC_STREAM_PATH_PATTERNS)
# The methods the stream origin takes; any other goes to the API origin (they carry bodies).
# skyloop.stream.app.STREAM_METHODS, which the local gateway routes by (tests/infra/test_routing.py
# holds them equal).
STREAM_ORIGIN_METHODS = ("GET", "HEAD", "OPTIONS")
# The distribution's origins, by id (the viewer-request function selects the API's by this id)
API_ORIGIN_ID = "api"
STREAM_ORIGIN_ID = "stream"
CONSOLE_ORIGIN_ID = "console"
# CloudFront signs function-URL requests (Origin Access Control) in the Authorization
# header, replacing the viewer's. A viewer-request function copies the viewer's
# Authorization into this header first, so the stream function can still read the
# bearer token. CloudFront is the only way to the URL, so the header is trustworthy.
STREAM_AUTH_HEADER = "x-skyloop-authorization"
STREAM_ORIGIN_READ_TIMEOUT_S = 60  # SSE heartbeats every 15 s keep the origin connection busy
API_ORIGIN_READ_TIMEOUT_S = 30  # the HTTP API's own integration limit

# ---------------------------------------------------------------- web console (S3 behind the same CloudFront)
# Paths CloudFront sends to the HTTP API; the stream pattern goes first (to the function URL), and
# every other path is the console's (the default behavior: the S3 bucket).
# Each API prefix bare too: "/anthropic/*" does not match "/anthropic", which would otherwise get the
# console's index.html with 200 (an SDK reads that as a string); the API answers it in its contract's 404.
API_PREFIXES = ("/v1", "/openai", "/anthropic", "/api")
API_PATH_PATTERNS = (*(f"{p}/*" for p in API_PREFIXES), *API_PREFIXES, "/health", "/openapi.json")
CONSOLE_INDEX = "index.html"
CONSOLE_ASSETS_PATH_PATTERN = "/assets/*"  # Vite's content-hashed files
CONSOLE_ASSETS_CACHE_CONTROL = "public, max-age=31536000, immutable"
CONSOLE_PAGES_CACHE_CONTROL = "no-cache"  # index.html and prices.json: revalidated on every load
CONSOLE_DEPLOY_MEMORY_MB = 256  # BucketDeployment's aws s3 sync of a few hundred kB
CONSOLE_OAC_NAME_PURPOSE = "console-oac"
CONSOLE_FUNCTION_NAME_PURPOSE = "console-routes"  # the viewer-request function of client routes
CONSOLE_HEADERS_NAME_PURPOSE = "console-headers"  # response headers policies: 128 characters at most
CONSOLE_ASSET_HEADERS_NAME_PURPOSE = "console-assets"
CONSOLE_HEADERS_NAME_MAX_LENGTH = 128
# The console loads nothing from elsewhere; it calls its own origin, and an OIDC issuer (https).
CONSOLE_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; connect-src 'self' https:; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self' https:"
)

# ---------------------------------------------------------------- alarms
ALARM_PERIOD_MINUTES = 5
FUNCTION_ERRORS_THRESHOLD = 1  # any unhandled error in 5 minutes
THROTTLES_THRESHOLD = 1
FANOUT_ITERATOR_AGE_MS = 60_000  # the live fan-out a minute behind the table stream
FAILED_EXECUTIONS_THRESHOLD = 1
