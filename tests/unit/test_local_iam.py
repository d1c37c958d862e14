"""The local stack's IAM check (:mod:`skyloop.local.iam`): what a call asks, and what a policy answers.

Each case runs the check as botocore runs it (a real boto3 client, the
``before-parameter-build`` hook) against the exported policies or a planted
document; nothing reaches AWS or moto: a call the policy allows stops at a stub
transport, a refused one never gets there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
import pytest

from skyloop import function_identity
from skyloop.local import iam

if TYPE_CHECKING:
    from collections.abc import Iterator

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = "skyloop-unit"
BUCKET = "skyloop-unit-blobs"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:skyloop-turn"
SCHEDULE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/skyloop-local"
ENV = {
    "SKYLOOP_TABLE_NAME": TABLE,
    "SKYLOOP_BLOB_BUCKET": BUCKET,
    "SKYLOOP_STATE_MACHINE_ARN": MACHINE,
    "SKYLOOP_SCHEDULE_GROUP": "skyloop-local",
    "SKYLOOP_SCHEDULE_ROLE_ARN": SCHEDULE_ROLE,
    "SKYLOOP_EVENT_BUS": "skyloop-local",
    "SKYLOOP_CODE_INTERPRETER_ID": "Skyloop_sandbox-abcdefghij",
    "SKYLOOP_CODE_INTERPRETER_PUBLIC_ID": "Skyloop_public-klmnopqrst",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    for key in (
        "SKYLOOP_SECRETS_PREFIX",
        "SKYLOOP_TOOL_SECRETS_PREFIX",
        iam.POLICIES_ENV,
        iam.ENV_SWITCH,
        iam.CONTEXT_ENV,
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(iam, "_cdk_json", lambda: Path("/nonexistent/cdk.json"))  # not the developer's
    iam.install()
    yield
    iam.uninstall()
    iam.forget()


def _client(service: str) -> Any:
    return boto3.session.Session(region_name=REGION).client(service)


def _answered(**_: Any) -> tuple[Any, dict[str, Any]]:
    """An allowed call is answered here, before botocore sends anything."""
    from botocore.awsrequest import AWSResponse

    return AWSResponse("https://stub", 200, {}, None), {}


def _call(function: str | None, service: str, operation: str, params: dict[str, Any]) -> None:
    """Make the call as ``function``; an allowed call is answered by a stub (nothing is sent)."""
    client = _client(service)
    client.meta.events.register("before-call", _answered)
    with function_identity.acting_as(function):
        getattr(client, operation)(**params)


def _refused(function: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        _call(function, service, operation, params)
    return raised.value.response


def _key() -> dict[str, Any]:
    return {"pk": {"S": "SESSION#x"}, "sk": {"S": "META"}}


# ------------------------------------------------------------------------------ the deployed policies
def test_a_call_the_role_allows_goes_through() -> None:
    _call("lifecycle_events", "dynamodb", "get_item", {"TableName": TABLE, "Key": _key()})
    _call("lifecycle_events", "dynamodb", "update_item", {"TableName": TABLE, "Key": _key()})


def test_a_call_the_role_does_not_allow_is_refused_with_awss_shape() -> None:
    response = _refused("stream", "dynamodb", "put_item", {"TableName": TABLE, "Item": _key()})
    error = response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Message"] == (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/{iam.policies()['functions']['stream']['role']}/skyloop-stream "
        f"is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:{REGION}:{ACCOUNT}:"
        f"table/{TABLE} because no identity-based policy allows the dynamodb:PutItem action"
    )


def test_a_call_as_nobody_or_as_a_users_tool_is_not_checked() -> None:
    _call(None, "dynamodb", "delete_table", {"TableName": TABLE})  # the stack's own setup
    _call("my_tool", "dynamodb", "delete_table", {"TableName": TABLE})  # a Lambda tool's role is the user's


def test_the_switch_turns_the_check_off(monkeypatch: pytest.MonkeyPatch) -> None:
    iam.uninstall()
    monkeypatch.setenv(iam.ENV_SWITCH, "off")
    iam.install()
    _call("stream", "dynamodb", "put_item", {"TableName": TABLE, "Item": _key()})


def test_a_planted_missing_permission_is_refused(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the export with lifecycle_events' UpdateItem taken out (its grant before this was fixed)
    document = copy.deepcopy(iam.policies())
    for statement in document["functions"]["lifecycle_events"]["statements"]:
        if isinstance(statement["Action"], list) and "dynamodb:UpdateItem" in statement["Action"]:
            statement["Action"].remove("dynamodb:UpdateItem")
    planted = tmp_path / "policies.json"
    planted.write_text(json.dumps(document))
    monkeypatch.setenv(iam.POLICIES_ENV, str(planted))
    # Then the publisher's mark_queued is refused, and what it still has goes through
    response = _refused("lifecycle_events", "dynamodb", "update_item", {"TableName": TABLE, "Key": _key()})
    assert "dynamodb:UpdateItem" in response["Error"]["Message"]
    _call("lifecycle_events", "dynamodb", "put_item", {"TableName": TABLE, "Item": _key()})


def test_an_index_must_be_granted_by_name() -> None:
    by_owner = {"TableName": TABLE, "IndexName": "by_owner", "KeyConditionExpression": "a = :a"}
    _call("lifecycle_events", "dynamodb", "query", by_owner)
    response = _refused(
        "lifecycle_events", "dynamodb", "query", {**by_owner, "IndexName": "running_sessions"}
    )
    assert f"table/{TABLE}/index/running_sessions" in response["Error"]["Message"]
    _call("reconcile_turns", "dynamodb", "query", {**by_owner, "IndexName": "running_sessions"})


def test_each_item_of_a_transaction_is_its_own_action() -> None:
    put = {"Put": {"TableName": TABLE, "Item": _key()}}
    delete = {"Delete": {"TableName": TABLE, "Key": _key()}}
    _call("turn", "dynamodb", "transact_write_items", {"TransactItems": [put]})
    response = _refused("turn", "dynamodb", "transact_write_items", {"TransactItems": [put, delete]})
    assert "dynamodb:DeleteItem" in response["Error"]["Message"]  # turn steps never delete
    _call("api", "dynamodb", "transact_write_items", {"TransactItems": [put, delete]})


def test_another_table_is_refused() -> None:
    response = _refused("api", "dynamodb", "get_item", {"TableName": "someone-elses", "Key": _key()})
    assert "table/someone-elses" in response["Error"]["Message"]


def test_s3_keys_are_checked_by_prefix_and_listing_by_s3_prefix() -> None:
    _call("stream", "s3", "get_object", {"Bucket": BUCKET, "Key": "sessions/x/blob"})
    response = _refused("stream", "s3", "get_object", {"Bucket": BUCKET, "Key": "webhooks/x"})
    assert response["Error"]["Code"] == "AccessDenied"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 403
    _call("api", "s3", "list_objects_v2", {"Bucket": BUCKET, "Prefix": "sessions/x/"})
    _refused("api", "s3", "list_objects_v2", {"Bucket": BUCKET, "Prefix": "agents/"})  # s3:prefix condition
    _refused("api", "s3", "list_objects_v2", {"Bucket": BUCKET})  # no prefix: the condition's key is absent
    # a batch delete is one s3:DeleteObject per key
    one = {"Objects": [{"Key": "sessions/x/a"}]}
    _call("api", "s3", "delete_objects", {"Bucket": BUCKET, "Delete": one})
    two = {"Objects": [{"Key": "sessions/x/a"}, {"Key": "elsewhere/b"}]}
    assert (
        "elsewhere/b"
        in _refused("api", "s3", "delete_objects", {"Bucket": BUCKET, "Delete": two})["Error"]["Message"]
    )


def test_a_schedule_passes_its_role_only_to_the_scheduler() -> None:
    params = {
        "Name": "task-1",
        "GroupName": "skyloop-local",
        "ScheduleExpression": "rate(1 hour)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:skyloop-schedule_run",
            "RoleArn": SCHEDULE_ROLE,
        },
    }
    _call("api", "scheduler", "create_schedule", params)
    # another group is not the stack's
    _refused("api", "scheduler", "create_schedule", {**params, "GroupName": "default"})
    # another role may not be passed
    other = {**params, "Target": {**params["Target"], "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/admin"}}
    assert "iam:PassRole" in _refused("api", "scheduler", "create_schedule", other)["Error"]["Message"]


def test_passed_to_service_is_the_condition_it_says() -> None:
    policy = iam.policy_for("api", REGION)
    assert policy is not None
    allowed = iam.Request("iam:PassRole", SCHEDULE_ROLE, {"iam:PassedToService": "scheduler.amazonaws.com"})
    assert policy.allows(allowed)
    assert not policy.allows(
        iam.Request("iam:PassRole", SCHEDULE_ROLE, {"iam:PassedToService": "ec2.amazonaws.com"})
    )
    assert not policy.allows(iam.Request("iam:PassRole", SCHEDULE_ROLE))


def test_functions_and_state_machines_by_arn() -> None:
    _call("api", "lambda", "invoke", {"FunctionName": "skyloop-turn"})  # its prewarm target
    _refused("api", "lambda", "invoke", {"FunctionName": "skyloop-run_tool"})
    _call(
        "stream",
        "lambda",
        "invoke",
        {"FunctionName": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:skyloop-api"},
    )
    _call("api", "stepfunctions", "start_execution", {"stateMachineArn": MACHINE})
    _refused("turn", "stepfunctions", "start_execution", {"stateMachineArn": MACHINE})
    execution = MACHINE.replace(":stateMachine:", ":execution:") + ":resp_1"
    _call("reconcile_turns", "stepfunctions", "describe_execution", {"executionArn": execution})
    other = execution.replace("skyloop-turn", "other-machine")
    _refused("reconcile_turns", "stepfunctions", "describe_execution", {"executionArn": other})
    _call("turn", "stepfunctions", "send_task_success", {"taskToken": "t", "output": "{}"})
    _refused("stream", "stepfunctions", "send_task_success", {"taskToken": "t", "output": "{}"})


def test_secrets_under_their_prefixes() -> None:
    _call("turn", "secretsmanager", "get_secret_value", {"SecretId": "skyloop/agents/abc/api_key"})
    _call("turn", "secretsmanager", "get_secret_value", {"SecretId": "skyloop/tools/me/key"})
    _call("run_tool", "secretsmanager", "get_secret_value", {"SecretId": "skyloop/tools/me/key"})
    _refused("run_tool", "secretsmanager", "get_secret_value", {"SecretId": "skyloop/agents/abc/api_key"})
    _refused("turn", "secretsmanager", "get_secret_value", {"SecretId": "prod/database"})
    _call(
        "api", "secretsmanager", "create_secret", {"Name": "skyloop/agents/abc/api_key", "SecretString": "k"}
    )


def test_a_changed_environment_is_resolved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    _call("api", "dynamodb", "get_item", {"TableName": TABLE, "Key": _key()})
    monkeypatch.setenv("SKYLOOP_TABLE_NAME", "another-table")  # a test's fresh table
    _call("api", "dynamodb", "get_item", {"TableName": "another-table", "Key": _key()})
    _refused("api", "dynamodb", "get_item", {"TableName": TABLE, "Key": _key()})


def test_services_outside_the_local_stack_are_not_checked() -> None:
    _call("stream", "bedrock", "list_foundation_models", {})


# ------------------------------------------------------------------------------ model calls (Bedrock)
FOUNDATION = "anthropic.claude-3-5-haiku-20241022-v1:0"
PROFILE = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
DEPLOY_ACCOUNT = "111122223333"  # the developer's, in their cdk.json's ARNs (not moto's)
GRANTED = [
    f"arn:aws:bedrock:{REGION}::foundation-model/{FOUNDATION}",
    f"arn:aws:bedrock:{REGION}:{DEPLOY_ACCOUNT}:inference-profile/{PROFILE}",
]


def _converse(model: str) -> dict[str, Any]:
    return {"modelId": model, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_a_model_call_without_the_deploy_contexts_grant_is_refused_as_aws_would() -> None:
    # Given no bedrockModelArns (the stack then grants the turn no model): the call fails on AWS, so here
    response = _refused("turn", "bedrock-runtime", "converse_stream", _converse(FOUNDATION))
    assert response["Error"]["Code"] == "AccessDeniedException"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 403  # bedrock-runtime's model
    assert (
        f"bedrock:InvokeModelWithResponseStream on resource: arn:aws:bedrock:{REGION}::foundation-model/"
        f"{FOUNDATION}" in response["Error"]["Message"]
    )


def test_the_turn_may_call_the_models_the_deploy_context_grants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(iam.CONTEXT_ENV, json.dumps({"bedrockModelArns": GRANTED}))
    _call("turn", "bedrock-runtime", "converse_stream", _converse(FOUNDATION))
    _call("turn", "bedrock-runtime", "converse", _converse(FOUNDATION))
    _call("turn", "bedrock-runtime", "converse_stream", _converse(PROFILE))  # by id: the deploy's account
    _call("turn", "bedrock-runtime", "converse_stream", _converse(GRANTED[1]))  # by ARN
    # another model, a profile in another account, another function: refused
    _refused("turn", "bedrock-runtime", "converse_stream", _converse("amazon.nova-pro-v1:0"))
    other = GRANTED[1].replace(DEPLOY_ACCOUNT, "444455556666")
    _refused("turn", "bedrock-runtime", "converse_stream", _converse(other))
    _refused("api", "bedrock-runtime", "converse_stream", _converse(FOUNDATION))


def test_the_grant_is_read_from_cdk_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"app": "x", "context": {"bedrockModelArns": ",".join(GRANTED)}}))
    monkeypatch.setattr(iam, "_cdk_json", lambda: cdk_json)
    iam.forget()
    _call("turn", "bedrock-runtime", "converse_stream", _converse(PROFILE))
    # and the environment's context wins over it, as -c does over cdk.json
    monkeypatch.setenv(iam.CONTEXT_ENV, json.dumps({"bedrockModelArns": []}))
    _refused("turn", "bedrock-runtime", "converse_stream", _converse(PROFILE))


def test_a_model_call_to_a_mock_endpoint_is_no_iam_call() -> None:
    client = boto3.session.Session(region_name=REGION).client(
        "bedrock-runtime", endpoint_url="http://127.0.0.1:9"
    )
    client.meta.events.register("before-call", _answered)
    with function_identity.acting_as("turn"):
        client.converse_stream(**_converse(FOUNDATION))


@pytest.mark.parametrize(
    ("model", "arn"),
    [
        (FOUNDATION, f"arn:aws:bedrock:{REGION}::foundation-model/{FOUNDATION}"),
        (PROFILE, f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{PROFILE}"),
        ("global.anthropic.claude-sonnet-4-20250514-v1:0",
         f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/global.anthropic.claude-sonnet-4-20250514-v1:0"),
        (GRANTED[1], GRANTED[1]),
    ],
)  # fmt: skip
def test_a_models_arn(model: str, arn: str) -> None:
    assert iam.model_arn(model, REGION, ACCOUNT) == arn


# ------------------------------------------------------------------------------ matching and conditions
@pytest.mark.parametrize(
    ("pattern", "arn", "matches"),
    [
        ("*", "arn:aws:s3:::b/k", True),
        ("arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b/c", True),
        ("arn:aws:s3:::b/*", "arn:aws:s3:::bb/k", False),
        ("arn:aws:states:us-east-1:1:execution:m:*", "arn:aws:states:us-east-1:1:execution:m:r", True),
        ("arn:aws:states:us-east-1:1:execution:m:*", "arn:aws:states:us-east-1:1:execution:mm:r", False),
        (
            "arn:aws:secretsmanager:r:1:secret:p/*/api_key-??????",
            "arn:aws:secretsmanager:r:1:secret:p/x/api_key-AbCdEf",
            True,
        ),
        (
            "arn:aws:secretsmanager:r:1:secret:p/*/api_key-??????",
            "arn:aws:secretsmanager:r:1:secret:p/x/api_key-AbCdE",
            False,
        ),
        ("arn:aws:dynamodb:*:1:table/t", "arn:aws:dynamodb:eu-west-1:1:table/t", True),
        (
            "arn:aws:dynamodb:us-east-1:1:table/T",
            "arn:aws:dynamodb:us-east-1:1:table/t",
            False,
        ),  # case-sensitive
    ],
)
def test_arns_match_as_iam_matches_them(pattern: str, arn: str, matches: bool) -> None:
    assert iam.arn_like(pattern, arn) is matches


def _statement(**condition: Any) -> iam.Statement:
    return iam.Statement("Allow", ("s3:ListBucket",), (), ("*",), None, condition)


@pytest.mark.parametrize(
    ("condition", "context", "holds"),
    [
        ({"StringLike": {"s3:prefix": ["a/*", "b/*"]}}, {"s3:prefix": "b/x"}, True),
        ({"StringLike": {"s3:prefix": ["a/*"]}}, {"s3:prefix": "c/x"}, False),
        ({"StringLike": {"s3:prefix": ["a/*"]}}, {}, False),
        ({"StringLikeIfExists": {"s3:prefix": ["a/*"]}}, {}, True),
        ({"StringNotEquals": {"k": "v"}}, {}, True),
        ({"StringNotEquals": {"k": "v"}}, {"k": "v"}, False),
        ({"Null": {"k": "true"}}, {}, True),
        ({"Null": {"k": "false"}}, {}, False),
        ({"Bool": {"aws:SecureTransport": "false"}}, {"aws:SecureTransport": "true"}, False),
        ({"ArnLike": {"k": "arn:aws:s3:::b/*"}}, {"k": "arn:aws:s3:::b/x"}, True),
        ({"NumericLessThan": {"k": "1"}}, {"k": "0"}, False),  # an operator not modelled never grants
    ],
)
def test_conditions(condition: dict[str, Any], context: dict[str, str], holds: bool) -> None:
    assert _statement(**condition).matches(iam.Request("s3:ListBucket", "arn:aws:s3:::b", context)) is holds


def test_an_explicit_deny_wins() -> None:
    allow = iam.Statement("Allow", ("dynamodb:*",), (), ("*",), None, {})
    deny = iam.Statement("Deny", ("dynamodb:DeleteItem",), (), ("*",), None, {})
    policy = iam.Policy("f", "Role", [allow, deny])
    assert policy.allows(iam.Request("dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/t"))
    assert not policy.allows(iam.Request("dynamodb:DeleteItem", "arn:aws:dynamodb:r:1:table/t"))


def test_actions_match_without_case() -> None:
    statement = iam.Statement("Allow", ("DynamoDB:get*",), (), ("*",), None, {})
    assert statement.matches(iam.Request("dynamodb:GetItem", "x"))
    assert not statement.matches(iam.Request("dynamodb:PutItem", "x"))


def test_every_manifest_function_has_its_deployed_policy() -> None:
    from skyloop import manifest

    assert set(iam.policies()["functions"]) == {spec.name for spec in manifest.FUNCTIONS}
    # and every statement that names a resource of this stack resolves here
    for name in iam.policies()["functions"]:
        policy = iam.policy_for(name, REGION)
        assert policy is not None
        assert all(
            statement.resources or statement.not_resources
            for statement in policy.statements
            if statement.effect == "Allow"
            and "logs:" not in str(statement.actions)
            and "sqs:" not in str(statement.actions)
            and "execute-api:" not in str(statement.actions)
            and "dynamodb:DescribeStream" not in statement.actions
        ), name


def test_code_interpreters_of_the_stack_only() -> None:
    # the hosted environments' engine: run_tool starts, invokes and stops; the turn only invokes
    start = {"codeInterpreterIdentifier": "Skyloop_sandbox-abcdefghij", "sessionTimeoutSeconds": 900}
    _call("run_tool", "bedrock-agentcore", "start_code_interpreter_session", start)
    invoke = {
        "codeInterpreterIdentifier": "Skyloop_public-klmnopqrst",
        "sessionId": "s",
        "name": "executeCommand",
    }
    _call("turn", "bedrock-agentcore", "invoke_code_interpreter", invoke)
    response = _refused("turn", "bedrock-agentcore", "start_code_interpreter_session", start)
    assert "code-interpreter-custom/Skyloop_sandbox-abcdefghij" in response["Error"]["Message"]
    other = {**invoke, "codeInterpreterIdentifier": "someone_elses-0123456789"}
    _refused("run_tool", "bedrock-agentcore", "invoke_code_interpreter", other)
    _refused("stream", "bedrock-agentcore", "invoke_code_interpreter", invoke)


# ------------------------------------------------------------------------------ queues, buses, refusals
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/skyloop-local-deliveries.fifo"
DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/skyloop-local-dead-deliveries.fifo"


def test_queues_by_their_arn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the stack's delivery queues, named to the functions by URL (their Ref)
    monkeypatch.setenv("SKYLOOP_WEBHOOK_QUEUE_URL", QUEUE_URL)
    monkeypatch.setenv("SKYLOOP_WEBHOOK_DLQ_URL", DLQ_URL)
    message = {"MessageBody": "{}", "MessageGroupId": "g", "MessageDeduplicationId": "d"}
    # the publisher queues deliveries; only the delivery function receives them and dead-letters
    _call("lifecycle_events", "sqs", "send_message", {"QueueUrl": QUEUE_URL, **message})
    _call("webhook_delivery", "sqs", "receive_message", {"QueueUrl": QUEUE_URL})
    _call("webhook_delivery", "sqs", "send_message", {"QueueUrl": DLQ_URL, **message})
    _refused("lifecycle_events", "sqs", "send_message", {"QueueUrl": DLQ_URL, **message})
    _refused("lifecycle_events", "sqs", "receive_message", {"QueueUrl": QUEUE_URL})
    # GetQueueUrl names the queue by name: its ARN is built in the caller's account
    _call("webhook_delivery", "sqs", "get_queue_url", {"QueueName": "skyloop-local-dead-deliveries.fifo"})
    _refused("lifecycle_events", "sqs", "get_queue_url", {"QueueName": "skyloop-local-dead-deliveries.fifo"})
    # a queue of the same name in another account is another queue
    elsewhere = QUEUE_URL.replace(ACCOUNT, "210987654321")
    response = _refused("lifecycle_events", "sqs", "send_message", {"QueueUrl": elsewhere, **message})
    assert f"arn:aws:sqs:{REGION}:210987654321:skyloop-local-deliveries.fifo" in response["Error"]["Message"]


def test_buses_by_their_arn() -> None:
    entry = {"Source": "skyloop", "DetailType": "session.created", "Detail": "{}"}
    _call(
        "lifecycle_events", "events", "put_events", {"Entries": [{**entry, "EventBusName": "skyloop-local"}]}
    )
    # the default bus (no name) and another bus are not the stack's
    _refused("lifecycle_events", "events", "put_events", {"Entries": [entry]})
    other = {**entry, "EventBusName": "someone-elses"}
    response = _refused("lifecycle_events", "events", "put_events", {"Entries": [other]})
    assert f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/someone-elses" in response["Error"]["Message"]
    # one entry on a bus not granted refuses the whole call
    both = [{**entry, "EventBusName": "skyloop-local"}, other]
    _refused("lifecycle_events", "events", "put_events", {"Entries": both})
    _refused("api", "events", "put_events", {"Entries": [{**entry, "EventBusName": "skyloop-local"}]})


@pytest.mark.parametrize(
    ("service", "operation", "params", "code", "status"),
    [
        # S3 and SQS: AccessDenied, 403 (S3's model; SQS's answer)
        ("s3", "get_object", {"Bucket": "another-bucket", "Key": "k"}, "AccessDenied", 403),
        ("sqs", "send_message", {"QueueUrl": QUEUE_URL, "MessageBody": "{}"}, "AccessDenied", 403),
        # the JSON protocol's services: AccessDeniedException, 400
        ("dynamodb", "put_item", {"TableName": TABLE, "Item": _key()}, "AccessDeniedException", 400),
        ("events", "put_events", {"Entries": [{"Source": "s", "DetailType": "d", "Detail": "{}"}]},
         "AccessDeniedException", 400),
        # the REST protocol's: 403 (bedrock-agentcore's model says so; Scheduler answers it too)
        ("lambda", "invoke", {"FunctionName": "skyloop-run_tool"}, "AccessDeniedException", 403),
        ("scheduler", "delete_schedule", {"Name": "t", "GroupName": "skyloop-local"}, "AccessDeniedException", 403),
        ("bedrock-agentcore", "invoke_code_interpreter",
         {"codeInterpreterIdentifier": "Skyloop_public-klmnopqrst", "sessionId": "s", "name": "executeCommand"},
         "AccessDeniedException", 403),
    ],
)  # fmt: skip
def test_a_refusal_has_the_services_error_code_and_status(
    service: str, operation: str, params: dict[str, Any], code: str, status: int
) -> None:
    response = _refused("stream", service, operation, params)
    assert response["Error"]["Code"] == code
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert "is not authorized to perform" in response["Error"]["Message"]


def test_the_status_is_the_models_where_the_model_says() -> None:
    import botocore.session

    for service in ("bedrock-agentcore", "bedrock-runtime"):
        shape = botocore.session.get_session().get_service_model(service).shape_for("AccessDeniedException")
        assert iam.denial_status(service) == shape.metadata["error"]["httpStatusCode"] == 403
