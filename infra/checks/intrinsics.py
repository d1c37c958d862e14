"""CloudFormation intrinsics rendered at their worst case: the longest string AWS could substitute.

A limit measured on a template (an environment's 4 KB, a policy's 10,240
characters, a name's 64) must hold for every account, region and stack the
template may be deployed to. Values only known at deploy time (``Ref``,
``Fn::GetAtt``, pseudo parameters) are rendered as strings of the right shape
at their documented maximum length:

* partition ``aws-us-gov`` (10 characters, the longest partition), region
  ``ap-southeast-4`` (14, the longest region names; ``infra.constants.NAME_MAX_REGION_LENGTH``),
  a 12-digit account, URL suffix ``amazonaws.com.cn``, a 128-character stack name;
* a resource's physical name is its literal name when the template sets one, else the
  service's maximum length (Lambda function 64, DynamoDB table 255, S3 bucket 63, log group 512,
  state machine 80, IAM role 64: the same limits as ``infra.checks.template.NAME_RULES``);
* identifiers of fixed shape at their length: API Gateway ids 10, CloudFront ids 14,
  a Cognito user pool id 55 and app client id 128 (the API maximums), a UUID 36.

``Fn::Split`` splits the rendered string for real, so selecting a segment of an ARN
or of the stack id's UUID is exact; a segment that does not exist in the rendering is
bounded by the whole string. Anything this module cannot bound raises ``Unestimable``:
add the type or attribute here (with its documented maximum) rather than guess.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

PARTITION = "aws-us-gov"
REGION = "ap-southeast-4"
ACCOUNT = "123456789012"
URL_SUFFIX = "amazonaws.com.cn"
STACK_NAME_MAX = 128
UUID = "00000000-0000-0000-0000-000000000000"
LAYER_VERSION = "99999999"
API_ID = 10  # API Gateway ids (APIs, routes, integrations, authorizers)
CLOUDFRONT_ID = 14  # distribution and origin access control ids
USER_POOL_ID_MAX = 55  # cognito-idp UserPoolIdType
CLIENT_ID_MAX = 128  # cognito-idp ClientIdType
IAM_ID_MAX = 128  # iam idType (RoleId)

NO_VALUE = object()  # Ref AWS::NoValue: the property is removed


class Unestimable(ValueError):
    """An intrinsic whose worst case is unknown here: add its type or attribute to this module."""


def filler(length: int) -> str:
    """A physical name of ``length`` characters (lowercase letters: valid in every name, no delimiters)."""
    return "x" * length


def arn(service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
    return f"arn:{PARTITION}:{service}:{REGION if region else ''}:{ACCOUNT if account else ''}:{resource}"


STACK_ID = arn("cloudformation", f"stack/{filler(STACK_NAME_MAX)}/{UUID}")
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": URL_SUFFIX,
    "AWS::StackName": filler(STACK_NAME_MAX),
    "AWS::StackId": STACK_ID,
}

Props = dict[str, Any]


class WorstCase:
    """Renders values of one template at their worst case."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, Any] = template.get("Resources", {})
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        self.mappings: dict[str, Any] = template.get("Mappings", {})

    # ---------------------------------------------------------------- entry points
    def render(self, value: Any) -> Any:
        """``value`` with every intrinsic replaced by its worst case (``AWS::NoValue`` removed)."""
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref" or key.startswith("Fn::"):
                    return self.intrinsic(key, arg)
            rendered = {k: self.render(v) for k, v in value.items()}
            return {k: v for k, v in rendered.items() if v is not NO_VALUE}
        if isinstance(value, list):
            return [v for v in (self.render(v) for v in value) if v is not NO_VALUE]
        return value

    def string(self, value: Any) -> str:
        """A scalar rendered as CloudFormation passes it on: strings as is, numbers and booleans as text."""
        rendered = self.render(value)
        if isinstance(rendered, str):
            return rendered
        if isinstance(rendered, bool):
            return "true" if rendered else "false"
        if isinstance(rendered, int | float):
            return str(rendered)
        raise Unestimable(f"not a string: {json.dumps(value)[:200]}")

    def strings(self, value: Any) -> list[str]:
        rendered = self.render(value)
        if not isinstance(rendered, list):
            raise Unestimable(f"not a list: {json.dumps(value)[:200]}")
        return [self.string(v) for v in rendered]

    # ---------------------------------------------------------------- functions
    def intrinsic(self, key: str, arg: Any) -> Any:
        handler = {
            "Ref": self.ref,
            "Fn::GetAtt": self.get_att,
            "Fn::Join": self.join,
            "Fn::Sub": self.sub,
            "Fn::Select": self.select,
            "Fn::Split": self.split,
            "Fn::If": self.if_,
            "Fn::Base64": lambda a: base64.b64encode(self.string(a).encode()).decode(),
            "Fn::GetAZs": lambda _a: [f"{REGION}{z}" for z in "abcdef"],
            "Fn::FindInMap": self.find_in_map,
            "Fn::ToJsonString": lambda a: json.dumps(self.render(a), separators=(",", ":")),
        }.get(key)
        if handler is None:
            raise Unestimable(f"{key} is not rendered by infra/checks/intrinsics.py")
        return handler(arg)

    def ref(self, name: Any) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters:
            return self.parameter(name)
        resource = self.resources.get(name)
        if resource is None:
            raise Unestimable(f"Ref {name}: no such resource, parameter or pseudo parameter")
        build = REF.get(resource["Type"])
        if build is None:
            raise Unestimable(f"Ref to a {resource['Type']} ({name}): add its return value to REF")
        return build(self, resource.get("Properties", {}))

    def parameter(self, name: str) -> str:
        spec = self.parameters[name]
        if spec.get("AllowedValues"):
            return max((str(v) for v in spec["AllowedValues"]), key=len)
        if "MaxLength" in spec:
            return filler(int(spec["MaxLength"]))
        raise Unestimable(f"Ref {name}: a parameter without AllowedValues or MaxLength")

    def get_att(self, arg: Any) -> str:
        logical_id, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
        resource = self.resources.get(logical_id)
        if resource is None:
            raise Unestimable(f"Fn::GetAtt {logical_id}: no such resource")
        build = GET_ATT.get((resource["Type"], attribute))
        if build is None:
            raise Unestimable(f"Fn::GetAtt {resource['Type']}.{attribute}: add it to GET_ATT")
        return build(self, resource.get("Properties", {}))

    def join(self, arg: list[Any]) -> str:
        delimiter, items = arg
        return str(delimiter).join(self.strings(items))

    def sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else arg

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return self.string(variables[name])
            if name in PSEUDO or name in self.parameters or name in self.resources:
                return self.string({"Ref": name})
            if "." in name:
                return self.get_att(name)
            raise Unestimable(f"Fn::Sub ${{{name}}}: nothing by that name")

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def select(self, arg: list[Any]) -> str:
        index, source = int(arg[0]), arg[1]
        if isinstance(source, dict) and "Fn::Split" in source:
            delimiter, text = source["Fn::Split"]
            whole = self.string(text)
            pieces = whole.split(delimiter)
            # A segment the rendering does not have is bounded by the whole string.
            return pieces[index] if index < len(pieces) else filler(len(whole))
        items = self.strings(source)
        if index >= len(items):
            raise Unestimable(f"Fn::Select {index} of {len(items)} items")
        return items[index]

    def split(self, arg: list[Any]) -> list[str]:
        delimiter, text = arg
        return self.string(text).split(delimiter)

    def if_(self, arg: list[Any]) -> Any:
        """Either branch may deploy: the longer one."""
        branches = [self.render(arg[1]), self.render(arg[2])]
        return max(branches, key=lambda v: -1 if v is NO_VALUE else len(json.dumps(v)))

    def find_in_map(self, arg: list[Any]) -> str:
        name, top, second = arg
        table = self.mappings.get(name)
        if table is None:
            raise Unestimable(f"Fn::FindInMap {name}: no such mapping")
        tops = [table[top]] if isinstance(top, str) else list(table.values())
        values = [str(t[second]) if isinstance(second, str) else str(v) for t in tops for v in t.values()]
        if not values:
            raise Unestimable(f"Fn::FindInMap {name}: nothing found")
        return max(values, key=len)


