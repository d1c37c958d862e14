"""What the local stack's processes load, kept to what they use (see bench/README.md, "Where the memory goes")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import boto3
from moto import mock_aws

from skyloop.store.blobs import S3Blobs


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_step_functions_run_without_moto_ec2() -> None:
    # moto's Batch integration would load EC2's instance tables (~100 MB) into the stack's process
    out = run(
        """
        import sys
        from skyloop.local import moto_stepfunctions
        moto_stepfunctions.install()
        import moto.stepfunctions.parser.asl.parse.preprocessor  # the whole interpreter, every integration
        print("moto.ec2" in sys.modules, "moto.batch.utils" in sys.modules)
        """
    )
    assert out == "False True"


def test_the_s3_client_is_built_on_the_first_blob_only() -> None:
    built: list[object] = []
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="blobs")

        def make() -> object:
            built.append(s3)
            return s3

        blobs = S3Blobs(make, "blobs")
        assert built == []
        blobs.put("k", b"v")
        assert blobs.get("k") == b"v"
    assert built == [s3]


def test_a_state_machine_keeps_only_its_newest_finished_executions() -> None:
    # moto keeps every execution and its history, and scans them all on every start
    out = run(
        """
        import json, time, boto3
        from moto import mock_aws
        from skyloop.local import moto_stepfunctions
        config = {"stepfunctions": {"execute_state_machine": True}}
        with mock_aws(config=config):
            undo = moto_stepfunctions.bound_executions(keep=3)
            sfn = boto3.client("stepfunctions", region_name="us-east-1")
            definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
            arn = sfn.create_state_machine(
                name="m", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/r"
            )["stateMachineArn"]
            for i in range(10):
                sfn.start_execution(stateMachineArn=arn, name=f"e{i}")
                time.sleep(0.2)  # each one finishes before the next starts
            names = [e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]]
            undo()
        print(sorted(names))
        """
    )
    assert out == "['e6', 'e7', 'e8', 'e9']"


def test_moto_hosts_keep_no_aws_managed_policies() -> None:
    # moto.iam imports a 4.7 MB string of every AWS-managed policy; any request moto serves imports moto.iam
    out = run(
        """
        import sys, boto3
        from skyloop.local import moto_core
        moto_core.lighten()
        from moto import mock_aws
        from skyloop.local import lambda_hook  # imports moto.iam.models, as the stack does
        with mock_aws():
            iam = boto3.client("iam", region_name="us-east-1")
            iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")
            roles = [r["RoleName"] for r in iam.list_roles()["Roles"]]
        data = sys.modules["moto.iam.aws_managed_policies"].aws_managed_policies_data
        print(len(data), roles)
        """
    )
    assert out == "2 ['r']"


def test_moto_hosts_do_not_keep_replaced_items() -> None:
    # moto's BaseModel kept every instance ever made (each put's item image) for its dashboard
    out = run(
        """
        import gc, boto3
        from skyloop.local import moto_core
        moto_core.lighten()
        from moto import mock_aws
        from moto.dynamodb.models.dynamo_type import Item
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            ddb.create_table(
                TableName="t",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            for i in range(50):
                ddb.put_item(TableName="t", Item={"pk": {"S": "k"}, "n": {"N": str(i)}})
            gc.collect()
            live = sum(isinstance(o, Item) for o in gc.get_objects())
            got = ddb.get_item(TableName="t", Key={"pk": {"S": "k"}})["Item"]["n"]["N"]
        print(live, len(Item.instances_tracked), got)
        """
    )
    assert out == "1 0 49"


def test_every_process_hosting_moto_lightens_itself_first() -> None:
    # the two processes that host moto: the stack's (dev.start) and the DynamoDB process (its main)
    import inspect

    from skyloop.local import dev, dynamodb_process

    for function in (dev.start, dynamodb_process.main):
        source = inspect.getsource(function)
        assert "moto_core.lighten()" in source, function
        assert source.index("moto_core.lighten()") < source.index("from moto import"), function


def test_the_dynamodb_process_drops_botocores_parsed_files_and_still_serves() -> None:
    # moto lists regions from endpoints.json once, when a backend is built; the DynamoDB process then
    # frees it (and whatever else botocore parsed) rather than keep it for its lifetime
    out = run(
        """
        import gc, json
        from skyloop.local import moto_core
        moto_core.lighten()
        from moto import mock_aws
        from skyloop import aws_session
        from skyloop.local import moto_dynamodb
        from skyloop.local.aws_dispatch import dispatch_aws
        mock_aws().start()
        moto_dynamodb.install()
        moto_core.release_botocore_data("us-east-1")
        url = "https://dynamodb.us-east-1.amazonaws.com/"
        def call(op, body):
            headers = [("X-Amz-Target", f"DynamoDB_20120810.{op}"), ("Content-Type", "application/x-amz-json-1.0")]
            return dispatch_aws("POST", url, headers, json.dumps(body).encode())
        table = {"TableName": "t", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                 "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                 "BillingMode": "PAY_PER_REQUEST"}
        assert call("CreateTable", table)[0] == 200
        assert call("PutItem", {"TableName": "t", "Item": {"pk": {"S": "a"}}})[0] == 200
        status, _, body = call("GetItem", {"TableName": "t", "Key": {"pk": {"S": "a"}}})
        cached = [key for loader in aws_session._loaders.values() for key in loader._cache]
        print(status, json.loads(body)["Item"], [k for k in cached if "endpoints" in k])
        """
    )
    assert out == "200 {'pk': {'S': 'a'}} []"
