"""Template assertions: every part of the cloud stack, read from the synthesized template.

The function list, memory and timeouts come from ``skyloop.manifest``, the
table from ``skyloop.store.schema`` and the state machine from
``infra/turn.asl.json``: the same sources the local stack reads.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from infra import constants as C
from infra import permissions
from skyloop import manifest
from skyloop.settings import Settings
from skyloop.store import schema
from tests.infra.helpers import (
    actions,
    as_list,
    by_prefix,
    bytecode_problems,
    function,
    one,
    resources,
    role_statements,
    statements_with,
)

Template = dict[str, Any]
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # managed CachePolicy
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"  # managed CachePolicy
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"  # managed OriginRequestPolicy
STEP_FUNCTIONS = [f for f in manifest.FUNCTIONS if f.asl_key]
STEP_NAMES = {f.name for f in STEP_FUNCTIONS}
(RECONCILER,) = (f for f in manifest.FUNCTIONS if f.scheduled)
# CDK's provider for autoDeleteObjects on the dev stack's blob bucket (not a skyloop function).
BUCKET_DEPLOYMENT_HANDLER = "CustomCDKBucketDeployment"  # aws_s3_deployment's singleton handler
AUTO_DELETE_PROVIDER = "CustomS3AutoDeleteObjectsCustomResourceProviderHandler"
PACKAGE = manifest.PROJECT_ROOT / "shared" / "skyloop"


def _table_id(t: Template) -> str:
    return one(t, "AWS::DynamoDB::Table")[0]


def _bucket_id(t: Template) -> str:
    return by_prefix(t, "AWS::S3::Bucket", "BlobsBucket")[0]


def _http_api(t: Template) -> tuple[str, dict[str, Any]]:
    """The HTTP API (the live channel's WebSocket API is tests/infra/test_live_stack.py's)."""
    found = {
        k: r
        for k, r in resources(t, "AWS::ApiGatewayV2::Api").items()
        if r["Properties"]["ProtocolType"] == "HTTP"
    }
    assert len(found) == 1, sorted(found)
    return next(iter(found.items()))


def _of_api(t: Template, type_: str, api_id: str) -> tuple[str, dict[str, Any]]:
    found = {k: r for k, r in resources(t, type_).items() if r["Properties"].get("ApiId") == {"Ref": api_id}}
    assert len(found) == 1, f"expected one {type_} of {api_id}, found {sorted(found)}"
    return next(iter(found.items()))


def _machine_id(t: Template) -> str:
    return one(t, "AWS::StepFunctions::StateMachine")[0]


def _role_of(t: Template, name: str) -> str:
    return function(t, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]


# ------------------------------------------------------------------------------- data
def test_table_mirrors_the_shared_schema(template_json: Template) -> None:
    # Given the key schema the local stack creates on moto
    expected = schema.create_table_kwargs("x")
    # When the table is read from the template
    _, table = one(template_json, "AWS::DynamoDB::Table")
    props = table["Properties"]
    # Then keys, attribute types and both GSIs (ALL projection) are the same
    assert props["KeySchema"] == expected["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        expected["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    assert props["GlobalSecondaryIndexes"] == expected["GlobalSecondaryIndexes"]
    assert [g["IndexName"] for g in props["GlobalSecondaryIndexes"]] == list(schema.INDEXES)


def test_table_is_on_demand_with_ttl_and_point_in_time_recovery(template_json: Template) -> None:
    _, table = one(template_json, "AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_dev_stack_tears_down_cleanly(template_json: Template) -> None:
    # Given the default context (prod=false in cdk.json)
    _, table = one(template_json, "AWS::DynamoDB::Table")
    # Then the table and the log groups go with the stack
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False
    assert {r["DeletionPolicy"] for r in resources(template_json, "AWS::Logs::LogGroup").values()} == {
        "Delete"
    }
    # And the blob and console buckets too, each emptied first (a bucket with objects cannot be deleted)
    emptied = {
        e["Properties"]["BucketName"]["Ref"]
        for e in resources(template_json, "Custom::S3AutoDeleteObjects").values()
    }
    for prefix in ("BlobsBucket", "ConsoleBucket"):
        bucket_id, bucket = by_prefix(template_json, "AWS::S3::Bucket", prefix)
        assert bucket["DeletionPolicy"] == "Delete"
        assert bucket_id in emptied


# ------------------------------------------------------------------------------ blobs
def test_blob_bucket_is_private_encrypted_tls_only_and_aborts_multipart_uploads(
    template_json: Template,
) -> None:
    bucket_id, bucket = by_prefix(template_json, "AWS::S3::Bucket", "BlobsBucket")
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled"
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": C.BLOB_MULTIPART_ABORT_DAYS}
    # And its policy refuses every request without TLS
    (policy,) = [
        p
        for p in resources(template_json, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny
    assert deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny[0]["Action"] == "s3:*"
    assert template_json["Outputs"]["BlobBucketName"]["Value"] == {"Ref": bucket_id}


def test_blob_prefixes_are_the_stores() -> None:
    from skyloop.store import keys

    assert keys.session_blob_prefix("s_1").startswith(permissions.SESSIONS_PREFIX)
    assert keys.agent_blob_prefix("a_1").startswith(permissions.AGENTS_PREFIX)


# What each function may do in the bucket (infra/permissions.py BLOB_ACCESS): readers get, the
# steps get and put, the API also deletes (session prefixes, files) and lists (to delete a prefix).
BLOB_READ = {"s3:GetObject"}
BLOB_READ_WRITE = BLOB_READ | {"s3:PutObject"}
EXPECTED_BLOB_ACTIONS = {
    "api": BLOB_READ_WRITE | {"s3:DeleteObject"},
    "stream": BLOB_READ,
    RECONCILER.name: BLOB_READ_WRITE,  # an idle interpreter session's workspace is snapshotted before its stop
    **{name: BLOB_READ_WRITE for name in STEP_NAMES},
    "live": BLOB_READ,  # a replayed event's payload may live in the bucket
    "push_fanout": BLOB_READ,  # and a new one's
    "schedule_run": BLOB_READ_WRITE,  # a run's first message, a long prompt in the bucket
    "lifecycle_events": BLOB_READ_WRITE,  # reads events, puts a large delivery body
    "webhook_delivery": BLOB_READ,  # reads that body back
}
EXPECTED_BLOB_PREFIXES = {
    "api": {"sessions/", "agents/", "files/", "webhooks/"},
    "lifecycle_events": {"sessions/", "webhooks/"},
    "webhook_delivery": {"webhooks/"},
}
EXPECTED_LIST_PREFIXES = {"api": ["sessions/*", "files/*"]}


def _s3_statements(t: Template, name: str) -> list[dict[str, Any]]:
    statements = role_statements(t, _role_of(t, name))
    return [s for s in statements if any(a.startswith("s3:") for a in as_list(s["Action"]))]


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_blob_access_is_exactly_what_the_function_needs(
    template_json: Template, spec: manifest.FunctionSpec
) -> None:
    bucket_arn = {"Fn::GetAtt": [_bucket_id(template_json), "Arn"]}
    statements = _s3_statements(template_json, spec.name)
    objects = [s for s in statements if s["Action"] != "s3:ListBucket"]
    listing = [s for s in statements if s["Action"] == "s3:ListBucket"]
    # Then the object actions are exactly the declared ones, on keys under the declared prefixes
    assert len(objects) == 1
    assert set(as_list(objects[0]["Action"])) == EXPECTED_BLOB_ACTIONS[spec.name]
    assert set(permissions.BLOB_ACCESS[spec.name].actions) == EXPECTED_BLOB_ACTIONS[spec.name]
    prefixes = EXPECTED_BLOB_PREFIXES.get(spec.name, {"sessions/", "agents/"})
    assert sorted(as_list(objects[0]["Resource"]), key=str) == sorted(
        ({"Fn::Join": ["", [bucket_arn, f"/{p}*"]]} for p in prefixes), key=str
    )
    # And only the API lists, and only below the prefixes it deletes
    if spec.name in EXPECTED_LIST_PREFIXES:
        (statement,) = listing
        assert statement["Resource"] == bucket_arn
        assert statement["Condition"] == {"StringLike": {"s3:prefix": EXPECTED_LIST_PREFIXES[spec.name]}}
    else:
        assert listing == []
    # And no s3:* or bucket-wide object wildcard anywhere
    assert "s3:*" not in json.dumps(statements)
    assert '"/*"' not in json.dumps(statements)


# ---------------------------------------------------------------------------- secrets
SECRET_ARN_PREFIX = [
    "arn:",
    {"Ref": "AWS::Partition"},
    ":secretsmanager:",
    {"Ref": "AWS::Region"},
    ":",
    {"Ref": "AWS::AccountId"},
]
AGENT_KEYS = f":secret:{C.STACK_NAME}/agents/*/api_key-??????"
TOOL_SECRETS = f":secret:{C.STACK_NAME}/tools/*-??????"
EXPECTED_SECRET_ACCESS = {
    "api": (
        {"secretsmanager:CreateSecret", "secretsmanager:PutSecretValue", "secretsmanager:DeleteSecret"},
        (AGENT_KEYS,),
    ),
    # model keys, and the MCP header secrets of the servers whose tools a turn lists
    "turn": ({"secretsmanager:GetSecretValue"}, (AGENT_KEYS, TOOL_SECRETS)),
    "run_tool": ({"secretsmanager:GetSecretValue"}, (TOOL_SECRETS,)),
}


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_secret_access_is_scoped_to_the_stacks_prefix(
    template_json: Template, spec: manifest.FunctionSpec
) -> None:
    statements = [
        s
        for s in role_statements(template_json, _role_of(template_json, spec.name))
        if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))
    ]
    env = function(template_json, spec.name)[1]["Properties"]["Environment"]["Variables"]
    if spec.name not in EXPECTED_SECRET_ACCESS:
        # Then no other function may touch a secret
        assert statements == []
        assert "SKYLOOP_SECRETS_PREFIX" not in env
        assert "SKYLOOP_TOOL_SECRETS_PREFIX" not in env
        return
    expected_actions, names = EXPECTED_SECRET_ACCESS[spec.name]
    (statement,) = statements
    assert set(as_list(statement["Action"])) == expected_actions
    assert as_list(statement["Resource"]) == [
        {"Fn::Join": ["", [*SECRET_ARN_PREFIX, name]]} for name in names
    ]
    # And the prefix the API names new secrets with is the one granted
    assert env["SKYLOOP_SECRETS_PREFIX"] == f"{C.STACK_NAME}/agents"
    # and the folder registration makes principals name MCP header secrets in is the one run_tool reads
    assert env["SKYLOOP_TOOL_SECRETS_PREFIX"] == f"{C.STACK_NAME}/tools"
    from skyloop.secrets import api_key_secret_name

    assert fnmatch.fnmatchcase(
        ":secret:" + api_key_secret_name(env["SKYLOOP_SECRETS_PREFIX"], "agent_1") + "-AbC123", AGENT_KEYS
    )


# -------------------------------------------------------------------------- functions
def test_functions_are_exactly_the_manifest_and_the_smoke_tool(template_json: Template) -> None:
    # (besides CDK's own providers: emptying buckets, uploading the console's files)
    found = {
        k
        for k in resources(template_json, "AWS::Lambda::Function")
        if not k.startswith((AUTO_DELETE_PROVIDER, BUCKET_DEPLOYMENT_HANDLER))
    }
    smoke_id, _ = _smoke_tool(template_json)
    assert len(found) == len(manifest.FUNCTIONS) + 1
    assert {function(template_json, f.name)[0] for f in manifest.FUNCTIONS} | {smoke_id} == found


def _smoke_tool(t: Template) -> tuple[str, dict[str, Any]]:
    return by_prefix(t, "AWS::Lambda::Function", "SmokeToolEcho")


def test_smoke_tool_is_the_echo_file_inline_at_128_mb_with_logs_only(template_json: Template) -> None:
    # Given the echo function `skyloop smoke` declares as its approved server tool
    smoke_id, fn = _smoke_tool(template_json)
    props = fn["Properties"]
    # Then it is the same file `skyloop dev` serves as smoke_echo, inline (no asset, no layer)
    assert props["Code"] == {"ZipFile": (PACKAGE / "tools" / "smoke_echo.py").read_text()}
    assert props["Handler"] == "index.smoke_echo"
    assert (props["MemorySize"], props["Timeout"]) == (128, 10)
    assert props["Runtime"] == f"python{C.LAMBDA_PYTHON_VERSION}"
    assert "Layers" not in props
    assert "Environment" not in props
    # And its role may write its own log group and nothing else
    role_id = props["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in template_json["Resources"][role_id]["Properties"]
    (statement,) = role_statements(template_json, role_id)
    assert set(as_list(statement["Action"])) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    log_group_id, _ = by_prefix(template_json, "AWS::Logs::LogGroup", "SmokeToolLogs")
    assert statement["Resource"] == {"Fn::GetAtt": [log_group_id, "Arn"]}
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": log_group_id}
    # And its ARN is the output smoke takes
    assert template_json["Outputs"]["SmokeToolArn"]["Value"] == {"Fn::GetAtt": [smoke_id, "Arn"]}


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_function_matches_its_manifest_entry(template_json: Template, spec: manifest.FunctionSpec) -> None:
    _, fn = function(template_json, spec.name)
    props = fn["Properties"]
    assert props["Handler"] == spec.handler
    assert props["MemorySize"] == spec.memory_mb
    assert props["Timeout"] == spec.timeout_s
    assert props["Description"] == spec.description
    assert props["Runtime"] == f"python{C.LAMBDA_PYTHON_VERSION}"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_function_environment(template_json: Template, spec: manifest.FunctionSpec) -> None:
    _, fn = function(template_json, spec.name)
    env = fn["Properties"]["Environment"]["Variables"]
    # Then the settings every function reads, auth always on, and Powertools configured
    assert env["SKYLOOP_TABLE_NAME"] == {"Ref": _table_id(template_json)}
    assert env["SKYLOOP_REQUIRE_TOKEN"] == "true"
    assert env["POWERTOOLS_SERVICE_NAME"] == C.SERVICE_NAME
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == C.SERVICE_NAME
    assert env["POWERTOOLS_LOG_LEVEL"] == C.POWERTOOLS_LOG_LEVEL
    assert env["POWERTOOLS_TRACE_DISABLED"] == "true"  # the Powertools tracer is opt-in (cold start)
    # And every SKYLOOP_ variable is one skyloop.settings knows (no typo goes unnoticed)
    known = {f.alias for f in Settings.model_fields.values()}
    assert {k for k in env if k.startswith("SKYLOOP_")} <= known
    # And every function uses the store, so every one knows the blob bucket
    assert env["SKYLOOP_BLOB_BUCKET"] == {"Ref": _bucket_id(template_json)}
    # And the functions that drive turns from outside (API, reconciler) know the machine
    if spec.name in set(permissions.TURN_ACCESS) - STEP_NAMES:
        assert env["SKYLOOP_STATE_MACHINE_ARN"] == {"Ref": _machine_id(template_json)}
    else:
        assert "SKYLOOP_STATE_MACHINE_ARN" not in env
    # And with no context for them, no quota, JWT or outbound allow-list is set
    assert not {k for k in env if k.startswith(("SKYLOOP_QUOTA_", "SKYLOOP_JWT_", "SKYLOOP_OUTBOUND_"))}


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_function_logs_to_its_own_group_with_retention(
    template_json: Template, spec: manifest.FunctionSpec
) -> None:
    _, fn = function(template_json, spec.name)
    group_id = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    group = template_json["Resources"][group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == 30
    # And its role may write there and nowhere else in CloudWatch Logs
    logs = [
        s for s in role_statements(template_json, _role_of(template_json, spec.name)) if "logs:" in str(s)
    ]
    assert logs == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [group_id, "Arn"]},
        }
    ]


def test_dependencies_come_from_one_arm64_layer(template_json: Template, synth: Any) -> None:
    layer_id, layer = by_prefix(template_json, "AWS::Lambda::LayerVersion", "FunctionsDependencies")
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == [f"python{C.LAMBDA_PYTHON_VERSION}"]
    for spec in manifest.FUNCTIONS:
        assert {"Ref": layer_id} in function(template_json, spec.name)[1]["Properties"]["Layers"]
    # And with no layer built, synth still works on a placeholder and says so
    assert "placeholder layer" in synth.stderr


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_function_code_carries_unchecked_312_bytecode(
    synth: Any, target_python: Any, spec: manifest.FunctionSpec
) -> None:
    # Given the asset the template points at (/var/task is read-only: Lambda cannot cache bytecode)
    _, fn = function(synth.template, spec.name)
    code = synth.asset_dir(fn["Properties"]["Code"]["S3Key"])
    # Then every module has its CPython 3.12 bytecode, never checked against the source, and
    # nothing else (no bytecode of the development interpreter)
    assert bytecode_problems(code, target_python.magic) == []
    # And the code objects name the deployed files, not the staging folder
    pyc = code / "skyloop" / "__pycache__" / "__init__.cpython-312.pyc"
    assert b"/var/task/skyloop/__init__.py" in pyc.read_bytes()


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_function_code_is_the_entry_point_plus_the_package(synth: Any, spec: manifest.FunctionSpec) -> None:
    # Given the asset the template points at
    _, fn = function(synth.template, spec.name)
    code = synth.asset_dir(fn["Properties"]["Code"]["S3Key"])
    # Then the handler sits at the root next to the skyloop package (no Docker bundling)
    assert (code / spec.handler_file.name).is_file()
    assert (code / "skyloop" / "__init__.py").is_file()
    assert (code / "skyloop" / "manifest.py").is_file()
    # And development-only parts of the package stay out
    assert not (code / "skyloop" / "local").exists()
    assert not (code / "skyloop" / "mockllm").exists()
    assert not [
        p for p in code.rglob("*") if p.name.endswith((".pyc", ".pyo")) and ".cpython-312." not in p.name
    ]
    if spec.handler.endswith(".sh"):
        assert (code / spec.handler).stat().st_mode & 0o111, "run.sh must stay executable"


IMPORT_CHECK = """
import importlib, importlib.util, json, sys
for directory, target in json.loads(sys.argv[1]):
    for name in [m for m in sys.modules if m in ("skyloop", "handler") or m.startswith("skyloop.")]:
        del sys.modules[name]
    sys.path.insert(0, directory)
    module, _, attr = target.rpartition(":")
    if module.endswith(".py"):
        spec = importlib.util.spec_from_file_location("handler", f"{directory}/{module}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules["handler"] = loaded
        spec.loader.exec_module(loaded)
    else:
        loaded = importlib.import_module(module)
    assert callable(getattr(loaded, attr)), target
    assert sys.modules["skyloop"].__file__.startswith(directory), sys.modules["skyloop"].__file__
    sys.path.remove(directory)
"""


def test_function_code_imports_on_its_own(synth: Any) -> None:
    # Given each function's staged code (its own skyloop copy first on sys.path, as in Lambda)
    targets = []
    for spec in manifest.FUNCTIONS:
        code = synth.asset_dir(function(synth.template, spec.name)[1]["Properties"]["Code"]["S3Key"])
        if spec.handler.endswith(".sh"):  # run.sh serves an ASGI app: "module:attribute"
            match = re.search(r"\b([a-z_][\w.]*):([a-z_]\w*)\b", (code / spec.handler).read_text())
            assert match, "run.sh names no ASGI app"
            targets.append([str(code), f"{match[1]}:{match[2]}"])
        else:
            module, attr = spec.handler.rsplit(".", 1)
            targets.append([str(code), f"{module}.py:{attr}"])
    # When every entry point is imported in a fresh interpreter
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SKYLOOP_TABLE_NAME": "t"}
    proc = subprocess.run(
        # -B: never write this interpreter's bytecode into the assets under test
        [sys.executable, "-B", "-c", IMPORT_CHECK, json.dumps(targets)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    # Then none needs the parts of the package left out (local stack, mock model)
    assert proc.returncode == 0, proc.stderr[-3000:]


# -------------------------------------------------------------------------------- IAM
def test_roles_have_no_managed_policies(template_json: Template) -> None:
    for spec in manifest.FUNCTIONS:
        role = template_json["Resources"][_role_of(template_json, spec.name)]
        assert "ManagedPolicyArns" not in role["Properties"], spec.name


# What each function's code calls on the table (see infra/permissions.py for who calls what).
# TransactWriteItems is authorized per item: PutItem, UpdateItem, ConditionCheckItem.
READS = {"dynamodb:GetItem", "dynamodb:Query"}
STEP_ACTIONS = READS | {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
EXPECTED_TABLE_ACTIONS = {
    "api": STEP_ACTIONS | {"dynamodb:DeleteItem", "dynamodb:BatchWriteItem"},
    "stream": READS,
    **{f.name: STEP_ACTIONS for f in STEP_FUNCTIONS},
    RECONCILER.name: STEP_ACTIONS,
    # connections and subscriptions (see infra/permissions.py); never a transaction's ConditionCheckItem
    "live": READS
    | {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"},
    "push_fanout": {"dynamodb:Query", "dynamodb:DeleteItem"},
    # the session, the log around a run of calls, the owner's endpoints (by_owner), a new delivery,
    # the delivery marked queued once sent (WebhookRecords.mark_queued)
    "lifecycle_events": READS | {"dynamodb:PutItem", "dynamodb:UpdateItem"},
    # the endpoint and the delivery, an attempt and the endpoint's state recorded
    "webhook_delivery": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
    # a scheduled run: the task and its run (conditional puts), the run's session and turn (an append)
    "schedule_run": STEP_ACTIONS,
}
# The fan-out's event source mapping reads the table's stream (tests/infra/test_live_stack.py checks them).
STREAM_READS = {
    "dynamodb:ListStreams",
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
}
EXPECTED_INDEXES = {
    "api": {"by_owner", "by_agent_name"},
    RECONCILER.name: {"running_sessions", "due_schedules"},  # and the armed scheduled tasks (repair)
    "lifecycle_events": {"by_owner"},  # routing: the endpoints of a session's owner
    # the owner's sessions and running turns, for their quotas; an OpenAI automation's agent by name
    "schedule_run": {"by_owner", "by_agent_name"},
}


def _table_statements(t: Template, name: str) -> list[dict[str, Any]]:
    """The role's statements on the table (its stream's, granted by the event source, apart)."""
    statements = role_statements(t, _role_of(t, name))
    return [
        s
        for s in statements
        if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
        and not set(as_list(s["Action"])) <= STREAM_READS
    ]


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_table_actions_are_exactly_what_the_function_calls(
    template_json: Template, spec: manifest.FunctionSpec
) -> None:
    # Given the DynamoDB statements of the function's role
    statements = _table_statements(template_json, spec.name)
    # Then they grant exactly the actions its code calls: no Scan, BatchGetItem, DescribeTable
    # or stream reads, and deletes only for the API
    assert actions(statements) == EXPECTED_TABLE_ACTIONS[spec.name]
    assert set(permissions.TABLE_ACCESS[spec.name].actions) == EXPECTED_TABLE_ACTIONS[spec.name]


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_table_access_names_the_table_and_only_the_indexes_queried(
    template_json: Template, spec: manifest.FunctionSpec
) -> None:
    table_arn = {"Fn::GetAtt": [_table_id(template_json), "Arn"]}
    resources_granted = [
        r for s in _table_statements(template_json, spec.name) for r in as_list(s["Resource"])
    ]
    # Then the table itself, plus one ARN per index the function queries, never index/*
    indexes = EXPECTED_INDEXES.get(spec.name, set())
    expected = [table_arn] + [{"Fn::Join": ["", [table_arn, f"/index/{name}"]]} for name in sorted(indexes)]
    assert sorted(resources_granted, key=str) == sorted(expected, key=str)
    assert "index/*" not in json.dumps(resources_granted)


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_turn_access_is_as_declared(template_json: Template, spec: manifest.FunctionSpec) -> None:
    granted = {a for a in actions(role_statements(template_json, _role_of(template_json, spec.name)))}
    states = {a for a in granted if a.startswith("states:")}
    declared = permissions.TURN_ACCESS.get(spec.name, ())
    expected = {
        {
            "start": "states:StartExecution",
            "stop": "states:StopExecution",
            "resume": "states:SendTaskSuccess",
            "heartbeat": "states:SendTaskHeartbeat",
            "describe": "states:DescribeExecution",
        }[a]
        for a in declared
    }
    assert states == expected


def test_api_turn_grants_target_this_machine(template_json: Template) -> None:
    machine = {"Ref": _machine_id(template_json)}
    statements = role_statements(template_json, _role_of(template_json, "api"))
    assert statements_with(statements, "states:StartExecution")[0]["Resource"] == machine
    assert statements_with(statements, "states:SendTaskSuccess")[0]["Resource"] == machine
    stop = json.dumps(statements_with(statements, "states:StopExecution")[0]["Resource"])
    assert ":execution:" in stop
    assert _machine_id(template_json) in stop
    # the parked step resumes its own turn through a policy of its own (no dependency cycle)
    resume = statements_with(
        role_statements(template_json, _role_of(template_json, "turn")), "states:SendTaskSuccess"
    )
    assert resume[0]["Resource"] == machine


def test_reconciler_runs_on_a_schedule_and_reads_executions_of_this_machine(template_json: Template) -> None:
    fn_id, _ = function(template_json, RECONCILER.name)
    # Given the EventBridge rule: every reconcileMinutes (default 2), the reconciler, no retries
    rule_id, rule = by_prefix(template_json, "AWS::Events::Rule", "ReconcilerSchedule")
    props = rule["Properties"]
    assert props["ScheduleExpression"] == f"rate({C.RECONCILE_DEFAULT_MINUTES} minutes)"
    assert props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fn_id, "Arn"]}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert "Input" not in target  # the scheduled event, whole: a reconciler pass (and the schedule repair)
    (permission,) = [
        p["Properties"]
        for p in resources(template_json, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
        and p["Properties"]["SourceArn"] == {"Fn::GetAtt": [rule_id, "Arn"]}
    ]
    assert permission["FunctionName"] == {"Fn::GetAtt": [fn_id, "Arn"]}
    # And it may describe executions of this machine only, and wake a parked one
    statements = role_statements(template_json, _role_of(template_json, RECONCILER.name))
    (describe,) = statements_with(statements, "states:DescribeExecution")
    assert ":execution:" in json.dumps(describe["Resource"])
    assert _machine_id(template_json) in json.dumps(describe["Resource"])
    assert statements_with(statements, "states:SendTaskSuccess")[0]["Resource"] == {
        "Ref": _machine_id(template_json)
    }
    # And it never starts or stops a turn, and the ASL never names it
    assert not statements_with(statements, "states:StartExecution")
    assert not statements_with(statements, "states:StopExecution")
    assert RECONCILER.asl_key is None


def test_reconciler_is_the_one_the_local_stack_runs() -> None:
    # The local stack runs skyloop.turns.reconcile.reconcile in-process; the function does the same
    source = (RECONCILER.code_dir / "handler.py").read_text()
    assert "from skyloop.turns.reconcile import reconcile" in source
    assert "reconcile(deps.store(), turn_engine.deployed())" in source


def test_no_bedrock_access_without_model_arns(template_json: Template) -> None:
    for spec in manifest.FUNCTIONS:
        granted = actions(role_statements(template_json, _role_of(template_json, spec.name)))
        assert not {a for a in granted if a.startswith("bedrock:")}, spec.name


# Actions that support no resource-level permissions: the only ones allowed on "*" (see the
# IAM5[Resource::*] acknowledgments in infra/stack.py).
TRACING = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
}
LOG_DELIVERY = {
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


def test_wildcard_resources_carry_only_tracing_and_log_delivery(template_json: Template) -> None:
    machine_role = one(template_json, "AWS::StepFunctions::StateMachine")[1]["Properties"]["RoleArn"]
    stream_roles = [{"Ref": _role_of(template_json, name)} for name in ("push_fanout", "lifecycle_events")]
    listers = [{"Ref": _role_of(template_json, name)} for name in permissions.SCHEDULE_LISTERS]
    # Given every policy in the stack
    for policy_id, policy in resources(template_json, "AWS::IAM::Policy").items():
        roles = policy["Properties"]["Roles"]
        allowed = TRACING | (LOG_DELIVERY if {"Ref": machine_role["Fn::GetAtt"][0]} in roles else set())
        if any(r in roles for r in stream_roles):  # a stream event source: ListStreams takes no resource
            allowed = allowed | {"dynamodb:ListStreams"}
        if any(r in roles for r in listers):  # the schedule repair lists its group: ListSchedules takes none
            allowed = allowed | {"scheduler:ListSchedules"}
        if policy_id.startswith(BUCKET_DEPLOYMENT_HANDLER):  # the console upload invalidates the edge cache
            allowed = {"cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            # Then "*" only ever carries actions that cannot be scoped
            if s["Resource"] == "*":
                assert set(as_list(s["Action"])) <= allowed, policy_id


# ------------------------------------------------------------------------ turn engine
def test_state_machine_is_standard_with_logging_and_tracing(template_json: Template) -> None:
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    props = machine["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] in {"ALL", "ERROR"}
    group_id = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert template_json["Resources"][group_id]["Properties"]["RetentionInDays"] == 30


def test_state_machine_definition_is_the_shared_asl_file(template_json: Template) -> None:
    # Given the definition and substitutions in the template
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    props = machine["Properties"]
    subs = props["DefinitionSubstitutions"]
    # Then each ${...FunctionArn} placeholder maps to the ARN of the manifest's function
    arn_of = {f.name: f"<{function(template_json, f.name)[0]}.Arn>" for f in STEP_FUNCTIONS}
    assert set(subs) == set(manifest.asl_substitutions(arn_of))
    for f in STEP_FUNCTIONS:
        assert subs[f"{f.asl_key}FunctionArn"] == {"Fn::GetAtt": [function(template_json, f.name)[0], "Arn"]}
    # And each task resource is the stack's own partition's (Step Functions refuses arn:aws: in aws-cn)
    for key, resource in manifest.TASK_RESOURCES.items():
        assert subs[key] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":{resource}"]]}
    # And substituting them gives the file the local stack runs, state for state
    deployed = props["DefinitionString"]
    for key, value in subs.items():
        if key in manifest.TASK_RESOURCES:
            deployed = deployed.replace("${" + key + "}", f"arn:aws:{manifest.TASK_RESOURCES[key]}")
        else:
            deployed = deployed.replace("${" + key + "}", f"<{value['Fn::GetAtt'][0]}.Arn>")
    deployed_asl = json.loads(deployed)
    local_asl = json.loads(manifest.render_asl(arn_of))
    assert deployed_asl["States"] == local_asl["States"]
    assert {k: v for k, v in deployed_asl.items() if k != "Comment"} == {
        k: v for k, v in local_asl.items() if k != "Comment"
    }
    # And no execution timeout: it would skip Catch -> FailTurn and strand the session "running"
    assert "TimeoutSeconds" not in deployed_asl
    # And no placeholder is left for CloudFormation to trip over (prose ones are defused)
    assert "${" not in deployed
    assert deployed_asl["Comment"] == re.sub(r"\$\{([^}]*)\}", r"$(\1)", local_asl["Comment"])


def test_every_task_retries_transient_lambda_errors(template_json: Template) -> None:
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    asl = json.loads(machine["Properties"]["DefinitionString"])
    tasks = dict(_tasks(asl["States"]))
    # Every step function is some task's target (the tool map's own tasks included)...
    targets = {t["Parameters"].get("FunctionName") for t in tasks.values()}
    assert {"${" + f.asl_key + "FunctionArn}" for f in STEP_FUNCTIONS} <= targets
    # ...and every task, the ones invoking a declared tool too, retries Lambda's transient errors
    for name, state in tasks.items():
        retried = {e for r in state.get("Retry", []) for e in r["ErrorEquals"]}
        assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= retried, name


def _tasks(states: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Task state, inside Parallel branches and Map item processors too, by its path."""
    for name, state in states.items():
        if state["Type"] == "Task":
            yield path + name, state
        for branch in state.get("Branches", []):
            yield from _tasks(branch["States"], f"{path}{name}/")
        if "ItemProcessor" in state:
            yield from _tasks(state["ItemProcessor"]["States"], f"{path}{name}/")


