"""The skyloop stack: composes one construct per concern and attaches cdk-nag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs

from infra import permissions
from infra.config import StackConfig
from infra.constructs.auth import SignIn
from infra.constructs.blobs import BlobBucket
from infra.constructs.console import ConsoleSite
from infra.constructs.edge import Edge
from infra.constructs.environments import HostedEnvironments
from infra.constructs.functions import Functions
from infra.constructs.http_api import HttpApi
from infra.constructs.lifecycle import LifecycleEvents
from infra.constructs.live import LiveChannel
from infra.constructs.monitoring import Monitoring
from infra.constructs.reconciler import Reconciler
from infra.constructs.schedules import ScheduledTasks
from infra.constructs.smoke_tool import SmokeTool
from infra.constructs.stream import Stream
from infra.constructs.table import SessionTable
from infra.constructs.turn_machine import TurnMachine
from skyloop.manifest import FUNCTIONS

if TYPE_CHECKING:
    from constructs import Construct, IConstruct

# The functions that verify bearer tokens and JWTs: every REST route and the stream.
JWT_FUNCTIONS = ("api", "stream")
# docs/security.md's audit query (one line per write request, in the API function's log group).
AUDIT_QUERY_FIELDS = ["@timestamp", "principal", "action", "resource_id", "outcome"]


class SkyloopStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = StackConfig.from_context(self.node)
        self.config = config

        self.data = SessionTable(self, "Data", config=config)
        self.blobs = BlobBucket(self, "Blobs", config=config)
        self.functions = Functions(
            self, "Functions", table=self.data.table, bucket=self.blobs.bucket, config=config
        )
        self.smoke_tool = SmokeTool(self, "SmokeTool", config=config)
        self.turns = TurnMachine(
            self,
            "Turns",
            functions=self.functions,
            config=config,
            tool_functions=(self.smoke_tool.function,),
        )
        (scheduled,) = (f for f in FUNCTIONS if f.scheduled)
        self.reconciler = Reconciler(
            self, "Reconciler", function=self.functions[scheduled.name], config=config
        )
        self.schedules = ScheduledTasks(self, "Schedules", functions=self.functions.by_name)
        self.environments = HostedEnvironments(self, "Environments", functions=self.functions.by_name)
        streaming = next(f for f in FUNCTIONS if f.streaming)
        self.sign_in = SignIn(self, "SignIn", config=config)
        for name in JWT_FUNCTIONS:
            for key, value in self.sign_in.environment().items():
                self.functions[name].add_environment(key, value)
        if config.console_client_id:  # /v1/info tells the web console where to sign in
            self.functions["api"].add_environment("SKYLOOP_CONSOLE_CLIENT_ID", config.console_client_id)
        jwt = (
            (self.sign_in.issuer, self.sign_in.audience)
            if config.jwt_authorizer_on_api and self.sign_in.issuer and self.sign_in.audience
            else None
        )
        self.api = HttpApi(self, "Api", handler=self.functions["api"], config=config, jwt=jwt)
        self.stream = Stream(self, "Stream", function=self.functions[streaming.name], config=config)
        self.live = LiveChannel(
            self,
            "Live",
            live=self.functions["live"],
            fanout=self.functions["push_fanout"],
            table=self.data.table,
            config=config,
        )
        self.functions["api"].add_environment("SKYLOOP_LIVE_URL", self.live.url)  # /v1/info advertises it
        self.lifecycle = LifecycleEvents(
            self,
            "Lifecycle",
            publisher=self.functions["lifecycle_events"],
            delivery=self.functions["webhook_delivery"],
            api=self.functions["api"],
            table=self.data.table,
            config=config,
        )
        self.audit_query = logs.QueryDefinition(
            self,
            "AuditQuery",
            query_definition_name=f"{self.stack_name}/audit",
            query_string=logs.QueryString(
                fields=AUDIT_QUERY_FIELDS, filter_statements=["audit = 1"], sort="@timestamp desc", limit=200
            ),
            log_groups=[self.functions.log_groups["api"]],
        )
        self.console = ConsoleSite(self, "Console")
        self.edge = Edge(
            self,
            "Edge",
            api_domain_name=self.api.domain_name,
            stream_url=self.stream.url,
            console_bucket=self.console.bucket,
        )
        self.console.deploy(self.edge.distribution)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            functions=self.functions.by_name,
            machine=self.turns.machine,
            api=self.api.api,
            table=self.data.table,
            distribution=self.edge.distribution,
            config=config,
            live=self.live,
            lifecycle=self.lifecycle,
            schedule_dead_letters=self.schedules.dead_letters,
            schedule_repairs=True,
        )

        cdk.CfnOutput(self, "EndpointUrl", value=self.edge.endpoint_url, description="The one HTTPS endpoint")
        cdk.CfnOutput(
            self,
            "ConsoleUrl",
            value=f"{self.edge.endpoint_url}/",
            description="The web console (sign in with a bearer token, or OIDC when configured)",
        )
        cdk.CfnOutput(self, "LiveUrl", value=self.live.url, description="The live channel (WebSocket)")
        cdk.CfnOutput(self, "TableName", value=self.data.table.table_name)
        cdk.CfnOutput(self, "StateMachineArn", value=self.turns.machine.state_machine_arn)
        cdk.CfnOutput(
            self,
            "EventBusName",
            value=self.lifecycle.bus.event_bus_name,
            description="Lifecycle events (source: skyloop): route them with your own EventBridge rules",
        )
        cdk.CfnOutput(self, "EventBusArn", value=self.lifecycle.bus.event_bus_arn)
        cdk.CfnOutput(
            self,
            "DeadDeliveriesQueueUrl",
            value=self.lifecycle.dead.queue_url,
            description="Webhook deliveries that exhausted their retries",
        )
        cdk.CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        cdk.CfnOutput(self, "BlobBucketName", value=self.blobs.bucket.bucket_name)
        cdk.CfnOutput(self, "SecretsPrefix", value=self.functions.secrets_prefix)
        cdk.CfnOutput(
            self,
            "ScheduleGroupName",
            value=self.schedules.group.ref,
            description="EventBridge Scheduler group holding one schedule per scheduled task",
        )
        cdk.CfnOutput(
            self,
            "ScheduleDeadLetterQueueUrl",
            value=self.schedules.dead_letters.queue_url,
            description="Scheduled runs EventBridge Scheduler gave up invoking",
        )
        cdk.CfnOutput(
            self,
            "SmokeToolArn",
            value=self.smoke_tool.function.function_arn,
            description="skyloop smoke --tool-function: the echo tool the turn machine may invoke",
        )
        if self.sign_in.issuer and self.sign_in.audience:
            cdk.CfnOutput(self, "JwtIssuer", value=self.sign_in.issuer)
            cdk.CfnOutput(self, "JwtAudience", value=self.sign_in.audience)
        if self.sign_in.user_pool is not None:
            cdk.CfnOutput(self, "UserPoolId", value=self.sign_in.user_pool.user_pool_id)

        self._acknowledge_nag_findings()

    def _acknowledge_nag_findings(self) -> None:
        """Each acknowledged AwsSolutions finding, on the narrowest construct, with its reason.

        tests/infra checks that the wildcard resources acknowledged here carry only
        the actions named in the reasons.
        """
        machine_id = self.get_logical_id(self.turns.machine.node.default_child)  # type: ignore[arg-type]
        _ack(
            self.functions,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray tracing is active on every function; xray:PutTraceSegments and "
            "xray:PutTelemetryRecords support no resource-level permissions, nor does "
            "dynamodb:ListStreams, which the fan-out's table-stream event source needs.",
        )
        _ack(
            self.turns.machine,
            "AwsSolutions-IAM5[Resource::*]",
            "Tracing and log delivery of the state machine: the X-Ray actions and the CloudWatch "
            "Logs delivery actions (logs:CreateLogDelivery, logs:DescribeResourcePolicies, ...) "
            "support no resource-level permissions.",
        )
        _ack(
            self.functions["api"].role,  # type: ignore[arg-type]
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
            f'execution:{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}:*]',
            "StopExecution (interrupt, delete) targets executions of this one state machine; "
            "execution names are per-turn response ids unknown at deploy time.",
        )
        reconcile = next(f.name for f in FUNCTIONS if f.scheduled)
        _ack(
            self.functions[reconcile].role,  # type: ignore[arg-type]
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
            f'execution:{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}:*]',
            "DescribeExecution (is a running session's turn still executing?) targets executions of "
            "this one state machine; execution names are per-turn response ids unknown at deploy time.",
        )
        bucket_id = self.get_logical_id(self.blobs.bucket.node.default_child)  # type: ignore[arg-type]
        for prefix in sorted({p for a in permissions.BLOB_ACCESS.values() for p in a.prefixes}):
            _ack(
                self.functions,
                f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                f"Blob keys are content hashes under per-session and per-agent prefixes created at run "
                f"time; each role gets only the object actions infra/permissions.py BLOB_ACCESS declares, "
                f"on the {prefix} prefix of this one bucket.",
            )
        for pattern in sorted({n for a in permissions.SECRET_ACCESS.values() for n in a.names}):
            name = pattern.format(
                agents=self.functions.secrets_prefix, tools=self.functions.tool_secrets_prefix
            )
            _ack(
                self.functions,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:"
                f"<AWS::AccountId>:secret:{name}-??????]",
                "Agent keys are secrets named per agent id at registration (and MCP header secrets "
                "named by the operator under the stack's tools prefix); Secrets Manager adds a random "
                "6-character suffix to every ARN. Only the actions of infra/permissions.py "
                "SECRET_ACCESS are granted, on this stack's prefix.",
            )
        if self.sign_in.user_pool is not None:
            _ack(
                self.sign_in.user_pool,
                "AwsSolutions-COG8",
                "The Essentials tier: users are invited by an operator (no self sign-up), MFA (TOTP) "
                "is required and passwords are long; the Plus tier's threat protection is billed per "
                "monthly active user against the scale-to-zero design. Switch feature_plan for it.",
            )
        _ack(
            self.blobs.bucket,
            "AwsSolutions-S1",
            "Server access logs would need a second bucket and log every blob read of every turn; the "
            "bucket is private (public access blocked, TLS only) and reached only by the stack's "
            "function roles; CloudTrail S3 data events can record object access when an audit needs it.",
        )
        _ack(
            self.functions,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the dependency layer holds compiled wheels "
            "(pydantic-core) built for exactly this ABI by layers/build.py. Move "
            "infra.constants.LAMBDA_PYTHON_VERSION and the runtime together.",
        )
        _ack(
            self.smoke_tool.function,
            "AwsSolutions-L1",
            "The smoke echo tool runs on the same pinned Python 3.12 as every other function "
            "(infra.constants.LAMBDA_PYTHON_VERSION), so it is checked by the same interpreter.",
        )
        _ack(
            self.api.api,
            "AwsSolutions-APIG4",
            "Authorization is done in the functions, not by the gateway: every route needs "
            "'Authorization: Bearer <token>' checked against token hashes in the table "
            "(SKYLOOP_REQUIRE_TOKEN=true), the same check the stream function makes; a gateway "
            "authorizer would add a Lambda invocation per request and could not cover the stream. "
            "With -c jwtAuthorizerOnApi=true an HTTP API JWT authorizer (no Lambda) is added as well.",
        )
        self._acknowledge_console_findings()
        live_api_id = self.get_logical_id(self.live.api.node.default_child)  # type: ignore[arg-type]
        _ack(
            self.functions,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
            f"<{live_api_id}>/live/POST/@connections/*]",
            "The live and push_fanout functions post to WebSocket connections whose ids API Gateway "
            "assigns at connect time; the grant is ManageConnections on POST @connections of this one "
            "API's live stage, nothing else.",
        )
        _ack(
            self.live.api,
            "AwsSolutions-APIG4",
            "Browsers cannot send headers on a WebSocket and tokens must stay out of URLs (and logs), "
            "so the client authenticates with its first frame: the live function checks the bearer "
            "token or JWT exactly as the REST API does, and answers every frame of an "
            "unauthenticated connection with an error; $connect alone grants nothing.",
        )
        group_id = self.get_logical_id(self.schedules.group)
        for name in permissions.SCHEDULER_ACCESS:
            _ack(
                self.functions[name].role,  # type: ignore[arg-type]
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:"
                f"schedule/<{group_id}>/*]",
                "One EventBridge Scheduler schedule per scheduled task, named by the task's id, made at run "
                "time; the grant is the actions of infra/permissions.py SCHEDULER_ACCESS on this one "
                "schedule group's schedules, nothing else.",
            )
        for name in permissions.SCHEDULE_LISTERS:
            _ack(
                self.functions[name].role,  # type: ignore[arg-type]
                "AwsSolutions-IAM5[Resource::*]",
                "scheduler:ListSchedules supports no resource-level permissions; the repair pass lists "
                "this stack's schedule group (GroupName) to delete the schedules whose scheduled task is "
                "gone. Every other scheduler action is granted on this group's schedules only.",
            )
        _ack(
            self.schedules.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the scheduled tasks' schedules (the "
            "invocations EventBridge Scheduler gave up on, with an alarm); a queue behind it would have "
            "nothing to catch.",
        )
        _ack(
            self.lifecycle.failures,
            "AwsSolutions-SQS3",
            "This queue is itself the on-failure destination of the lifecycle publisher's event source "
            "mapping (it holds where failed stream batches were, not their data); a queue behind it "
            "would have nothing to catch.",
        )
        _ack(
            self.lifecycle.dead,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the webhook delivery queue: it holds the "
            "deliveries that exhausted their retries (alarmed); a queue behind it would catch nothing.",
        )
        _ack(
            self.live.failures,
            "AwsSolutions-SQS3",
            "This queue is itself the on-failure destination of the fan-out's event source mapping "
            "(it holds where failed stream batches were, not their data); a queue behind it would "
            "have nothing to catch.",
        )
        distribution = self.edge.distribution
        _ack(
            distribution,
            "AwsSolutions-CFR1",
            "A private API for its owner's clients, wherever they are: no geography to restrict.",
        )
        _ack(
            distribution,
            "AwsSolutions-CFR2",
            "No WAF by default: a web ACL costs a fixed monthly fee against the scale-to-zero "
            "design; bearer tokens and stage throttling protect the API. Attach a web ACL for "
            "public exposure at scale.",
        )
        _ack(
            distribution,
            "AwsSolutions-CFR3",
            "Standard logs need an S3 log bucket with ACLs; every request is already logged by "
            "the HTTP API access log or the stream function's log group.",
        )
        _ack(
            distribution,
            "AwsSolutions-CFR4",
            "The endpoint uses the default *.cloudfront.net certificate, whose security policy "
            "CloudFront fixes; a minimum of TLS 1.2 needs a custom domain with an ACM "
            "certificate (see docs/deploy.md).",
        )

    def _assets_bucket_name(self) -> str:
        """The CDK bootstrap assets bucket as cdk-nag names it: tokens for an environment-agnostic stack."""
        account = "<AWS::AccountId>" if cdk.Token.is_unresolved(self.account) else self.account
        region = "<AWS::Region>" if cdk.Token.is_unresolved(self.region) else self.region
        return f"cdk-{cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-{account}-{region}"

    def _acknowledge_console_findings(self) -> None:
        """The console's bucket, and CDK's BucketDeployment handler (a singleton at stack level)."""
        _ack(
            self.console.bucket,
            "AwsSolutions-S1",
            "The bucket holds only the web console's built files (HTML, scripts, styles), which CloudFront "
            "serves to every visitor anyway; CloudFront is its only reader (Origin Access Control) and its "
            "requests are logged by CloudFront's metrics; access logs would need a second bucket.",
        )
        (handler,) = [c for c in self.node.children if c.node.id.startswith(BUCKET_DEPLOYMENT_HANDLER_PREFIX)]
        bucket_id = self.get_logical_id(self.console.bucket.node.default_child)  # type: ignore[arg-type]
        _ack(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's BucketDeployment handler runs only during a deploy (aws s3 sync of console/dist) and "
            "writes its own log group with the managed basic execution role CDK gives it.",
        )
        _ack(
            handler,
            "AwsSolutions-L1",
            "The BucketDeployment handler's runtime is chosen and updated by aws-cdk-lib together with "
            "its AWS CLI layer; it runs only at deploy time and handles no request.",
        )
        for rule in (
            *(f"AwsSolutions-IAM5[Action::{a}]" for a in BUCKET_DEPLOYMENT_ACTIONS),
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{self._assets_bucket_name()}/*]",
            "AwsSolutions-IAM5[Resource::*]",
        ):
            _ack(
                handler,
                rule,
                "CDK's BucketDeployment grants: read the console's zip from the CDK assets bucket, sync "
                "it into the console bucket (s3:GetObject*, s3:GetBucket*, s3:List*, s3:DeleteObject*, "
                "s3:Abort*, on those two buckets only) and invalidate the distribution's cache "
                "(cloudfront:CreateInvalidation and GetInvalidation on Resource *).",
            )


# CDK's one handler for every BucketDeployment of the stack (id: Custom::CDKBucketDeployment<uuid><mem>MiB)
BUCKET_DEPLOYMENT_HANDLER_PREFIX = "Custom::CDKBucketDeployment"
BUCKET_DEPLOYMENT_ACTIONS = ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*")


def _ack(scope: IConstruct, rule: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def attach_nag(app: cdk.App) -> None:
    """AwsSolutions checks as a synth-time validation plugin (cdk-nag 3.x): any finding the
    stack does not acknowledge fails synth, and ``validation-report.json`` lists them.
    """
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
