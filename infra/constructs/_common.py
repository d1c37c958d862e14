"""Small helpers shared by the constructs."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
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


def new_log_group(
    scope: Construct, construct_id: str, config: StackConfig, *, name: str | None = None
) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=logs.RetentionDays[C.LOG_RETENTION],
        removal_policy=removal_policy(config),
    )


def regional_name(scope: Construct, purpose: str, max_length: int) -> str:
    """``<stack>-<purpose>-<region>``: a name for a resource that is global to the account.

    The stack name is unique per account and region, so the pair is unique per account. The
    region may be a token (an environment-agnostic stack): the length budget assumes the
    longest region name. A stack name too long for the budget is cut and given a hash of
    the whole name, so two long names still differ.
    """
    stack = cdk.Stack.of(scope)
    budget = max_length - len(purpose) - 2 - C.NAME_MAX_REGION_LENGTH
    name = stack.stack_name
    if len(name) > budget:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: budget - len(digest) - 1]}-{digest}"
    return f"{name}-{purpose}-{stack.region}"


def stack_instance_suffix() -> str:
    """The first 8 hex digits of the stack id's UUID, resolved at deploy time.

    Different for every stack created, even one re-created under the same name and region.
    """
    uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Aws.STACK_ID))
    return cdk.Fn.select(0, cdk.Fn.split("-", uuid))


# ARNs one statement of a role's default (inline) policy may list, and per customer managed policy
# beyond that: a role's inline policies share 10,240 characters and a managed policy holds 6,144
# (white space not counted; infra/checks/template.py), and an ARN of a model or function is ~100.
INLINE_ARNS_MAX = 40
MANAGED_ARNS_PER_POLICY = 40
MANAGED_POLICIES_MAX = 8  # of IAM's 10 per role, two left for the operator


def grant_arns(
    scope: Construct, construct_id: str, role: iam.IRole, actions: list[str], arns: list[str]
) -> None:
    """Grant ``actions`` on exactly ``arns``: in the role's own policy when they are few, else in customer
    managed policies of at most :data:`MANAGED_ARNS_PER_POLICY` each.

    CDK moves a role's default policy into a single "overflow" managed policy
    when it outgrows the inline limit, and that one policy then passes IAM's
    6,144 characters (a long ``bedrockModelArns`` list did), so the deploy fails.
    """
    if len(arns) <= INLINE_ARNS_MAX:
        role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=arns))
        return
    chunks = [arns[i : i + MANAGED_ARNS_PER_POLICY] for i in range(0, len(arns), MANAGED_ARNS_PER_POLICY)]
    if len(chunks) > MANAGED_POLICIES_MAX:
        raise ValueError(
            f"{construct_id}: {len(arns)} ARNs need {len(chunks)} managed policies on one role; at most "
            f"{MANAGED_POLICIES_MAX * MANAGED_ARNS_PER_POLICY} ARNs can be granted (list fewer, or use "
            "inference profiles that cover several models)"
        )
    for n, chunk in enumerate(chunks):
        iam.ManagedPolicy(
            scope,
            f"{construct_id}{n}",
            roles=[role],
            statements=[iam.PolicyStatement(actions=actions, resources=chunk)],
        )