# ---------------------------------------------------------------- return values by resource type
def physical(props: Props, key: str, max_length: int, wc: WorstCase) -> str:
    """The literal name when the template sets one, else the service's longest name."""
    if key in props:
        return wc.string(props[key])
    return filler(max_length)


def _function_name(wc: WorstCase, p: Props) -> str:
    return physical(p, "FunctionName", 64, wc)


def _function_arn(wc: WorstCase, p: Props) -> str:
    return arn("lambda", f"function:{_function_name(wc, p)}")


def _layer_arn(wc: WorstCase, p: Props) -> str:
    return arn("lambda", f"layer:{physical(p, 'LayerName', 140, wc)}:{LAYER_VERSION}")


def _table(wc: WorstCase, p: Props) -> str:
    return physical(p, "TableName", 255, wc)


def _bucket(wc: WorstCase, p: Props) -> str:
    return physical(p, "BucketName", 63, wc)


def _state_machine_arn(wc: WorstCase, p: Props) -> str:
    return arn("states", f"stateMachine:{physical(p, 'StateMachineName', 80, wc)}")


def _role_arn(wc: WorstCase, p: Props) -> str:
    path = wc.string(p["Path"]) if "Path" in p else "/"
    return arn("iam", f"role{path}{physical(p, 'RoleName', 64, wc)}", region=False)


