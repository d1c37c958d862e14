"""Physical names set in a template, against each service's length and character rules.

A name CloudFormation generates always fits; a name the stack sets (a literal, or
built from ``Ref``/``Fn::Join``: rendered at its worst case by
``infra.checks.intrinsics``) fails the deploy when it is too long. Every resource
type the stack uses is listed in ``NAME_RULES`` (with its name properties, possibly
none); an unlisted type that sets a ``...Name`` property is a finding, so the next
type added to the stack gets its limit written down here.

Limits are the services' API constraints (the same figures as botocore's service
models; ``tests/infra/test_deploy_limits.py`` compares them):
Lambda CreateFunction/PublishLayerVersion, IAM ``reference_iam-quotas.html``,
CloudWatch Logs CreateLogGroup/PutQueryDefinition, Step Functions CreateStateMachine,
DynamoDB ``ServiceQuotas.html#limits-naming-rules``, S3 ``bucketnamingrules.html``,
CloudFront CreateFunction/CreateOriginAccessControl, EventBridge PutRule, EventBridge Scheduler
CreateScheduleGroup, SQS
``quotas-queues.html``, SNS CreateTopic, CloudWatch PutMetricAlarm/PutDashboard,
API Gateway v2 CreateApi/CreateStage/CreateAuthorizer, Cognito CreateUserPool/CreateUserPoolClient.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from infra.checks.findings import Finding
from infra.checks.intrinsics import Unestimable, WorstCase


@dataclass(frozen=True)
class NameRule:
    path: str  # "Name", "OriginAccessControlConfig.Name", "GlobalSecondaryIndexes[].IndexName"
    min_length: int
    max_length: int
    pattern: str | None = None


_IAM = r"[\w+=,.@-]+"
NAME_RULES: dict[str, tuple[NameRule, ...]] = {
    "AWS::Lambda::Function": (NameRule("FunctionName", 1, 64, r"[a-zA-Z0-9_-]+"),),
    "AWS::Lambda::LayerVersion": (NameRule("LayerName", 1, 140, r"[a-zA-Z0-9_-]+"),),
    "AWS::Lambda::Permission": (),  # FunctionName there names the target function
    "AWS::Lambda::EventSourceMapping": (),  # FunctionName there names the target function too
    "AWS::SQS::QueuePolicy": (),  # no name of its own
    "AWS::Lambda::Url": (),
    "AWS::IAM::Role": (NameRule("RoleName", 1, 64, _IAM), NameRule("Path", 1, 512, r"/|/[!-~]+/")),
    "AWS::IAM::Policy": (NameRule("PolicyName", 1, 128, _IAM),),
    "AWS::IAM::ManagedPolicy": (NameRule("ManagedPolicyName", 1, 128, _IAM),),
    "AWS::Logs::LogGroup": (NameRule("LogGroupName", 1, 512, r"[.\-_/#A-Za-z0-9]+"),),
    "AWS::Logs::QueryDefinition": (NameRule("Name", 1, 255),),
    "AWS::StepFunctions::StateMachine": (
        NameRule("StateMachineName", 1, 80, r"[^\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]+"),
    ),
    "AWS::DynamoDB::Table": (
        NameRule("TableName", 3, 255, r"[a-zA-Z0-9_.-]+"),
        NameRule("GlobalSecondaryIndexes[].IndexName", 3, 255, r"[a-zA-Z0-9_.-]+"),
        NameRule("LocalSecondaryIndexes[].IndexName", 3, 255, r"[a-zA-Z0-9_.-]+"),
    ),
    "AWS::S3::Bucket": (NameRule("BucketName", 3, 63, r"[a-z0-9][a-z0-9.-]*[a-z0-9]"),),
    "AWS::S3::BucketPolicy": (),
    "AWS::CloudFront::Function": (NameRule("Name", 1, 64, r"[a-zA-Z0-9_-]+"),),
    "AWS::CloudFront::OriginAccessControl": (NameRule("OriginAccessControlConfig.Name", 1, 64),),
    "AWS::CloudFront::ResponseHeadersPolicy": (
        NameRule("ResponseHeadersPolicyConfig.Name", 1, 128, r"[a-zA-Z0-9_-]+"),
    ),
    "Custom::CDKBucketDeployment": (),  # the web console's upload (aws_s3_deployment): no name
    "AWS::CloudFront::Distribution": (),
    "AWS::Events::Rule": (NameRule("Name", 1, 64, r"[.\-_A-Za-z0-9]+"),),
    "AWS::Events::EventBus": (NameRule("Name", 1, 256, r"[/.\-_A-Za-z0-9]+"),),
    "AWS::Scheduler::ScheduleGroup": (NameRule("Name", 1, 64, r"[0-9a-zA-Z\-_.]+"),),
    # bedrock-agentcore-control CreateCodeInterpreter: [a-zA-Z][a-zA-Z0-9_]{0,47}
    "AWS::BedrockAgentCore::CodeInterpreterCustom": (NameRule("Name", 1, 48, r"[a-zA-Z][a-zA-Z0-9_]*"),),
    "AWS::SQS::Queue": (NameRule("QueueName", 1, 80, r"[A-Za-z0-9_-]+(\.fifo)?"),),
    "AWS::SNS::Topic": (NameRule("TopicName", 1, 256, r"[A-Za-z0-9_-]+(\.fifo)?"),),
    "AWS::CloudWatch::Alarm": (NameRule("AlarmName", 1, 255),),
    "AWS::CloudWatch::Dashboard": (NameRule("DashboardName", 1, 255, r"[A-Za-z0-9_-]+"),),
    "AWS::ApiGatewayV2::Api": (NameRule("Name", 1, 128),),
    "AWS::ApiGatewayV2::Stage": (NameRule("StageName", 1, 128),),
    "AWS::ApiGatewayV2::Authorizer": (NameRule("Name", 1, 128),),
    "AWS::ApiGatewayV2::Integration": (),
    "AWS::ApiGatewayV2::Route": (),
    "AWS::Cognito::UserPool": (NameRule("UserPoolName", 1, 128, r"[\w\s+=,.@-]+"),),
    "AWS::Cognito::UserPoolClient": (NameRule("ClientName", 1, 128, r"[\w\s+=,.@-]+"),),
    "AWS::Cognito::UserPoolDomain": (NameRule("Domain", 1, 63, r"[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?"),),
}


def values_at(props: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """``(where, value)`` for ``a.b`` and ``list[].key`` paths inside a resource's properties."""
    found: list[tuple[str, Any]] = [("", props)]
    for part in path.split("."):
        many = part.endswith("[]")
        key = part.removesuffix("[]")
        step: list[tuple[str, Any]] = []
        for where, node in found:
            if not isinstance(node, dict) or key not in node:
                continue
            inner = f"{where}.{key}" if where else key
            if many and isinstance(node[key], list):
                step += [(f"{inner}[{i}]", item) for i, item in enumerate(node[key])]
            elif not many:
                step.append((inner, node[key]))
        found = step
    return found


