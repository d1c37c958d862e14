"""The web console in the cloud: a private bucket behind the stack's CloudFront, uploaded at deploy.

Checked on the synthesized template (no AWS account): who may read the bucket, what the
upload does, and what the viewer-request function answers for each kind of path (run in node,
as CloudFront's JavaScript runtime would).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from infra import constants as C
from infra.constructs.edge import CONSOLE_ROUTES_JS
from tests.infra.helpers import by_prefix, one, resources

Template = dict[str, Any]


def _route(uri: str) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Node 20 comes with the machine; the infra tests need it)")
    event = {"request": {"uri": uri, "headers": {}}}
    script = f"{CONSOLE_ROUTES_JS}\nprocess.stdout.write(JSON.stringify(handler({json.dumps(event)})));"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True)
    return str(json.loads(out.stdout)["uri"])


@pytest.mark.parametrize(
    ("uri", "served"),
    [
        ("/", "/index.html"),
        ("/sessions/5fdc0123", "/index.html"),
        ("/inbox", "/index.html"),
        ("/oidc/callback", "/index.html"),
        ("/index.html", "/index.html"),
        ("/assets/index-D1SSc3EO.js", "/assets/index-D1SSc3EO.js"),
        ("/prices.json", "/prices.json"),
    ],
)
def test_client_routes_get_index_html_and_files_stay_files(uri: str, served: str) -> None:
    assert _route(uri) == served


def test_only_the_distribution_may_read_the_console_bucket(template_json: Template) -> None:
    bucket_id, bucket = by_prefix(template_json, "AWS::S3::Bucket", "ConsoleBucket")
    distribution_id, _ = one(template_json, "AWS::CloudFront::Distribution")
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    (policy,) = [
        p["Properties"]["PolicyDocument"]
        for p in resources(template_json, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    allows = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    cloudfront = [s for s in allows if s.get("Principal") == {"Service": "cloudfront.amazonaws.com"}]
    assert len(cloudfront) == 1
    assert cloudfront[0]["Action"] == "s3:GetObject"
    source = json.dumps(cloudfront[0]["Condition"]["StringEquals"]["AWS:SourceArn"])
    assert distribution_id in source
    # the other allows are the stack's own custom resource (emptying the bucket on delete)
    assert all("AWS" in s["Principal"] for s in allows if s is not cloudfront[0])
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Statement"]
    )


def test_the_upload_marks_files_no_cache_prunes_and_invalidates_the_edge(template_json: Template) -> None:
    bucket_id, _ = by_prefix(template_json, "AWS::S3::Bucket", "ConsoleBucket")
    distribution_id, _ = one(template_json, "AWS::CloudFront::Distribution")
    _, upload = one(template_json, "Custom::CDKBucketDeployment")
    props = upload["Properties"]
    assert props["DestinationBucketName"] == {"Ref": bucket_id}
    assert props["Prune"] is True
    assert props["SystemMetadata"] == {"cache-control": C.CONSOLE_PAGES_CACHE_CONTROL}
    assert props["DistributionId"] == {"Ref": distribution_id}
    assert props["DistributionPaths"] == ["/*"]


def test_synth_without_a_built_console_uploads_a_placeholder_and_says_so(synth: Any) -> None:
    # tests/infra synthesizes with SKYLOOP_CONSOLE_DIR pointing nowhere: synth works and warns
    assert synth.returncode == 0
    assert "the console is a placeholder page; run `make console`" in synth.stderr


def test_the_console_url_is_an_output(template_json: Template) -> None:
    distribution_id, _ = one(template_json, "AWS::CloudFront::Distribution")
    assert template_json["Outputs"]["ConsoleUrl"]["Value"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution_id, "DomainName"]}, "/"]]
    }
