"""The skyloop stack: composes one construct per concern and attaches cdk-nag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk

from infra.config import StackConfig
from infra.constructs.edge import Edge
from infra.constructs.functions import Functions
from infra.constructs.http_api import HttpApi
from infra.constructs.monitoring import Monitoring
from infra.constructs.stream import Stream
from infra.constructs.table import SessionTable
from infra.constructs.turn_machine import TurnMachine
from skyloop.manifest import FUNCTIONS

if TYPE_CHECKING:
    from constructs import Construct


class SkyloopStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = StackConfig.from_context(self.node)
        self.config = config

        self.data = SessionTable(self, "Data", config=config)
        self.functions = Functions(self, "Functions", table=self.data.table, config=config)
        self.turns = TurnMachine(self, "Turns", functions=self.functions, config=config)
        self.api = HttpApi(self, "Api", handler=self.functions["api"], config=config)
        streaming = next(f for f in FUNCTIONS if f.streaming)
        self.stream = Stream(self, "Stream", function=self.functions[streaming.name], config=config)
        self.edge = Edge(self, "Edge", api_domain_name=self.api.domain_name, stream_url=self.stream.url)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            functions=self.functions.by_name,
            machine=self.turns.machine,
            api=self.api.api,
            table=self.data.table,
            distribution=self.edge.distribution,
            config=config,
        )

        cdk.CfnOutput(self, "EndpointUrl", value=self.edge.endpoint_url, description="The one HTTPS endpoint")
        cdk.CfnOutput(self, "TableName", value=self.data.table.table_name)
        cdk.CfnOutput(self, "StateMachineArn", value=self.turns.machine.state_machine_arn)
        cdk.CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)

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
            "xray:PutTelemetryRecords support no resource-level permissions.",
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
        _ack(
            self.functions,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the dependency layer holds compiled wheels "
            "(pydantic-core) built for exactly this ABI by layers/build.py. Move "
            "infra.constants.LAMBDA_PYTHON_VERSION and the runtime together.",
        )
        _ack(
            self.api.api,
            "AwsSolutions-APIG4",
            "Authorization is done in the functions, not by the gateway: every route needs "
            "'Authorization: Bearer <token>' checked against token hashes in the table "
            "(SKYLOOP_REQUIRE_TOKEN=true), the same check the stream function makes; a gateway "
            "authorizer would add a Lambda invocation per request and could not cover the stream.",
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


def _ack(scope: Construct, rule: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def attach_nag(app: cdk.App) -> None:
    """AwsSolutions checks as a synth-time validation plugin (cdk-nag 3.x): any finding the
    stack does not acknowledge fails synth, and ``validation-report.json`` lists them.
    """
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