def test_act_state_maps_server_tools_whose_function_comes_from_the_step(template_json: Template) -> None:
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    asl = json.loads(machine["Properties"]["DefinitionString"])
    act = asl["States"]["Act"]
    assert act["Type"] == "Parallel"
    maps = {
        name: state
        for branch in act["Branches"]
        for name, state in branch["States"].items()
        if state["Type"] == "Map"
    }
    assert set(maps) == {"RunTools", "RunApprovedTools"}
    invokes = {"RunTools": "InvokeTool", "RunApprovedTools": "InvokeApprovedTool"}
    for map_name, state in maps.items():
        invoke = state["ItemProcessor"]["States"][invokes[map_name]]
        # the tool's ARN is data (run_tool's prepare answers it), so IAM alone bounds what runs
        assert invoke["Resource"] == "${LambdaInvoke}"
        assert invoke["Parameters"]["FunctionName.$"] == "$.prepared.invoke.function"


def test_machine_invokes_exactly_its_step_functions_and_the_smoke_tool(template_json: Template) -> None:
    # Given no lambdaToolArns in cdk.json: the machine may invoke its steps and the stack's own
    # smoke tool, and no other tool at all
    _, machine = one(template_json, "AWS::StepFunctions::StateMachine")
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoke = statements_with(role_statements(template_json, role_id), "lambda:InvokeFunction")
    assert len(invoke) == 2
    assert sorted(invoke[0]["Resource"], key=str) == sorted(
        ({"Fn::GetAtt": [function(template_json, f.name)[0], "Arn"]} for f in STEP_FUNCTIONS), key=str
    )
    assert invoke[1]["Resource"] == {"Fn::GetAtt": [_smoke_tool(template_json)[0], "Arn"]}


