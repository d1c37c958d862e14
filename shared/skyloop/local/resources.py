"""Create the stack's resources on moto from the same manifest, schema and ASL the cloud uses."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from skyloop import manifest
from skyloop.local.lambda_hook import FUNCTION_PREFIX
from skyloop.store.schema import create_table_kwargs

STATE_MACHINE_NAME = "skyloop-turn"
_EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18  # moto stores code but the hook runs the handler files


class LocalResources(BaseModel):
    table_name: str
    blob_bucket: str
    state_machine_arn: str
    function_arns: dict[str, str]


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
                        "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    clients("dynamodb").create_table(**create_table_kwargs(table_name))
    blob_bucket = f"{table_name}-blobs"
    clients("s3").create_bucket(Bucket=blob_bucket)
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
    return LocalResources(
        table_name=table_name, blob_bucket=blob_bucket, state_machine_arn=machine, function_arns=arns
    )