def _log_group(wc: WorstCase, p: Props) -> str:
    return physical(p, "LogGroupName", 512, wc)


def _topic_arn(wc: WorstCase, p: Props) -> str:
    return arn("sns", physical(p, "TopicName", 256, wc))


def _queue_name(wc: WorstCase, p: Props) -> str:
    return physical(p, "QueueName", 80, wc)


def _rule_arn(wc: WorstCase, p: Props) -> str:
    bus = f"{wc.string(p['EventBusName'])}/" if "EventBusName" in p else ""
    return arn("events", f"rule/{bus}{physical(p, 'Name', 64, wc)}")


def _event_bus(wc: WorstCase, p: Props) -> str:
    return physical(p, "Name", 256, wc)


def _cf_function_arn(wc: WorstCase, p: Props) -> str:
    return arn("cloudfront", f"function/{physical(p, 'Name', 64, wc)}", region=False)


def _user_pool_id(_wc: WorstCase, _p: Props) -> str:
    return f"{REGION}_{filler(USER_POOL_ID_MAX - len(REGION) - 1)}"


def _managed_policy_arn(wc: WorstCase, p: Props) -> str:
    path = wc.string(p["Path"]) if "Path" in p else "/"
    return arn("iam", f"policy{path}{physical(p, 'ManagedPolicyName', 128, wc)}", region=False)


def _fixed(length: int) -> Callable[[WorstCase, Props], str]:
    return lambda _wc, _p: filler(length)


Builder = Callable[[WorstCase, Props], str]

REF: dict[str, Builder] = {
    "AWS::Lambda::Function": _function_name,
    "AWS::Lambda::LayerVersion": _layer_arn,
    "AWS::DynamoDB::Table": _table,
    "AWS::S3::Bucket": _bucket,
    "AWS::StepFunctions::StateMachine": _state_machine_arn,
    "AWS::IAM::Role": lambda wc, p: physical(p, "RoleName", 64, wc),
    "AWS::IAM::ManagedPolicy": _managed_policy_arn,
    "AWS::Logs::LogGroup": _log_group,
    "AWS::SNS::Topic": _topic_arn,
    "AWS::Events::EventBus": _event_bus,  # Ref: the bus's name
    "AWS::SQS::Queue": lambda wc, p: f"https://sqs.{REGION}.{URL_SUFFIX}/{ACCOUNT}/{_queue_name(wc, p)}",
    "AWS::CloudWatch::Alarm": lambda wc, p: physical(p, "AlarmName", 255, wc),
    "AWS::CloudWatch::Dashboard": lambda wc, p: physical(p, "DashboardName", 255, wc),
    "AWS::ApiGatewayV2::Api": _fixed(API_ID),
    "AWS::ApiGatewayV2::Integration": _fixed(API_ID),
    "AWS::ApiGatewayV2::Route": _fixed(API_ID),
    "AWS::ApiGatewayV2::Authorizer": _fixed(API_ID),
    "AWS::ApiGatewayV2::Stage": lambda wc, p: physical(p, "StageName", 128, wc),
    "AWS::CloudFront::Distribution": _fixed(CLOUDFRONT_ID),
    "AWS::CloudFront::Function": _cf_function_arn,
    "AWS::CloudFront::OriginAccessControl": _fixed(CLOUDFRONT_ID),
    "AWS::Cognito::UserPool": _user_pool_id,
    "AWS::Cognito::UserPoolClient": _fixed(CLIENT_ID_MAX),
    "AWS::Scheduler::ScheduleGroup": lambda wc, p: physical(p, "Name", 64, wc),
}