# -------------------------------------------------------------------------------- API
def test_http_api_sends_every_route_to_the_api_function(template_json: Template) -> None:
    api_id, api = _http_api(template_json)
    assert api["Properties"]["ProtocolType"] == "HTTP"
    _, route = _of_api(template_json, "AWS::ApiGatewayV2::Route", api_id)
    assert route["Properties"]["RouteKey"] == "$default"
    integration_id, integration = _of_api(template_json, "AWS::ApiGatewayV2::Integration", api_id)
    assert route["Properties"]["Target"] == {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}
    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
    api_fn = function(template_json, "api")[0]
    assert integration["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [api_fn, "Arn"]}
    permission = [
        p
        for p in resources(template_json, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
        and {"Ref": api_id} in p["Properties"]["SourceArn"]["Fn::Join"][1]
    ]
    assert len(permission) == 1
    assert permission[0]["Properties"]["FunctionName"] == {"Fn::GetAtt": [api_fn, "Arn"]}
    assert {"Ref": api_id} in permission[0]["Properties"]["SourceArn"]["Fn::Join"][1]


def test_cors_is_off_by_default(template_json: Template) -> None:
    # Given no corsOrigins in cdk.json: no browser origin is allowed anywhere
    context = json.loads((manifest.PROJECT_ROOT / "cdk.json").read_text())["context"]
    assert not context.get(C.CTX_CORS_ORIGINS)
    _, api = _http_api(template_json)
    assert "CorsConfiguration" not in api["Properties"]
    _, url = one(template_json, "AWS::Lambda::Url")
    assert "Cors" not in url["Properties"]


def test_api_stage_throttles_and_writes_access_logs(template_json: Template) -> None:
    _, stage = _of_api(template_json, "AWS::ApiGatewayV2::Stage", _http_api(template_json)[0])
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": C.API_THROTTLE_BURST,
        "ThrottlingRateLimit": C.API_THROTTLE_RATE_PER_S,
    }
    access = props["AccessLogSettings"]
    group_id = access["DestinationArn"]["Fn::GetAtt"][0]
    assert template_json["Resources"][group_id]["Type"] == "AWS::Logs::LogGroup"
    assert json.loads(access["Format"])["requestId"] == "$context.requestId"


# ----------------------------------------------------------------------------- stream
def test_stream_function_runs_behind_the_web_adapter(template_json: Template) -> None:
    spec = next(f for f in manifest.FUNCTIONS if f.streaming)
    _, fn = function(template_json, spec.name)
    props = fn["Properties"]
    assert props["Handler"] == "run.sh"
    env = props["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_PORT"] == str(C.LWA_PORT)
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/healthz"
    # And the adapter layer is AWS's arm64 build, in the stack's region, at cdk.json's version
    lwa = [layer for layer in props["Layers"] if "Fn::Join" in layer]
    assert len(lwa) == 1
    arn = "".join(p if isinstance(p, str) else json.dumps(p) for p in lwa[0]["Fn::Join"][1])
    context = json.loads((manifest.PROJECT_ROOT / "cdk.json").read_text())["context"]
    # (the publishing account looked up by region: China's differ; test_context checks the mapping)
    assert arn.endswith(f":layer:LambdaAdapterLayerArm64:{context['lwaLayerVersion']}")
    assert arn.startswith('arn:{"Ref": "AWS::Partition"}:lambda:{"Ref": "AWS::Region"}:{"Fn::FindInMap": ')


def test_stream_url_streams_and_only_cloudfront_may_call_it(template_json: Template) -> None:
    spec = next(f for f in manifest.FUNCTIONS if f.streaming)
    fn_id, _ = function(template_json, spec.name)
    url_id, url = one(template_json, "AWS::Lambda::Url")
    assert url["Properties"] == {
        "AuthType": "AWS_IAM",
        "InvokeMode": "RESPONSE_STREAM",
        "TargetFunctionArn": {"Fn::GetAtt": [fn_id, "Arn"]},
    }
    distribution_id, _ = one(template_json, "AWS::CloudFront::Distribution")
    grants = [
        p["Properties"]
        for p in resources(template_json, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"]
        in ({"Fn::GetAtt": [url_id, "FunctionArn"]}, {"Fn::GetAtt": [fn_id, "Arn"]})
    ]
    # Then CloudFront may call the URL: function URLs need both actions ("dual auth"), each once
    assert sorted(g["Action"] for g in grants) == ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"]
    for grant in grants:
        assert grant["Principal"] == "cloudfront.amazonaws.com"
        assert {"Ref": distribution_id} in grant["SourceArn"]["Fn::Join"][1]
    # And InvokeFunction only through the URL, so the distribution cannot invoke it directly
    (invoke,) = [g for g in grants if g["Action"] == "lambda:InvokeFunction"]
    assert invoke["InvokedViaFunctionUrl"] is True


# ------------------------------------------------------------------------------- edge
def _behaviors(template_json: Template) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]]:
    """``(config, default behavior, path pattern -> behavior)``; CloudFront tries patterns in order."""
    _, distribution = one(template_json, "AWS::CloudFront::Distribution")
    config = distribution["Properties"]["DistributionConfig"]
    return config, config["DefaultCacheBehavior"], {b["PathPattern"]: b for b in config["CacheBehaviors"]}


