"""Create the stack's resources on moto from the same manifest, schema and ASL the cloud uses."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import BaseModel

from skyloop import manifest
from skyloop.local.lambda_hook import FUNCTION_PREFIX
from skyloop.store.schema import create_table_kwargs

STATE_MACHINE_NAME = "skyloop-turn"
SCHEDULE_GROUP = "skyloop-local"  # scheduled tasks' schedules (EventBridge Scheduler on moto)
_EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18  # moto stores code but the hook runs the handler files


class LocalResources(BaseModel):
    table_name: str
    blob_bucket: str
    state_machine_arn: str
    function_arns: dict[str, str]
    schedule_group: str = SCHEDULE_GROUP
    schedule_role_arn: str = ""
    schedule_dlq_arn: str = ""

    def environment(self) -> dict[str, str]:
        """What the stack's functions read to reach these resources (as the CDK stack sets them)."""
        return {
            "SKYLOOP_STATE_MACHINE_ARN": self.state_machine_arn,
            "SKYLOOP_BLOB_BUCKET": self.blob_bucket,
            "SKYLOOP_SCHEDULE_GROUP": self.schedule_group,
            "SKYLOOP_SCHEDULE_ROLE_ARN": self.schedule_role_arn,
            "SKYLOOP_SCHEDULE_TARGET_ARN": self.function_arns.get("schedule_run", ""),
            "SKYLOOP_SCHEDULE_DLQ_ARN": self.schedule_dlq_arn,
        }


class SchemaError(Exception):
    """The table loaded from a data directory cannot serve this version's schema; the message says why."""


def ensure_table(dynamodb: Any, table_name: str) -> None:
    """Create the table, or bring one loaded from a data directory up to this version's schema.

    A table from an older version may lack an index added since: it is added
    (moto builds it from the items at once). Keys cannot change in place, so a
    table with other keys is refused with a message.
    """
    wanted = create_table_kwargs(table_name)
    try:
        dynamodb.create_table(**wanted)
        return
    except dynamodb.exceptions.ResourceInUseException:
        pass
    table = dynamodb.describe_table(TableName=table_name)["Table"]
    if table["KeySchema"] != wanted["KeySchema"]:
        from skyloop.local.persistence import DataDirError

        raise DataDirError(
            f"the data directory's table {table_name} has keys {table['KeySchema']}, this version needs "
            f"{wanted['KeySchema']}; it cannot be converted: start with --reset to discard it, or "
            "--data-dir PATH for another directory"
        )
    have = {index["IndexName"] for index in table.get("GlobalSecondaryIndexes") or []}
    for index in wanted["GlobalSecondaryIndexes"]:
        if index["IndexName"] in have:
            continue
        dynamodb.update_table(
            TableName=table_name,
            AttributeDefinitions=wanted["AttributeDefinitions"],
            GlobalSecondaryIndexUpdates=[{"Create": index}],
        )


def bootstrap(
    clients: Any,
    *,
    table_name: str,
    environment: dict[str, str],
    lambda_tools: list[str] | None = None,
    event_bus: str | None = None,
) -> LocalResources:
    """``clients(service)`` returns a boto3 client bound to moto; ``lambda_tools`` are the user's tool functions;
    ``event_bus`` is the EventBridge bus lifecycle events go to (moto's, as the stack's own bus in the cloud)."""
    iam = clients("iam")
    role = iam.create_role(
        RoleName="skyloop-local",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {
                            "Service": [
                                "lambda.amazonaws.com",
                                "states.amazonaws.com",
                                "scheduler.amazonaws.com",
                            ]
                        },
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    ensure_table(clients("dynamodb"), table_name)
    blob_bucket = f"{table_name}-blobs"
    s3 = clients("s3")
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):  # loaded from the data directory
        s3.create_bucket(Bucket=blob_bucket)
    if event_bus:
        clients("events").create_event_bus(Name=event_bus)
    lam = clients("lambda")
    arns: dict[str, str] = {}
    for fn in manifest.FUNCTIONS:
        if not fn.local:
            continue  # moto cannot serve function URLs (the gateway mounts the ASGI app); live: in-process
        arns[fn.name] = lam.create_function(
            FunctionName=FUNCTION_PREFIX + fn.name,
            Runtime="python3.12",
            Role=role,
            Handler=fn.handler,
            Code={"ZipFile": _EMPTY_ZIP},
            Timeout=fn.timeout_s,
            MemorySize=fn.memory_mb,
            Environment={"Variables": environment},
        )["FunctionArn"]
    for name in lambda_tools or []:
        if name in manifest.NAMES:
            raise ValueError(f"a Lambda tool may not be named like a skyloop function: {name}")
        lam.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler=f"{name}.handler",
            Code={"ZipFile": _EMPTY_ZIP},
            Timeout=900,  # the tool's own timeout_s is enforced by the state machine
            MemorySize=256,
        )
    machine = clients("stepfunctions").create_state_machine(
        name=STATE_MACHINE_NAME,
        definition=manifest.render_asl(arns),
        roleArn=role,
        type="STANDARD",
    )["stateMachineArn"]
    clients("scheduler").create_schedule_group(Name=SCHEDULE_GROUP)
    dlq = clients("sqs").create_queue(QueueName=f"{table_name}-schedule-dlq")["QueueUrl"]
    dlq_arn = clients("sqs").get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return LocalResources(
        table_name=table_name,
        blob_bucket=blob_bucket,
        state_machine_arn=machine,
        function_arns=arns,
        schedule_role_arn=role,
        schedule_dlq_arn=dlq_arn,
    )
