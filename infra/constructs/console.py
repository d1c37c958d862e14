"""The web console's files: a private S3 bucket that CloudFront reads through Origin Access Control.

``console/dist`` (``make console``) is uploaded by ``BucketDeployment`` (its own Lambda runs
``aws s3 sync``; no Docker at synth): hashed ``assets/`` cached for a year (the edge's
``/assets/*`` behavior), everything else revalidated on every load, and the distribution's
cache invalidated on each deploy. When
``console/dist`` is missing, a placeholder page says how to build it and synth warns, as the
dependency layer does (``infra/assets.py``).
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra import constants as C
from skyloop import console

if TYPE_CHECKING:
    from aws_cdk import aws_cloudfront as cloudfront

PLACEHOLDER_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skyloop console</title></head>
<body><main><h1>The skyloop console was not built</h1>
<p>Run <code>make console</code> (or <code>make synth</code>, which builds it) and deploy again.</p>
</main></body></html>
"""


@cache
def console_dist() -> tuple[Path, bool]:
    """``(folder, built)``: ``console/dist`` when built, else a placeholder page (``built`` False)."""
    built = console.console_dir()
    if (built / "index.html").is_file():
        return built, True
    placeholder = Path(tempfile.mkdtemp(prefix="skyloop-console-"))
    atexit.register(shutil.rmtree, placeholder, ignore_errors=True)
    (placeholder / "index.html").write_text(PLACEHOLDER_HTML)
    print(
        f"warning: {built} is missing: the console is a placeholder page; run `make console` before deploying",
        file=sys.stderr,
    )
    return placeholder, False


class ConsoleSite(Construct):
    """The bucket, created before the distribution (its origin); :meth:`deploy` uploads the files after."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        # Build output, not data: a deleted stack takes it along (prod too); the next deploy re-uploads.
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            auto_delete_objects=True,
        )
        self.dist, self.built = console_dist()

    def deploy(self, distribution: cloudfront.IDistribution) -> None:
        """Upload ``console/dist`` and invalidate the distribution's cache.

        Every object is stored ``no-cache`` (index.html and prices.json are revalidated on each
        load); the edge's ``/assets/*`` behavior overrides that with a year's immutable caching,
        since Vite names those files by their content. One deployment, so one handler and layer.
        """
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Files",
            sources=[s3deploy.Source.asset(str(self.dist))],
            destination_bucket=self.bucket,
            prune=True,
            memory_limit=C.CONSOLE_DEPLOY_MEMORY_MB,
            cache_control=[s3deploy.CacheControl.from_string(C.CONSOLE_PAGES_CACHE_CONTROL)],
            distribution=distribution,
            distribution_paths=["/*"],
        )