def test_edge_sends_the_openai_stream_paths_whole_to_the_stream_function(template_json: Template) -> None:
    """OpenAI's Agents API streams on paths it also serves plain requests on: those paths go to the
    stream function (with the viewer's token copied as on the stream path), which may invoke the API."""
    _, _, by_pattern = _behaviors(template_json)
    stream = by_pattern[C.STREAM_PATH_PATTERN]
    streamed = {p for p, b in by_pattern.items() if b["TargetOriginId"] == stream["TargetOriginId"]}
    assert streamed == {C.STREAM_PATH_PATTERN, *C.COMPAT_STREAM_PATH_PATTERNS}
    assert "/openai/v1/agents/sessions/*/events" in by_pattern
    for pattern in C.COMPAT_STREAM_PATH_PATTERNS:
        behavior = by_pattern[pattern]
        assert behavior["TargetOriginId"] == stream["TargetOriginId"]
        assert behavior["FunctionAssociations"] == stream["FunctionAssociations"]
        assert len(behavior["AllowedMethods"]) == 7  # POST and DELETE reach the function too
    functions = resources(template_json, "AWS::Lambda::Function")
    (stream_fn,) = [f for f in functions.values() if f["Properties"]["Handler"] == "run.sh"]
    target = stream_fn["Properties"]["Environment"]["Variables"]["SKYLOOP_API_FUNCTION"]["Ref"]
    assert functions[target]["Properties"]["Description"] == manifest.by_name("api").description


