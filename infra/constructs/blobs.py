"""Blobs: the S3 bucket beside the table (texts over 32 KB, session files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import constants as C
from infra.constructs._common import removal_policy

if TYPE_CHECKING:
    from infra.config import StackConfig


class BlobBucket(Construct):
    """Private (public access blocked, bucket-owner-enforced ownership: no ACLs), TLS only,
    S3-managed encryption; incomplete multipart uploads are aborted after a day.

    Like the table, ``prod`` keeps the bucket and its objects when the stack is deleted; dev
    stacks empty it (a custom resource deletes the objects) and delete it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,  # content-addressed keys: an object is never overwritten with other bytes
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-multipart-uploads",
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(C.BLOB_MULTIPART_ABORT_DAYS),
                )
            ],
            removal_policy=removal_policy(config),
            auto_delete_objects=not config.prod,
        )
