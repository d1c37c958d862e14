"""Lifecycle events in the template: the bus, the publisher's stream mapping (filter, long retries, failure
queue), the FIFO delivery queue with its dead-letter queue, and who may do what with them."""

from __future__ import annotations

import json
from typing import Any

from infra import constants as C
from infra.constructs.lifecycle import LIFECYCLE_EVENT_TYPES
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


def _role_of(t: Template, name: str) -> str:
    return function(t, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]


def _mapping(t: Template, name: str) -> dict[str, Any]:
    fn_id, _ = function(t, name)
    (mapping,) = [
        m["Properties"]
        for m in resources(t, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    return mapping


def test_the_stack_has_its_own_bus_named_in_the_outputs(template_json: Template) -> None:
    bus_id, bus = one(template_json, "AWS::Events::EventBus")
    assert json.dumps(bus["Properties"]["Name"]).find("lifecycle") > 0
    assert template_json["Outputs"]["EventBusName"]["Value"] == {"Ref": bus_id}
    assert template_json["Outputs"]["EventBusArn"]["Value"] == {"Fn::GetAtt": [bus_id, "Arn"]}
    # And only the publisher may put events on it, only on it
    for spec_name in ("lifecycle_events", "api", "turn", "webhook_delivery", "push_fanout"):
        statements = statements_with(
            role_statements(template_json, _role_of(template_json, spec_name)), "events:PutEvents"
        )
        if spec_name == "lifecycle_events":
            (put,) = statements
            assert put["Resource"] == {"Fn::GetAtt": [bus_id, "Arn"]}
        else:
            assert statements == [], spec_name
    env = function(template_json, "lifecycle_events")[1]["Properties"]["Environment"]["Variables"]
    assert env["SKYLOOP_EVENT_BUS"] == {"Ref": bus_id}


def test_the_publisher_reads_the_stream_filtered_and_retries_for_the_streams_whole_retention(
    template_json: Template,
) -> None:
    table_id, _ = one(template_json, "AWS::DynamoDB::Table")
    mapping = _mapping(template_json, "lifecycle_events")
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    # Then new events of the types lifecycle events come from, and new session rows, invoke it
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [
        {
            "eventName": ["INSERT"],
            "dynamodb": {
                "Keys": {"sk": {"S": [{"prefix": keys.EVENT_PREFIX}]}},
                "NewImage": {"type": {"S": list(LIFECYCLE_EVENT_TYPES)}},
            },
        },
        {
            "eventName": ["INSERT"],
            "dynamodb": {"Keys": {"pk": {"S": [{"prefix": keys.SESSION_PREFIX}]}, "sk": {"S": [keys.META]}}},
        },
    ]
    # every log event a run of calls is made of passes, so a run is never cut by the filter
    assert {"response.output_item.done", "response.elicitation_request"} <= set(LIFECYCLE_EVENT_TYPES)
    # And a state change is not dropped: failing records are bisected and retried for a day
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == C.LIFECYCLE_RETRY_ATTEMPTS >= 100
    assert mapping["MaximumRecordAgeInSeconds"] == 24 * 3600
    assert mapping["MaximumBatchingWindowInSeconds"] == 0  # latency: action_required within a second
    failures_id, _ = by_prefix(template_json, "AWS::SQS::Queue", "LifecyclePublisherFailures")
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [failures_id, "Arn"]}}
    }


def test_deliveries_run_from_a_fifo_queue_with_a_dead_letter_queue(template_json: Template) -> None:
    queue_id, queue = by_prefix(template_json, "AWS::SQS::Queue", "LifecycleDeliveries")
    dead_id, dead = by_prefix(template_json, "AWS::SQS::Queue", "LifecycleDeadDeliveries")
    props = queue["Properties"]
    assert props["FifoQueue"] is True
    assert dead["Properties"]["FifoQueue"] is True
    assert props["SqsManagedSseEnabled"] is True
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dead_id, "Arn"]},
        "maxReceiveCount": C.WEBHOOK_MAX_RECEIVES,
    }
    # the schedule's attempts fit in the queue's retention, each delay in SQS's 12-hour visibility limit
    from skyloop.settings import Settings

    schedule = Settings().retry_schedule
    assert props["MessageRetentionPeriod"] > sum(schedule) * 1.1
    assert max(schedule) * 1.1 <= 12 * 3600
    assert sum(schedule) * 0.9 >= 24 * 3600  # retried for at least a day, jitter included
    assert len(schedule) + 1 < C.WEBHOOK_MAX_RECEIVES
    delivery = function(template_json, "webhook_delivery")[1]["Properties"]
    assert props["VisibilityTimeout"] >= delivery["Timeout"]
    # Then the delivery function reads it one message at a time and reports failures per message
    mapping = _mapping(template_json, "webhook_delivery")
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert mapping["BatchSize"] == 1
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    env = delivery["Environment"]["Variables"]
    assert env["SKYLOOP_WEBHOOK_QUEUE_URL"] == {"Ref": queue_id}
    assert env["SKYLOOP_WEBHOOK_DLQ_URL"] == {"Ref": dead_id}


def test_only_the_publisher_and_the_api_enqueue_and_only_delivery_consumes(template_json: Template) -> None:
    queue_id, _ = by_prefix(template_json, "AWS::SQS::Queue", "LifecycleDeliveries")
    dead_id, _ = by_prefix(template_json, "AWS::SQS::Queue", "LifecycleDeadDeliveries")
    queue_arn, dead_arn = {"Fn::GetAtt": [queue_id, "Arn"]}, {"Fn::GetAtt": [dead_id, "Arn"]}
    for spec in ("api", "lifecycle_events", "webhook_delivery", "turn", "stream", "live", "push_fanout"):
        statements = [
            s
            for s in role_statements(template_json, _role_of(template_json, spec))
            if any(a.startswith("sqs:") for a in as_list(s["Action"]))
        ]
        on_queue = {a for s in statements if s["Resource"] == queue_arn for a in as_list(s["Action"])}
        on_dead = {a for s in statements if s["Resource"] == dead_arn for a in as_list(s["Action"])}
        if spec in ("api", "lifecycle_events"):
            assert on_queue == {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, spec
        elif spec == "webhook_delivery":
            assert "sqs:SendMessage" not in on_queue
            assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= on_queue
            assert "sqs:SendMessage" in on_dead
        else:
            assert not on_queue, spec
            assert not on_dead, spec
    for spec in ("api", "lifecycle_events", "webhook_delivery"):
        assert not {"sqs:*", "events:*"} & actions(
            role_statements(template_json, _role_of(template_json, spec))
        )


def test_alarms_on_lag_on_batches_given_up_and_on_dead_deliveries(template_json: Template) -> None:
    publisher_id, _ = function(template_json, "lifecycle_events")
    alarms = [a["Properties"] for a in resources(template_json, "AWS::CloudWatch::Alarm").values()]
    (lag,) = [
        a
        for a in alarms
        if a["MetricName"] == "IteratorAge" and a["Dimensions"][0]["Value"] == {"Ref": publisher_id}
    ]
    assert lag["Threshold"] == C.LIFECYCLE_ITERATOR_AGE_MS
    for prefix in ("LifecyclePublisherFailures", "LifecycleDeadDeliveries"):
        queue_id, _ = by_prefix(template_json, "AWS::SQS::Queue", prefix)
        (alarm,) = [
            a
            for a in alarms
            if a["MetricName"] == "ApproximateNumberOfMessagesVisible"
            and a["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
        ]
        assert alarm["Threshold"] == 1