def _origin(config: dict[str, Any], behavior: dict[str, Any]) -> dict[str, Any]:
    (origin,) = [o for o in config["Origins"] if o["Id"] == behavior["TargetOriginId"]]
    return origin


API_PATTERNS = [
    *("/v1/*", "/openai/*", "/anthropic/*", "/api/*"),
    *("/v1", "/openai", "/anthropic", "/api"),  # bare: never the console's index.html
    *("/health", "/openapi.json"),
]
STREAM_PATTERNS = ["/v1/sessions/*/stream", *C.COMPAT_STREAM_PATH_PATTERNS]


def test_edge_routes_streams_to_the_url_the_api_paths_to_the_api_and_the_rest_to_the_console(
    template_json: Template,
) -> None:
    config, default, by_path = _behaviors(template_json)
    api_id, _ = _http_api(template_json)
    url_id, _ = one(template_json, "AWS::Lambda::Url")
    oac_id, oac = by_prefix(template_json, "AWS::CloudFront::OriginAccessControl", "EdgeStreamAccess")
    # The stream pattern comes first (it is under /v1/*), then the API's paths, then the console's assets
    assert list(by_path) == [*STREAM_PATTERNS, *API_PATTERNS, "/assets/*"]
    # The API's paths go to the HTTP API's execute-api domain
    for pattern in API_PATTERNS:
        api_origin = _origin(config, by_path[pattern])
        assert api_origin["DomainName"]["Fn::Join"][1][:2] == [{"Ref": api_id}, ".execute-api."]
        assert "OriginAccessControlId" not in api_origin
        assert api_origin["CustomOriginConfig"]["OriginReadTimeout"] == C.API_ORIGIN_READ_TIMEOUT_S
    # The stream path goes to the function URL, signed by Origin Access Control
    stream_origin = _origin(config, by_path["/v1/sessions/*/stream"])
    assert {"Fn::GetAtt": [url_id, "FunctionUrl"]} in stream_origin["DomainName"]["Fn::Select"][1][
        "Fn::Split"
    ]
    assert stream_origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert oac["Properties"]["OriginAccessControlConfig"] == {
        "Name": oac["Properties"]["OriginAccessControlConfig"]["Name"],
        "OriginAccessControlOriginType": "lambda",
        "SigningBehavior": "always",
        "SigningProtocol": "sigv4",
    }
    assert stream_origin["CustomOriginConfig"]["OriginReadTimeout"] == C.STREAM_ORIGIN_READ_TIMEOUT_S
    for origin in config["Origins"]:
        if "CustomOriginConfig" in origin:
            assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
            assert origin["CustomOriginConfig"]["OriginSSLProtocols"] == ["TLSv1.2"]
    # Everything else (and the root) is the console's bucket, read through its own OAC
    bucket_id, _ = by_prefix(template_json, "AWS::S3::Bucket", "ConsoleBucket")
    console_oac_id, console_oac = by_prefix(
        template_json, "AWS::CloudFront::OriginAccessControl", "EdgeConsoleAccess"
    )
    assert config["DefaultRootObject"] == "index.html"
    for behavior in (default, by_path["/assets/*"]):
        origin = _origin(config, behavior)
        assert origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
        assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [console_oac_id, "Id"]}
    assert console_oac["Properties"]["OriginAccessControlConfig"]["OriginAccessControlOriginType"] == "s3"


