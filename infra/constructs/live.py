"""Live channel: an API Gateway WebSocket API for the SDK and the console, and the table stream's fan-out.

An open SSE stream holds a Lambda function for its whole life; a WebSocket
held by API Gateway is billed by connection minutes and messages only, so an
idle viewer costs almost nothing (docs/architecture.md, "The live channel").

* the WebSocket API routes ``$connect``, ``$disconnect`` and ``$default``
  (every client frame) to the ``live`` function; one ``live`` stage, throttled,
  with JSON access logs;
* the table's stream (``NEW_IMAGE``) feeds the ``push_fanout`` function through
  an event source mapping that passes only inserted ``EVENT#`` rows, reports
  partial batch failures, bisects failing batches, retries a bounded number of
  times and then parks the batch's description in a queue: nothing can block
  the shard for long. Other consumers of the stream (lifecycle publishing) get
  mappings of their own.
* both functions may post only to this API's stage (``execute-api:ManageConnections``
  on ``<api>/live/POST/@connections/*``); the fan-out reads the stream, the
  live function nothing of it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as C
from infra.constructs._common import new_log_group
from skyloop.store import keys

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_logs as logs

    from infra.config import StackConfig

# One JSON line per WebSocket request ($connect, each frame, $disconnect); never the frame's body.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "eventType": "$context.eventType",
        "routeKey": "$context.routeKey",
        "connectionId": "$context.connectionId",
        "status": "$context.status",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
    }
)

# The event source filter: only new events reach the fan-out (no invocation for other rows).
FANOUT_FILTER = {
    "eventName": lambda_.FilterRule.is_equal("INSERT"),
    "dynamodb": {"Keys": {keys.SK: {"S": lambda_.FilterRule.begins_with(keys.EVENT_PREFIX)}}},
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT)


class LiveChannel(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        live: lambda_.Function,
        fanout: lambda_.Function,
        table: dynamodb.ITable,
        config: StackConfig,
    ) -> None:
        super().__init__(scope, construct_id)

        def route(name: str) -> apigwv2.WebSocketRouteOptions:
            return apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration(name, live)
            )

        self.api = apigwv2.WebSocketApi(
            self,
            "Api",
            api_name=f"{cdk.Stack.of(self).stack_name}-live",
            description="skyloop live channel: session events pushed over WebSockets (skyloop.live)",
            route_selection_expression="$request.body.action",
            connect_route_options=route("Connect"),
            disconnect_route_options=route("Disconnect"),
            default_route_options=route("Frames"),
        )
        self.access_logs = new_log_group(self, "AccessLogs", config)
        self.stage = apigwv2.WebSocketStage(
            self,
            "Stage",
            web_socket_api=self.api,
            stage_name=C.LIVE_STAGE_NAME,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=C.LIVE_THROTTLE_RATE_PER_S, burst_limit=C.LIVE_THROTTLE_BURST
            ),
            access_log_settings=_AccessLogs(self.access_logs),
        )
        for fn in (live, fanout):
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["execute-api:ManageConnections"], resources=[self.connections_arn]
                )
            )
            fn.add_environment("SKYLOOP_LIVE_ENDPOINT", self.stage.callback_url)

        # Where the fan-out's failed batches go after the retries (the records' coordinates, not
        # their data): the events stay in the log, and the clients' gap rule replays them.
        self.failures = sqs.Queue(
            self,
            "FanoutFailures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        fanout.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=C.FANOUT_BATCH_SIZE,
                max_batching_window=cdk.Duration.seconds(0),  # latency: a delta reaches viewers at once
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=C.FANOUT_RETRY_ATTEMPTS,
                max_record_age=cdk.Duration.seconds(C.FANOUT_MAX_RECORD_AGE_S),
                parallelization_factor=C.FANOUT_PARALLELIZATION,
                on_failure=sources.SqsDlq(self.failures),
                filters=[lambda_.FilterCriteria.filter(FANOUT_FILTER)],
            )
        )

    @property
    def connections_arn(self) -> str:
        """``PostToConnection`` on this stage's connections, nothing else of any API."""
        # pseudo parameters, not the stack's env: the same ARN (and cdk-nag finding) in every account
        return (
            f"arn:{cdk.Aws.PARTITION}:execute-api:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:"
            f"{self.api.api_id}/{C.LIVE_STAGE_NAME}/POST/@connections/*"
        )

    @property
    def url(self) -> str:
        """``wss://<api>.execute-api.<region>.amazonaws.com/live``: what clients connect to."""
        return self.stage.url
