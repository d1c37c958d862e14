"""Functions: one Lambda per entry of the shared manifest, each with its own role and log group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import assets, permissions
from infra import constants as C
from infra.constructs._common import grant_arns, new_log_group, pascal, removal_policy
from skyloop.manifest import FUNCTIONS

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_logs as logs
    from aws_cdk import aws_s3 as s3

    from infra.config import StackConfig

# Must match C.LAMBDA_PYTHON_VERSION (the layer's wheels); tests/infra checks it.
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64


class Functions(Construct):
    """Python on arm64, code from the project (no Docker), dependencies from one layer.

    Roles start empty: each gets write access to its own log group, X-Ray
    (tracing is active) and exactly the table, blob and secret actions declared in
    ``infra.permissions``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        bucket: s3.IBucket,
        config: StackConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        for what, decided in (("table", permissions.TABLE_ACCESS), ("blob", permissions.BLOB_ACCESS)):
            missing = [f.name for f in FUNCTIONS if f.name not in decided]
            if missing:
                raise ValueError(
                    f"no {what} access declared in infra/permissions.py for: {', '.join(missing)}"
                )
        unknown = set(permissions.SECRET_ACCESS) - {f.name for f in FUNCTIONS}
        if unknown:
            raise ValueError(f"secret access declared for functions not in the manifest: {sorted(unknown)}")
        stack = cdk.Stack.of(self)
        self.secrets_prefix = f"{stack.stack_name}/{C.SECRETS_PREFIX_PURPOSE}"
        self.tool_secrets_prefix = f"{stack.stack_name}/{C.TOOL_SECRETS_PURPOSE}"

        layer_path, built = assets.layer_dir()
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(str(layer_path)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="skyloop third-party dependencies (layers/requirements.txt)",
            removal_policy=removal_policy(config),
        )
        if not built:
            cdk.Annotations.of(self.dependencies).add_warning_v2(
                "skyloop:layerNotBuilt",
                "layers/build is missing: the dependencies layer is an empty placeholder; "
                "run `make layer` before deploying",
            )

        if assets.bytecode_python() is None:
            cdk.Annotations.of(self).add_warning_v2(
                "skyloop:noBytecode",
                "no CPython 3.12 on this machine: the function code ships without bytecode, so every "
                "cold start compiles it; install Python 3.12 (pyenv install 3.12) and synth again",
            )

        self.by_name: dict[str, lambda_.Function] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        for spec in FUNCTIONS:
            cid = pascal(spec.name)
            log_group = new_log_group(self, f"{cid}Logs", config)
            role = iam.Role(
                self,
                f"{cid}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"skyloop {spec.name} function",
            )
            log_group.grant_write(role)
            fn = lambda_.Function(
                self,
                cid,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=spec.handler,
                code=lambda_.Code.from_asset(str(assets.stage_function(spec))),
                memory_size=spec.memory_mb,
                timeout=cdk.Duration.seconds(spec.timeout_s),
                description=spec.description,
                role=role,
                log_group=log_group,
                layers=[self.dependencies],
                tracing=lambda_.Tracing.ACTIVE,
                environment={
                    "SKYLOOP_TABLE_NAME": table.table_name,
                    "SKYLOOP_REQUIRE_TOKEN": C.ENV_REQUIRE_TOKEN,
                    "POWERTOOLS_SERVICE_NAME": C.SERVICE_NAME,
                    "POWERTOOLS_METRICS_NAMESPACE": C.SERVICE_NAME,
                    "POWERTOOLS_LOG_LEVEL": C.POWERTOOLS_LOG_LEVEL,
                    "POWERTOOLS_TRACE_DISABLED": "false" if config.powertools_tracer else "true",
                    "SKYLOOP_BLOB_BUCKET": bucket.bucket_name,
                    **_optional_environment(spec.name, config),
                },
            )
            access = permissions.TABLE_ACCESS[spec.name]
            # Exactly the declared actions on the table and the named indexes: the L2 grants add
            # Scan, BatchGetItem, DescribeTable, stream reads and index/* on top of what is used.
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=list(access.actions),
                    resources=[
                        table.table_arn,
                        *(f"{table.table_arn}/index/{index}" for index in access.indexes),
                    ],
                )
            )
            self._grant_blobs(fn, spec.name, bucket)
            self._grant_secrets(fn, spec.name)
            self.by_name[spec.name] = fn
            self.log_groups[spec.name] = log_group
        self._grant_bedrock(config)
        self._prewarm()
        self._proxies()

    def _prewarm(self) -> None:
        """``prewarm`` targets of the manifest: their names in ``SKYLOOP_PREWARM`` and the right to invoke
        exactly them (skyloop.prewarm sends one asynchronous warm-up each as the function cold-starts)."""
        for spec in FUNCTIONS:
            if not spec.prewarm:
                continue
            fn = self.by_name[spec.name]
            targets = [self.by_name[name] for name in spec.prewarm]
            fn.add_environment("SKYLOOP_PREWARM", ",".join(t.function_name for t in targets))
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[t.function_arn for t in targets]
                )
            )

    def _proxies(self) -> None:
        """``proxies_to``: the target's name in ``SKYLOOP_API_FUNCTION`` and the right to invoke exactly it."""
        for spec in FUNCTIONS:
            if spec.proxies_to is None:
                continue
            fn, target = self.by_name[spec.name], self.by_name[spec.proxies_to]
            fn.add_environment("SKYLOOP_API_FUNCTION", target.function_name)
            if spec.proxies_to in spec.prewarm:
                continue  # the warm-up's grant is exactly this one already
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[target.function_arn])
            )

    def _grant_blobs(self, fn: lambda_.Function, name: str, bucket: s3.IBucket) -> None:
        """Exactly the object actions under the declared prefixes; listing only below its prefixes
        (the L2 grants add s3:*Object* wildcards, GetBucket* and List* on every key).
        """
        access = permissions.BLOB_ACCESS[name]
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(access.actions),
                resources=[bucket.arn_for_objects(f"{prefix}*") for prefix in access.prefixes],
            )
        )
        if access.list_prefixes:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in access.list_prefixes]}},
                )
            )

    def _grant_secrets(self, fn: lambda_.Function, name: str) -> None:
        access = permissions.SECRET_ACCESS.get(name)
        if access is None:
            return
        fn.add_environment("SKYLOOP_SECRETS_PREFIX", self.secrets_prefix)
        # where a principal's MCP header secrets must be named (checked at agent registration)
        fn.add_environment("SKYLOOP_TOOL_SECRETS_PREFIX", self.tool_secrets_prefix)
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(access.actions),
                resources=[
                    self.secret_arn(
                        pattern.format(agents=self.secrets_prefix, tools=self.tool_secrets_prefix)
                    )
                    for pattern in access.names
                ],
            )
        )

    def secret_arn(self, name_pattern: str) -> str:
        """Secrets Manager ARNs end in ``-`` and six random characters after the name.

        Built from pseudo parameters rather than the stack's env, so the ARN (and the cdk-nag
        finding that names it) is the same in every account.
        """
        return (
            f"arn:{cdk.Aws.PARTITION}:secretsmanager:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:"
            f"secret:{name_pattern}-??????"
        )

    def _grant_bedrock(self, config: StackConfig) -> None:
        """``bedrockModelArns``: the turn function (its model calls) may invoke exactly those models and profiles (none by default)."""
        if not config.bedrock_model_arns:
            return
        actions = dict(C.CONTEXT_GRANTS["turn"])[C.CTX_BEDROCK_MODEL_ARNS]  # the local IAM check's too
        role = self.by_name["turn"].role
        assert role is not None
        grant_arns(self, "TurnBedrockModels", role, list(actions), list(config.bedrock_model_arns))

    def __getitem__(self, name: str) -> lambda_.Function:
        return self.by_name[name]