def check_names(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out: list[Finding] = []
    for logical_id, resource in template.get("Resources", {}).items():
        kind, props = resource.get("Type", ""), resource.get("Properties", {})
        if kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource":
            continue  # a custom resource's properties are its handler's input
        rules = NAME_RULES.get(kind)
        if rules is None:
            named = sorted(k for k in props if k.endswith("Name"))
            if named:
                out.append(
                    Finding(
                        rule="name/unknown-type",
                        resource=logical_id,
                        message=f"{kind} sets {', '.join(named)}: add the type's name limits to "
                        "NAME_RULES in infra/checks/names.py",
                    )
                )
            continue
        for rule in rules:
            for where, value in values_at(props, rule.path):
                out += _check_name(logical_id, kind, where, value, rule, wc)
    return out


def _check_name(
    logical_id: str, kind: str, where: str, value: Any, rule: NameRule, wc: WorstCase
) -> list[Finding]:
    try:
        name = wc.string(value)
    except Unestimable as exc:
        return [Finding(rule="estimate/unknown", resource=logical_id, message=f"{where}: {exc}")]
    literal = isinstance(value, str)
    shown = name if literal else f"{name} (worst case of {value})"
    out = []
    if not rule.min_length <= len(name) <= rule.max_length:
        out.append(
            Finding(
                rule="name/length",
                resource=logical_id,
                message=f"{kind} {where} {shown!r} is {len(name)} characters; "
                f"{rule.min_length}-{rule.max_length} allowed",
            )
        )
    if rule.pattern and not re.fullmatch(rule.pattern, name):
        out.append(
            Finding(
                rule="name/pattern",
                resource=logical_id,
                message=f"{kind} {where} {shown!r} does not match {rule.pattern}",
            )
        )
    return out
