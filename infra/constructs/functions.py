"""Functions: one Lambda per entry of the shared manifest, each with its own role and log group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import assets, permissions
from infra import constants as C
from infra.constructs._common import new_log_group, pascal, removal_policy
from skyloop.manifest import FUNCTIONS

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_logs as logs

    from infra.config import StackConfig

# Must match C.LAMBDA_PYTHON_VERSION (the layer's wheels); tests/infra checks it.
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64


class Functions(Construct):
    """Python on arm64, code from the project (no Docker), dependencies from one layer.

    Roles start empty: each gets write access to its own log group, X-Ray
    (tracing is active) and exactly the table actions declared in ``infra.permissions``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, table: dynamodb.ITable, config: StackConfig
    ) -> None:
        super().__init__(scope, construct_id)
        missing = [f.name for f in FUNCTIONS if f.name not in permissions.TABLE_ACCESS]
        if missing:
            raise ValueError(f"no table access declared in infra/permissions.py for: {', '.join(missing)}")

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
            self.by_name[spec.name] = fn
            self.log_groups[spec.name] = log_group

    def __getitem__(self, name: str) -> lambda_.Function:
        return self.by_name[name]