# Per-principal quotas are checked where turns start and sessions are created: the API, and the run
# function of scheduled tasks (each run opens a session and starts a turn for the task's owner).
QUOTA_FUNCTIONS = frozenset({"api", "schedule_run"})


def _optional_environment(name: str, config: StackConfig) -> dict[str, str]:
    """Settings that exist only when their context is given (unset: the application's default)."""
    env: dict[str, str] = {}
    if config.outbound_allow:  # every function may open outbound URLs (model, MCP, JWKS)
        env["SKYLOOP_OUTBOUND_ALLOW"] = ",".join(config.outbound_allow)
    if name in QUOTA_FUNCTIONS:
        for key, value in (
            ("SKYLOOP_QUOTA_RUNNING_TURNS", config.quota_running_turns),
            ("SKYLOOP_QUOTA_TURNS_PER_MINUTE", config.quota_turns_per_minute),
            ("SKYLOOP_QUOTA_SESSIONS", config.quota_sessions),
            ("SKYLOOP_QUOTA_SCHEDULED_TASKS", config.quota_scheduled_tasks),
            ("SKYLOOP_QUOTA_SCHEDULED_RUNS_PER_HOUR", config.quota_scheduled_runs_per_hour),
        ):
            if value is not None:
                env[key] = str(value)
    return env
