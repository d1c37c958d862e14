"""``skyloop events tail``: lifecycle events from the EventBridge bus, printed as they happen.

EventBridge pushes to targets; nothing reads a bus directly. So the tail
makes what a user's own rule would: a rule on the bus matching
``source: skyloop`` (and the given detail-types) with a temporary SQS queue
as its target, reads the queue with long polls, and removes the rule and the
queue when it ends (Ctrl-C, ``--count``, ``--timeout``). The same against the
cloud (your AWS credentials; the stack output ``EventBusName``) and against
``skyloop dev`` (``--endpoint-url`` = its moto endpoint, bus ``skyloop-local``).
One JSON event per line (the ``detail``: the event exactly as webhooks post it).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any, TextIO

from skyloop.webhooks.publisher import SOURCE


def tail(
    *,
    bus: str,
    endpoint_url: str | None = None,
    region: str | None = None,
    types: list[str] | None = None,
    count: int = 0,
    timeout_s: float = 0,
    out: TextIO | None = None,
) -> int:
    import boto3

    out = out or sys.stdout
    events = boto3.client("events", endpoint_url=endpoint_url, region_name=region)
    sqs = boto3.client("sqs", endpoint_url=endpoint_url, region_name=region)
    name = f"skyloop-tail-{uuid.uuid4().hex[:12]}"
    pattern: dict[str, Any] = {"source": [SOURCE]}
    if types:
        pattern["detail-type"] = list(types)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule_arn = ""
    try:
        rule_arn = events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))["RuleArn"]
        sqs.set_queue_attributes(
            QueueUrl=queue_url, Attributes={"Policy": json.dumps(_policy(queue_arn, rule_arn))}
        )
        events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "tail", "Arn": queue_arn}])
        print(f"tailing {bus} (rule {name}); Ctrl-C to stop", file=sys.stderr, flush=True)
        return _read(sqs, queue_url, out, count=count, timeout_s=timeout_s)
    except KeyboardInterrupt:
        return 0
    finally:
        if rule_arn:
            events.remove_targets(Rule=name, EventBusName=bus, Ids=["tail"])
            events.delete_rule(Name=name, EventBusName=bus)
        sqs.delete_queue(QueueUrl=queue_url)


def _read(sqs: Any, queue_url: str, out: TextIO, *, count: int, timeout_s: float) -> int:
    seen = 0
    deadline = time.monotonic() + timeout_s if timeout_s else None
    while deadline is None or time.monotonic() < deadline:
        wait = 5 if deadline is None else max(0, min(5, int(deadline - time.monotonic())))
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait)
        for message in got.get("Messages", []):
            envelope = json.loads(message["Body"])
            out.write(json.dumps(envelope.get("detail", envelope), separators=(",", ":")) + "\n")
            out.flush()
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            seen += 1
            if count and seen >= count:
                return 0
    return 0


def _policy(queue_arn: str, rule_arn: str) -> dict[str, Any]:
    """EventBridge may send this one rule's events to the queue, nothing else may."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
            }
        ],
    }
