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
