"""The live channel in the template: the WebSocket API, its routes and stage, the table stream, the
fan-out's event source mapping (filter, bounded retries, failure queue) and least-privilege grants."""

from __future__ import annotations

import json
from typing import Any

from infra import constants as C
from skyloop.store import keys
from tests.infra.helpers import (
    actions,
    as_list,
    by_prefix,
    function,
    one,
    resources,
    role_statements,
    statements_with,
)

Template = dict[str, Any]


def _api(t: Template) -> tuple[str, dict[str, Any]]:
    found = {
        k: r
        for k, r in resources(t, "AWS::ApiGatewayV2::Api").items()
        if r["Properties"]["ProtocolType"] == "WEBSOCKET"
    }
    assert len(found) == 1, sorted(found)
    return next(iter(found.items()))


def _role_of(t: Template, name: str) -> str:
    return function(t, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]


def test_websocket_api_routes_connect_disconnect_and_frames_to_the_live_function(
    template_json: Template,
) -> None:
    api_id, api = _api(template_json)
    # Then client frames are routed by their "action" (anything unknown reaches $default too)
    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in resources(template_json, "AWS::ApiGatewayV2::Route").values()
        if r["Properties"]["ApiId"] == {"Ref": api_id}
    }
    assert set(routes) == {"$connect", "$disconnect", "$default"}
    live_id, _ = function(template_json, "live")
    for route in routes.values():
        integration_id = route["Target"]["Fn::Join"][1][1]["Ref"]
        integration = template_json["Resources"][integration_id]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert json.dumps({"Fn::GetAtt": [live_id, "Arn"]}) in json.dumps(integration["IntegrationUri"])
    # And API Gateway may invoke the live function for exactly these routes of this API
    permissions = [
        p["Properties"]
        for p in resources(template_json, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [live_id, "Arn"]}
    ]
    assert {p["SourceArn"]["Fn::Join"][1][-1] for p in permissions} == {
        "/*$connect",
        "/*$disconnect",
        "/*$default",
    }
    assert all({"Ref": api_id} in p["SourceArn"]["Fn::Join"][1] for p in permissions)


def test_live_stage_throttles_and_writes_access_logs(template_json: Template) -> None:
    api_id, _ = _api(template_json)
    (stage,) = [
        s["Properties"]
        for s in resources(template_json, "AWS::ApiGatewayV2::Stage").values()
        if s["Properties"]["ApiId"] == {"Ref": api_id}
    ]
    assert stage["StageName"] == C.LIVE_STAGE_NAME
    assert stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": C.LIVE_THROTTLE_BURST,
        "ThrottlingRateLimit": C.LIVE_THROTTLE_RATE_PER_S,
    }
    # a bound well under the account's default (10,000/s): one client cannot spend it all
    assert 0 < C.LIVE_THROTTLE_RATE_PER_S <= C.LIVE_THROTTLE_BURST <= 1000
    log_group = stage["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"][0]
    assert template_json["Resources"][log_group]["Properties"]["RetentionInDays"] == 30
    fields = json.loads(stage["AccessLogSettings"]["Format"])
    assert {"requestId", "routeKey", "connectionId", "status", "eventType"} <= set(fields)
    assert "body" not in stage["AccessLogSettings"]["Format"]  # frames carry tokens: never logged


def test_table_streams_new_images(template_json: Template) -> None:
    _, table = one(template_json, "AWS::DynamoDB::Table")
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