GET_ATT: dict[tuple[str, str], Builder] = {
    ("AWS::Lambda::Function", "Arn"): _function_arn,
    ("AWS::Lambda::LayerVersion", "LayerVersionArn"): _layer_arn,
    ("AWS::Lambda::Url", "FunctionArn"): lambda wc, p: (
        wc.string(p["TargetFunctionArn"]) + (f":{wc.string(p['Qualifier'])}" if "Qualifier" in p else "")
    ),
    ("AWS::Lambda::Url", "FunctionUrl"): lambda _wc, _p: f"https://{filler(32)}.lambda-url.{REGION}.on.aws/",
    ("AWS::DynamoDB::Table", "Arn"): lambda wc, p: arn("dynamodb", f"table/{_table(wc, p)}"),
    ("AWS::DynamoDB::Table", "StreamArn"): lambda wc, p: arn(
        "dynamodb", f"table/{_table(wc, p)}/stream/2000-01-01T00:00:00.000"
    ),
    ("AWS::S3::Bucket", "Arn"): lambda wc, p: arn("s3", _bucket(wc, p), region=False, account=False),
    ("AWS::S3::Bucket", "DomainName"): lambda wc, p: f"{_bucket(wc, p)}.s3.{URL_SUFFIX}",
    ("AWS::S3::Bucket", "RegionalDomainName"): lambda wc, p: f"{_bucket(wc, p)}.s3.{REGION}.{URL_SUFFIX}",
    ("AWS::StepFunctions::StateMachine", "Arn"): _state_machine_arn,
    ("AWS::StepFunctions::StateMachine", "Name"): lambda wc, p: physical(p, "StateMachineName", 80, wc),
    ("AWS::IAM::Role", "Arn"): _role_arn,
    ("AWS::IAM::Role", "RoleId"): _fixed(IAM_ID_MAX),
    ("AWS::Logs::LogGroup", "Arn"): lambda wc, p: arn("logs", f"log-group:{_log_group(wc, p)}:*"),
    ("AWS::SNS::Topic", "TopicArn"): _topic_arn,
    ("AWS::SNS::Topic", "TopicName"): lambda wc, p: physical(p, "TopicName", 256, wc),
    ("AWS::SQS::Queue", "Arn"): lambda wc, p: arn("sqs", _queue_name(wc, p)),
    ("AWS::SQS::Queue", "QueueName"): _queue_name,
    ("AWS::Events::Rule", "Arn"): _rule_arn,
    ("AWS::Events::EventBus", "Arn"): lambda wc, p: arn("events", f"event-bus/{_event_bus(wc, p)}"),
    ("AWS::Events::EventBus", "Name"): _event_bus,
    # a custom code interpreter's id is its name, "-" and 10 characters; its ARN names it under
    # code-interpreter-custom/ (both as AgentCore shows them; the figure is this stack's assumption)
    ("AWS::BedrockAgentCore::CodeInterpreterCustom", "CodeInterpreterId"): lambda wc, p: (
        f"{physical(p, 'Name', 48, wc)}-{filler(10)}"
    ),
    ("AWS::BedrockAgentCore::CodeInterpreterCustom", "CodeInterpreterArn"): lambda wc, p: arn(
        "bedrock-agentcore", f"code-interpreter-custom/{physical(p, 'Name', 48, wc)}-{filler(10)}"
    ),
    ("AWS::Scheduler::ScheduleGroup", "Arn"): lambda wc, p: arn(
        "scheduler", f"schedule-group/{physical(p, 'Name', 64, wc)}"
    ),
    ("AWS::CloudWatch::Alarm", "Arn"): lambda wc, p: arn(
        "cloudwatch", f"alarm:{physical(p, 'AlarmName', 255, wc)}"
    ),
    ("AWS::ApiGatewayV2::Api", "ApiId"): _fixed(API_ID),
    ("AWS::ApiGatewayV2::Api", "ApiEndpoint"): lambda _wc, _p: (
        f"https://{filler(API_ID)}.execute-api.{REGION}.{URL_SUFFIX}"
    ),
    ("AWS::CloudFront::Distribution", "Id"): _fixed(CLOUDFRONT_ID),
    ("AWS::CloudFront::Distribution", "DomainName"): lambda _wc, _p: f"d{filler(13)}.cloudfront.net",
    ("AWS::CloudFront::Function", "FunctionARN"): _cf_function_arn,
    ("AWS::CloudFront::OriginAccessControl", "Id"): _fixed(CLOUDFRONT_ID),
    ("AWS::Cognito::UserPool", "Arn"): lambda wc, p: arn("cognito-idp", f"userpool/{_user_pool_id(wc, p)}"),
    ("AWS::Cognito::UserPool", "UserPoolId"): _user_pool_id,
    ("AWS::Cognito::UserPool", "ProviderName"): lambda wc, p: (
        f"cognito-idp.{REGION}.{URL_SUFFIX}/{_user_pool_id(wc, p)}"
    ),
    ("AWS::Cognito::UserPool", "ProviderURL"): lambda wc, p: (
        f"https://cognito-idp.{REGION}.{URL_SUFFIX}/{_user_pool_id(wc, p)}"
    ),
    ("AWS::Cognito::UserPoolClient", "ClientId"): _fixed(CLIENT_ID_MAX),
}