def test_edge_caches_nothing_of_the_api_and_forwards_methods_and_headers(template_json: Template) -> None:
    _, _, by_path = _behaviors(template_json)
    for pattern in [*STREAM_PATTERNS, *API_PATTERNS]:
        behavior = by_path[pattern]
        assert behavior["ViewerProtocolPolicy"] == "https-only"
        assert behavior["CachePolicyId"] == CACHING_DISABLED
        # all viewer headers but Host: Authorization and Last-Event-ID reach the functions
        assert behavior["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
        assert set(behavior["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}
        assert behavior["Compress"] is False


def test_edge_caches_the_console_with_its_security_headers(template_json: Template) -> None:
    _, default, by_path = _behaviors(template_json)
    headers_id, headers = by_prefix(
        template_json, "AWS::CloudFront::ResponseHeadersPolicy", "EdgeConsoleHeaders"
    )
    assets_id, assets = by_prefix(
        template_json, "AWS::CloudFront::ResponseHeadersPolicy", "EdgeConsoleAssetHeaders"
    )
    for behavior, policy_id in ((default, headers_id), (by_path["/assets/*"], assets_id)):
        assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
        assert behavior["CachePolicyId"] == CACHING_OPTIMIZED
        assert behavior["AllowedMethods"] == ["GET", "HEAD"]
        assert behavior["Compress"] is True
        assert behavior["ResponseHeadersPolicyId"] == {"Ref": policy_id}
    for policy in (headers, assets):
        security = policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
        assert security["ContentSecurityPolicy"]["ContentSecurityPolicy"] == C.CONSOLE_CONTENT_SECURITY_POLICY
        assert "script-src 'self'" in C.CONSOLE_CONTENT_SECURITY_POLICY
        assert security["FrameOptions"]["FrameOption"] == "DENY"
    (custom,) = assets["Properties"]["ResponseHeadersPolicyConfig"]["CustomHeadersConfig"]["Items"]
    assert custom == {"Header": "Cache-Control", "Value": C.CONSOLE_ASSETS_CACHE_CONTROL, "Override": True}
    assert "CustomHeadersConfig" not in headers["Properties"]["ResponseHeadersPolicyConfig"]


def test_stream_behavior_keeps_the_bearer_token_past_origin_signing(template_json: Template) -> None:
    _, default, by_path = _behaviors(template_json)
    fn_id, fn = by_prefix(template_json, "AWS::CloudFront::Function", "EdgeStreamAuthorization")
    assert by_path["/v1/sessions/*/stream"]["FunctionAssociations"] == [
        {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [fn_id, "FunctionARN"]}}
    ]
    assert fn["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert C.STREAM_AUTH_HEADER in fn["Properties"]["FunctionCode"]
    # and the console's client routes are rewritten by the other function, on the default behavior only
    routes_id, _ = by_prefix(template_json, "AWS::CloudFront::Function", "EdgeConsoleRoutes")
    assert default["FunctionAssociations"] == [
        {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [routes_id, "FunctionARN"]}}
    ]
    assert "FunctionAssociations" not in by_path["/assets/*"]


# ------------------------------------------------------------------------- operations
def test_audit_query_is_saved_for_the_api_log_group(template_json: Template) -> None:
    _, query = one(template_json, "AWS::Logs::QueryDefinition")
    props = query["Properties"]
    assert props["LogGroupNames"] == [
        function(template_json, "api")[1]["Properties"]["LoggingConfig"]["LogGroup"]
    ]
    assert "filter audit = 1" in props["QueryString"]
    for field in ("principal", "action", "resource_id", "outcome"):
        assert field in props["QueryString"]


def test_outputs_name_the_endpoint_table_and_state_machine(template_json: Template) -> None:
    outputs = template_json["Outputs"]
    distribution_id, _ = one(template_json, "AWS::CloudFront::Distribution")
    assert outputs["EndpointUrl"]["Value"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution_id, "DomainName"]}]]
    }
    assert outputs["TableName"]["Value"] == {"Ref": _table_id(template_json)}
    assert outputs["StateMachineArn"]["Value"] == {"Ref": _machine_id(template_json)}
    assert outputs["SmokeToolArn"]["Value"] == {"Fn::GetAtt": [_smoke_tool(template_json)[0], "Arn"]}
    assert outputs["LiveUrl"]["Value"]["Fn::Join"][1][0] == "wss://"