def test_fanout_consumes_the_stream_filtered_to_new_events_with_bounded_retries(
    template_json: Template,
) -> None:
    table_id, _ = one(template_json, "AWS::DynamoDB::Table")
    fanout_id, _ = function(template_json, "push_fanout")
    (mapping,) = [
        m["Properties"]
        for m in resources(template_json, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fanout_id}
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert mapping["StartingPosition"] == "LATEST"
    # Then only inserted EVENT# rows invoke it
    (pattern,) = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"sk": {"S": [{"prefix": keys.EVENT_PREFIX}]}}},
    }
    # And a failing record is retried alone and boundedly, then handed to the failure queue:
    # nothing can block the shard forever
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert 0 <= mapping["MaximumRetryAttempts"] <= 10
    assert 60 <= mapping["MaximumRecordAgeInSeconds"] <= 3600
    queue_id, queue = by_prefix(template_json, "AWS::SQS::Queue", "LiveFanoutFailures")
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}}
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    # And the stream's other consumer (lifecycle events) has a mapping of its own
    on_stream = [
        m["Properties"]["FunctionName"]
        for m in resources(template_json, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    ]
    assert sorted(on_stream, key=str) == sorted(
        [{"Ref": fanout_id}, {"Ref": function(template_json, "lifecycle_events")[0]}], key=str
    )


def _manage_connections(t: Template, name: str) -> list[dict[str, Any]]:
    return statements_with(role_statements(t, _role_of(t, name)), "execute-api:ManageConnections")


def test_only_the_live_functions_may_post_and_only_to_this_stage(template_json: Template) -> None:
    api_id, _ = _api(template_json)
    for name in ("live", "push_fanout"):
        (statement,) = _manage_connections(template_json, name)
        assert as_list(statement["Action"]) == ["execute-api:ManageConnections"]
        parts = statement["Resource"]["Fn::Join"][1]
        assert {"Ref": api_id} in parts
        assert parts[-1] == f"/{C.LIVE_STAGE_NAME}/POST/@connections/*"
    others = [
        f for f in ("api", "stream", "turn", "reconcile_turns") if _manage_connections(template_json, f)
    ]
    assert others == []


def test_only_the_stream_consumers_read_the_stream(template_json: Template) -> None:
    table_id, _ = one(template_json, "AWS::DynamoDB::Table")
    reads = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    statements = role_statements(template_json, _role_of(template_json, "push_fanout"))
    (on_stream,) = [s for s in statements if set(as_list(s["Action"])) == reads]
    assert on_stream["Resource"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    (listing,) = statements_with(statements, "dynamodb:ListStreams")
    assert as_list(listing["Action"]) == ["dynamodb:ListStreams"]  # the one action without a resource
    queue_id, _ = by_prefix(template_json, "AWS::SQS::Queue", "LiveFanoutFailures")
    (to_queue,) = statements_with(statements, "sqs:SendMessage")
    assert to_queue["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    for name in ("live", "api", "stream", "turn", "webhook_delivery"):
        granted = actions(role_statements(template_json, _role_of(template_json, name)))
        assert not granted & (reads | {"dynamodb:ListStreams"}), name


def test_functions_know_where_to_post_and_the_api_advertises_the_url(template_json: Template) -> None:
    api_id, _ = _api(template_json)
    for name in ("live", "push_fanout"):
        env = function(template_json, name)[1]["Properties"]["Environment"]["Variables"]
        endpoint = json.dumps(env["SKYLOOP_LIVE_ENDPOINT"])
        assert endpoint.startswith('{"Fn::Join"')
        assert "https://" in endpoint
        assert api_id in endpoint
        assert f"/{C.LIVE_STAGE_NAME}" in endpoint
    env = function(template_json, "api")[1]["Properties"]["Environment"]["Variables"]
    assert env["SKYLOOP_LIVE_URL"]["Fn::Join"][1][0] == "wss://"
    assert {"Ref": api_id} in env["SKYLOOP_LIVE_URL"]["Fn::Join"][1]
    assert template_json["Outputs"]["LiveUrl"]["Value"] == env["SKYLOOP_LIVE_URL"]


def test_live_access_logs_live_in_their_own_group(template_json: Template) -> None:
    _, group = by_prefix(template_json, "AWS::Logs::LogGroup", "LiveAccessLogs")
    assert group["Properties"]["RetentionInDays"] == 30


def test_alarms_on_a_lagging_fanout_and_on_batches_it_gave_up_on(template_json: Template) -> None:
    fanout_id, _ = function(template_json, "push_fanout")
    queue_id, _ = by_prefix(template_json, "AWS::SQS::Queue", "LiveFanoutFailures")
    alarms = [a["Properties"] for a in resources(template_json, "AWS::CloudWatch::Alarm").values()]
    (lag,) = [
        a
        for a in alarms
        if a["MetricName"] == "IteratorAge" and a["Dimensions"][0]["Value"] == {"Ref": fanout_id}
    ]
    assert lag["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": fanout_id}}]
    assert lag["Statistic"] == "Maximum"
    assert lag["Threshold"] == C.FANOUT_ITERATOR_AGE_MS
    (gave_up,) = [
        a
        for a in alarms
        if a["MetricName"] == "ApproximateNumberOfMessagesVisible"
        and a["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    ]
    assert gave_up["Threshold"] == 1
