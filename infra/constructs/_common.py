"""Small helpers shared by the constructs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_logs as logs

from infra import constants as C

if TYPE_CHECKING:
    from constructs import Construct

    from infra.config import StackConfig


def pascal(name: str) -> str:
    """``call_model`` -> ``CallModel``: a manifest name as a construct id."""
    return "".join(part.capitalize() for part in name.split("_"))


def removal_policy(config: StackConfig) -> cdk.RemovalPolicy:
    """Production keeps data and logs when the stack goes; dev stacks leave nothing behind."""
    return cdk.RemovalPolicy.RETAIN if config.prod else cdk.RemovalPolicy.DESTROY


def new_log_group(scope: Construct, construct_id: str, config: StackConfig) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        construct_id,
        retention=logs.RetentionDays[C.LOG_RETENTION],
        removal_policy=removal_policy(config),
    )