def _alarms(template_json: Template) -> list[dict[str, Any]]:
    return [a["Properties"] for a in resources(template_json, "AWS::CloudWatch::Alarm").values()]


def test_alarm_on_failed_turns(template_json: Template) -> None:
    machine = {"Ref": _machine_id(template_json)}
    failed = [
        a
        for a in _alarms(template_json)
        if a["Namespace"] == "AWS/States" and a["MetricName"] == "ExecutionsFailed"
    ]
    assert len(failed) == 1
    assert failed[0]["Dimensions"] == [{"Name": "StateMachineArn", "Value": machine}]
    assert failed[0]["Threshold"] == C.FAILED_EXECUTIONS_THRESHOLD
    assert failed[0]["TreatMissingData"] == "notBreaching"


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_alarm_on_errors_and_throttles_of_every_function(template_json: Template, metric: str) -> None:
    watched = [
        a["Dimensions"][0]["Value"]
        for a in _alarms(template_json)
        if a["Namespace"] == "AWS/Lambda" and a["MetricName"] == metric
    ]
    assert sorted(watched, key=str) == sorted(
        ({"Ref": function(template_json, f.name)[0]} for f in manifest.FUNCTIONS), key=str
    )


def test_dashboard_shows_turns_functions_api_and_table(template_json: Template) -> None:
    _, dashboard = one(template_json, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for needle in ("ExecutionsFailed", "AWS/Lambda", "AWS/ApiGateway", "AWS/DynamoDB", "AWS/CloudFront"):
        assert needle in body, needle


def test_alarm_topic_is_optional(template_json: Template) -> None:
    # Given no alarmTopicArn in cdk.json, the alarms exist but have no actions (they still show on
    # the dashboard)
    alarms = _alarms(template_json)
    assert len(alarms) >= len(manifest.FUNCTIONS), "the stack should define its alarms"
    assert all("AlarmActions" not in a for a in alarms)
    by_prefix(template_json, "AWS::CloudWatch::Dashboard", "MonitoringDashboard")


# ---------------------------------------------------------------------------- pre-warm
@pytest.mark.parametrize("spec", [f for f in manifest.FUNCTIONS if f.prewarm], ids=lambda f: f.name)
def test_a_function_warms_exactly_its_manifest_targets(template_json: Template, spec: Any) -> None:
    # Given a function whose manifest entry names functions a turn needs after it
    _, fn = function(template_json, spec.name)
    targets = [function(template_json, name)[0] for name in spec.prewarm]
    # Then it knows their names (skyloop.prewarm reads SKYLOOP_PREWARM) ...
    names = fn["Properties"]["Environment"]["Variables"]["SKYLOOP_PREWARM"]
    joined: list[Any] = []
    for t in targets:
        joined += [",", {"Ref": t}] if joined else [{"Ref": t}]
    assert names == ({"Ref": targets[0]} if len(targets) == 1 else {"Fn::Join": ["", joined]})
    # ... and may invoke exactly them (no ":*" versions, no other function)
    invoke = statements_with(
        role_statements(template_json, _role_of(template_json, spec.name)), "lambda:InvokeFunction"
    )
    assert len(invoke) == 1
    resources = invoke[0]["Resource"]
    resources = resources if isinstance(resources, list) else [resources]
    assert sorted(resources, key=str) == sorted(({"Fn::GetAtt": [t, "Arn"]} for t in targets), key=str)
