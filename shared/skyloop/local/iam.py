"""IAM on the local stack: every AWS call a function makes is checked against its deployed policy.

moto serves any call from anyone, so a function calling what its role does
not allow (``lifecycle_events`` updating a delivery row with only
``PutItem`` granted) works in ``skyloop dev`` and every suite, then fails on
AWS. This module closes that gap for the identity-based policies the stack
deploys:

* **The policies** are the synthesized template's, exported per function by
  ``infra/iam_export.py`` into ``iam_policies.json`` beside this module (a test
  fails when the file is not what the stack synthesizes). Their intrinsics
  (``Fn::GetAtt [Table, Arn]``, ``Fn::Join``, ``Fn::Select``...) are resolved
  against the local stack's own resources, found through the environment
  variables the stack gives its functions (``SKYLOOP_TABLE_NAME`` is the
  table's ``Ref`` there and here) and the manifest's function names.
* **The caller** is :func:`skyloop.function_identity.current`: a Lambda worker
  process's function, or the function that in-process code runs as. A call
  with no function (the stack bootstrapping itself, a test's own setup) and a
  function that is not skyloop's (a user's Lambda tool, whose role is the
  user's) are not checked, nor are services the local stack does not serve.
* **Model calls to Amazon Bedrock** (``bedrock-runtime``: the ``bedrock-converse``
  harness) leave the local stack signed with your own credentials, so AWS checks
  those, not the function's role: they are checked here too, against the
  function's grants (``bedrock:InvokeModel*`` on the model's ARN), when they go to
  an AWS endpoint (a mock model's URL is no IAM call). The turn's grants are the
  deploy context's ``bedrockModelArns`` (``context_grants`` in the export), read
  from the project's ``cdk.json`` as ``cdk deploy`` reads it, or from
  ``SKYLOOP_LOCAL_IAM_CONTEXT`` (a JSON object: what ``-c`` would pass).
* **The request** each call makes of IAM is modeled per operation as the
  Service Authorization Reference gives it: the action (``Invoke`` is
  ``lambda:InvokeFunction``, ``ListObjectsV2`` is ``s3:ListBucket`` with
  ``s3:prefix``), the resource ARN (a table or one of its indexes, an object
  key, a schedule in its group...), one request per item of a transaction or a
  batch delete, ``iam:PassRole`` with ``iam:PassedToService`` for the role a
  schedule is given. Task-token calls (``SendTaskSuccess``) are checked against
  the stack's state machine: the token names it only inside AWS.
* **The decision** is IAM's for one account: an explicit ``Deny`` wins, else an
  ``Allow`` whose action, resource and conditions all match, else denied.
  Wildcards match as IAM's do (``*``/``?``, actions case-insensitive, ARNs per
  segment). Conditions: the ``String*``, ``Arn*``, ``Bool`` and ``Null``
  operators with ``...IfExists`` and ``ForAnyValue:``/``ForAllValues:``.

A refused call raises ``ClientError`` with AWS's shape (``AccessDeniedException``,
or ``AccessDenied`` for S3 and SQS, with the service's HTTP status: ``denial_status``; "User: arn:aws:sts::...:assumed-role/... is not
authorized to perform: <action> on resource: <arn> because no identity-based
policy allows the <action> action") before anything is sent. ``SKYLOOP_LOCAL_IAM=off``
turns the check off (to tell an IAM refusal from another failure while debugging);
``SKYLOOP_LOCAL_IAM_POLICIES=<file>`` checks against another export (tests plant a
missing grant with it).
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyloop import function_identity

POLICIES_PATH = Path(__file__).with_name("iam_policies.json")
CONTEXT_ENV = "SKYLOOP_LOCAL_IAM_CONTEXT"  # {"bedrockModelArns": [...]}: the deploy context, over cdk.json's
ENV_SWITCH = "SKYLOOP_LOCAL_IAM"
POLICIES_ENV = "SKYLOOP_LOCAL_IAM_POLICIES"
EVENT = "before-parameter-build"
PARTITION = "aws"
DEFAULT_ACCOUNT = "123456789012"  # moto's default account, the local stack's
FUNCTION_PREFIX = "skyloop-"  # skyloop.local.handlers.FUNCTION_PREFIX (the local functions' names)
# botocore service name -> IAM service prefix, for the services the local stack serves
SERVICE_PREFIX = {
    "dynamodb": "dynamodb",
    "s3": "s3",
    "stepfunctions": "states",
    "lambda": "lambda",
    "secretsmanager": "secretsmanager",
    "scheduler": "scheduler",
    "events": "events",
    "sqs": "sqs",
    "iam": "iam",
    "apigatewaymanagementapi": "execute-api",
    "bedrock-agentcore": "bedrock-agentcore",  # the code interpreters of hosted environments
}
INTERPRETER = "AWS::BedrockAgentCore::CodeInterpreterCustom"
# Settings whose defaults the local stack runs with when its environment does not set them
ENV_DEFAULTS = {"SKYLOOP_SECRETS_PREFIX": "skyloop/agents", "SKYLOOP_TOOL_SECRETS_PREFIX": "skyloop/tools"}
SECRET_SUFFIX = "-AbCdEf"
DECISIONS_KEPT = (
    4096  # remembered per policy  # Secrets Manager appends "-" and 6 characters to every secret's ARN
)


class Unresolved(LookupError):
    """A policy names a resource the local stack does not have: the statement matches nothing here."""


@dataclass(frozen=True)
class Request:
    """One authorization IAM makes for a call (a call may make several)."""

    action: str
    resource: str
    context: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------ policies and their intrinsics
def policies() -> dict[str, Any]:
    """The deployed policies (``SKYLOOP_LOCAL_IAM_POLICIES`` names another file: tests plant a missing grant)."""
    return _load(os.environ.get(POLICIES_ENV) or str(POLICIES_PATH))


@functools.cache
def _load(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _account() -> str:
    return os.environ.get("MOTO_ACCOUNT_ID") or DEFAULT_ACCOUNT


def _arn(kind: str, name: str, region: str, account: str) -> str:
    """A resource's ARN from its ``Ref`` (its name; a queue's URL; a state machine's ARN)."""
    if kind == "AWS::DynamoDB::Table":
        return f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{name}"
    if kind == "AWS::S3::Bucket":
        return f"arn:{PARTITION}:s3:::{name}"
    if kind == "AWS::Lambda::Function":
        return f"arn:{PARTITION}:lambda:{region}:{account}:function:{name}"
    if kind == "AWS::Events::EventBus":
        return f"arn:{PARTITION}:events:{region}:{account}:event-bus/{name}"
    if kind == "AWS::Scheduler::ScheduleGroup":
        return f"arn:{PARTITION}:scheduler:{region}:{account}:schedule-group/{name}"
    if kind == "AWS::SQS::Queue":
        return queue_arn(name, region)
    if kind == "AWS::IAM::Role":
        return f"arn:{PARTITION}:iam::{account}:role/{name}"
    if kind == "AWS::StepFunctions::StateMachine":
        return name
    if kind == INTERPRETER:  # its "Ref" here is its id (what the functions' environment names)
        return interpreter_arn(name, region, account)
    raise Unresolved(f"no ARN rule for {kind}")


def interpreter_arn(identifier: str, region: str, account: str) -> str:
    """A custom code interpreter's ARN (``code-interpreter-custom/<id>``, as AgentCore shows it)."""
    if identifier.startswith("arn:"):
        return identifier
    return f"arn:{PARTITION}:bedrock-agentcore:{region}:{account}:code-interpreter-custom/{identifier}"


def _ref_from(kind: str, attribute: str, value: str) -> str:
    """A resource's ``Ref`` from the attribute its environment variable holds."""
    if attribute == "Ref" or (kind == INTERPRETER and attribute == "CodeInterpreterId"):
        return value
    if attribute == "Arn":
        if kind == "AWS::IAM::Role":
            return value.rsplit("/", 1)[-1]
        if kind == "AWS::StepFunctions::StateMachine":
            return value
        if kind == "AWS::Lambda::Function":
            return value.split(":")[6]
    raise Unresolved(f"cannot tell {kind}'s Ref from its {attribute}")


class Resolver:
    """CloudFormation intrinsics with the local stack's values (its environment, its functions' names)."""

    def __init__(self, resources: dict[str, Any], env: dict[str, str], region: str, account: str) -> None:
        self.resources = resources
        self.env = env
        self.region = region
        self.account = account

    def _env(self, name: str) -> str:
        value = self.env.get(name) or ENV_DEFAULTS.get(name)
        if not value:
            raise Unresolved(f"${name} is not set")
        return value

    def ref(self, logical_id: str) -> str:
        pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if logical_id in pseudo:
            return pseudo[logical_id]
        locator = self.resources.get(logical_id)
        if locator is None:
            raise Unresolved(logical_id)
        if "function" in locator:
            return FUNCTION_PREFIX + locator["function"]
        source, value = self._source(locator)
        if "pattern" in source:  # a URL joined around the resource's Ref
            found = re.fullmatch(source["pattern"], value)
            if found is None:
                raise Unresolved(f"${source['env']}={value!r} is not the stack's shape")
            return found.group("ref")
        return _ref_from(locator["type"], source["attribute"], value)

    def _source(self, locator: dict[str, Any]) -> tuple[dict[str, str], str]:
        """The first of the variables naming a resource that is set here, and its value."""
        for source in locator["from"]:
            value = self.env.get(source["env"]) or ENV_DEFAULTS.get(source["env"])
            if value:
                return source, value
        raise Unresolved(f"none of {[s['env'] for s in locator['from']]} is set")

    def attribute(self, logical_id: str, attribute: str) -> str:
        locator = self.resources.get(logical_id)
        if locator is None:
            raise Unresolved(f"{logical_id}.{attribute}")
        for source in locator.get("from", []):
            if source["attribute"] == attribute and "pattern" not in source and self.env.get(source["env"]):
                return self.env[source["env"]]
        ref = self.ref(logical_id)
        if attribute == "Arn" or (locator["type"] == INTERPRETER and attribute == "CodeInterpreterArn"):
            return _arn(locator["type"], ref, self.region, self.account)
        if attribute == "Name" and locator["type"] == "AWS::StepFunctions::StateMachine":
            return ref.split(":")[6]
        if attribute == "QueueName" and locator["type"] == "AWS::SQS::Queue":
            return ref.rsplit("/", 1)[-1]
        raise Unresolved(f"{logical_id}.{attribute}")

    def __call__(self, node: Any) -> Any:
        if isinstance(node, str | int | float | bool):
            return node
        if isinstance(node, list):
            return [self(item) for item in node]
        if not isinstance(node, dict) or len(node) != 1:
            raise Unresolved(f"not an intrinsic: {node!r}")
        ((name, arg),) = node.items()
        intrinsic = self._intrinsics.get(name)
        if intrinsic is None:
            raise Unresolved(f"intrinsic {name}")
        return intrinsic(self, arg)

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

        def sub(match: re.Match[str]) -> str:
            key = match.group(1)
            if key in variables:
                return str(self(variables[key]))
            if "." in key:
                logical_id, attribute = key.split(".", 1)
                return self.attribute(logical_id, attribute)
            return self.ref(key)

        return re.sub(r"\$\{([^}!]+)\}", sub, text)

    _intrinsics: dict[str, Any] = {
        "Ref": lambda self, arg: self.ref(arg),
        "Env": lambda self, arg: self._env(arg),
        "Fn::GetAtt": lambda self, arg: self.attribute(arg[0], arg[1]),
        "Fn::Join": lambda self, arg: str(arg[0]).join(str(self(part)) for part in arg[1]),
        "Fn::Select": lambda self, arg: self(arg[1])[int(self(arg[0]))],
        "Fn::Split": lambda self, arg: str(self(arg[1])).split(arg[0]),
        "Fn::Sub": lambda self, arg: self._sub(arg),
    }


# ---------------------------------------------------------------------------------------- matching
def _like(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    if pattern == "*":
        return True
    if "*" not in pattern and "?" not in pattern:
        return pattern.lower() == value.lower() if ignore_case else pattern == value
    return _regex(pattern, ignore_case).fullmatch(value) is not None


@functools.lru_cache(maxsize=4096)
def _regex(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def arn_like(pattern: str, arn: str) -> bool:
    """ARN matching as IAM does it: segment by segment (the sixth, the resource, may hold colons)."""
    if pattern == "*":
        return True
    want, have = pattern.split(":", 5), arn.split(":", 5)
    if len(want) != len(have):
        return False
    return all(_like(w, h) for w, h in zip(want, have, strict=True))


def _values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in items]


_OPERATORS = {
    "StringEquals": lambda want, have: want == have,
    "StringNotEquals": lambda want, have: want != have,
    "StringEqualsIgnoreCase": lambda want, have: want.lower() == have.lower(),
    "StringNotEqualsIgnoreCase": lambda want, have: want.lower() != have.lower(),
    "StringLike": lambda want, have: _like(want, have),
    "StringNotLike": lambda want, have: not _like(want, have),
    "ArnEquals": lambda want, have: want == have,
    "ArnNotEquals": lambda want, have: want != have,
    "ArnLike": arn_like,
    "ArnNotLike": lambda want, have: not arn_like(want, have),
    "Bool": lambda want, have: want.lower() == have.lower(),
}
_NEGATED = frozenset(
    {"StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike"}
)


def _condition_holds(operator: str, key: str, wanted: Any, context: dict[str, str]) -> bool:
    qualifier, _, operator = operator.rpartition(":")
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    present = key in context
    if operator == "Null":
        return _values(wanted)[0] == ("false" if present else "true")
    if not present:
        return if_exists or operator in _NEGATED
    test = _OPERATORS.get(operator)
    if test is None:
        return False  # an operator this module does not know never grants (and a Deny with it never denies)
    have = _values(context[key])
    want = _values(wanted)
    if operator in _NEGATED:  # none of the wanted values may match
        return all(all(test(w, h) for w in want) for h in have)
    if qualifier == "ForAllValues":
        return all(any(test(w, h) for w in want) for h in have)
    return any(any(test(w, h) for w in want) for h in have)


@dataclass
class Statement:
    effect: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]  # resolved; an unresolved one is left out (it matches no call)
    not_resources: tuple[str, ...] | None
    condition: dict[str, dict[str, Any]]

    def matches(self, request: Request) -> bool:
        if self.actions and not any(_like(a, request.action, ignore_case=True) for a in self.actions):
            return False
        if self.not_actions and any(_like(a, request.action, ignore_case=True) for a in self.not_actions):
            return False
        if self.not_resources is not None:
            if any(arn_like(r, request.resource) for r in self.not_resources):
                return False
        elif not any(arn_like(r, request.resource) for r in self.resources):
            return False
        return all(
            _condition_holds(operator, key, wanted, request.context)
            for operator, block in self.condition.items()
            for key, wanted in block.items()
        )


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def compile_statements(raw: list[dict[str, Any]], resolve: Resolver) -> list[Statement]:
    out = []
    for statement in raw:
        resolved: list[str] = []
        for node in _listed(statement.get("Resource", statement.get("NotResource", []))):
            try:
                resolved.append(str(resolve(node)))
            except (Unresolved, IndexError):
                continue
        out.append(
            Statement(
                effect=statement["Effect"],
                actions=tuple(_listed(statement.get("Action", []))),
                not_actions=tuple(_listed(statement.get("NotAction", []))),
                resources=tuple(resolved) if "Resource" in statement else (),
                not_resources=tuple(resolved) if "NotResource" in statement else None,
                condition=statement.get("Condition") or {},
            )
        )
    return out


class Policy:
    """One function's statements, resolved for one region."""

    def __init__(self, function: str, role: str, statements: list[Statement]) -> None:
        self.function = function
        self.role = role
        self.statements = statements
        self._decided: dict[tuple[str, str, tuple[tuple[str, str], ...]], bool] = {}

    def allows(self, request: Request) -> bool:
        """IAM's decision, remembered per request (a turn asks the same few dozen again and again)."""
        key = (request.action, request.resource, tuple(sorted(request.context.items())))
        decided = self._decided.get(key)
        if decided is None:
            matching = [s for s in self.statements if s.matches(request)]
            decided = not any(s.effect == "Deny" for s in matching) and any(
                s.effect == "Allow" for s in matching
            )
            if len(self._decided) >= DECISIONS_KEPT:  # object keys are unbounded: start over
                self._decided.clear()
            self._decided[key] = decided
        return decided


_policy_lock = threading.Lock()
_compiled: dict[tuple[Any, ...], Policy | None] = {}


def _variables(node: Any, into: set[str]) -> set[str]:
    """The environment variables a document's statements resolve through."""
    if isinstance(node, list):
        for item in node:
            _variables(item, into)
    elif isinstance(node, dict):
        if isinstance(node.get("Env"), str):
            into.add(node["Env"])
        if isinstance(node.get("env"), str):
            into.add(node["env"])
        for value in node.values():
            _variables(value, into)
    return into


def policy_for(function: str, region: str, *, document: dict[str, Any] | None = None) -> Policy | None:
    """The function's policy in ``region``, resolved with the environment as it is now (None for a
    function the stack does not deploy, which is not checked). Cached per value of what it resolves
    through, so a test that points the stack at another table gets its statements re-resolved."""
    doc = document if document is not None else policies()
    entry = doc["functions"].get(function)
    if entry is None:
        return None
    key = (id(doc), function, region, _environment_key(doc))
    policy = _compiled.get(key)
    if policy is not None:
        return policy
    with _policy_lock:
        resolve = Resolver(doc["resources"], dict(os.environ), region, _account())
        statements = compile_statements(entry["statements"], resolve)
        statements += context_statements(doc, function)
        policy = Policy(function, entry["role"], statements)
        if len(_compiled) > 256:  # environments come and go in tests; keep the cache small
            _compiled.clear()
        _compiled[key] = policy
        return policy


_names: dict[int, tuple[str, ...]] = {}
_ENVIRON_DATA = getattr(os.environ, "_data", None)  # CPython's os.environ keeps its values here, encoded


def _variable_names(doc: dict[str, Any]) -> tuple[str, ...]:
    names = _names.get(id(doc))
    if names is None:
        names = _names[id(doc)] = (
            *sorted(_variables(doc, set())),
            *sorted(ENV_DEFAULTS),
            "MOTO_ACCOUNT_ID",
            CONTEXT_ENV,
        )
    return names


@functools.cache
def _encoded(names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(os.environ.encodekey(n) for n in names)


def _environment_key(doc: dict[str, Any]) -> tuple[Any, ...]:
    """The values a document resolves through, as they are now: read from ``os.environ``'s own dict
    where CPython keeps one (every call is checked: seventeen ``os.environ.get`` were most of a check)."""
    names = _variable_names(doc)
    if isinstance(_ENVIRON_DATA, dict):
        return tuple(map(_ENVIRON_DATA.get, _encoded(names)))
    return tuple(os.environ.get(n) for n in names)


def forget() -> None:
    """Resolve the policies again on next use."""
    with _policy_lock:
        _compiled.clear()
        _names.clear()
        _cdk_json_context.cache_clear()


# ------------------------------------------------------------------------- grants from deploy context
def _cdk_json() -> Path:
    from skyloop.manifest import PROJECT_ROOT

    return PROJECT_ROOT / "cdk.json"


@functools.cache
def _cdk_json_context(path: Path) -> dict[str, Any]:
    try:
        context = json.loads(path.read_text()).get("context")
    except (OSError, ValueError):
        return {}
    return context if isinstance(context, dict) else {}


def deploy_context(key: str) -> list[str]:
    """A list-valued deploy context value (``bedrockModelArns``): ``SKYLOOP_LOCAL_IAM_CONTEXT``'s, else
    ``cdk.json``'s; a JSON list or a comma-separated string, as ``infra.config`` takes it."""
    raw = os.environ.get(CONTEXT_ENV)
    context: dict[str, Any] = {}
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"${CONTEXT_ENV} is not a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"${CONTEXT_ENV} is not a JSON object")
        context = parsed
    value = context[key] if key in context else _cdk_json_context(_cdk_json()).get(key)
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def context_statements(doc: dict[str, Any], function: str) -> list[Statement]:
    """The function's grants on deploy context values (``context_grants``), as the stack grants them."""
    out = []
    for grant in doc.get("context_grants", {}).get(function, []):
        arns = deploy_context(grant["context"])
        if arns:  # the stack grants nothing without a value
            out.append(Statement("Allow", tuple(_listed(grant["Action"])), (), tuple(arns), None, {}))
    return out


# ----------------------------------------------------------------------------------- what a call asks
def queue_arn(url: str, region: str) -> str:
    path = url.split("://", 1)[-1].split("/")
    account = path[1] if len(path) > 2 else _account()
    return f"arn:{PARTITION}:sqs:{region}:{account}:{path[-1]}"


def _table_arn(table: str, region: str, account: str) -> str:
    return table if table.startswith("arn:") else f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{table}"


def _dynamodb(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    if op == "TransactWriteItems":
        kinds = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
        }
        return [
            Request(f"dynamodb:{kinds[kind]}", _table_arn(body["TableName"], region, account))
            for item in params.get("TransactItems", [])
            for kind, body in item.items()
            if kind in kinds
        ]
    if op == "TransactGetItems":
        return [
            Request("dynamodb:GetItem", _table_arn(item["Get"]["TableName"], region, account))
            for item in params.get("TransactItems", [])
        ]
    if op in ("BatchGetItem", "BatchWriteItem"):
        return [
            Request(f"dynamodb:{op}", _table_arn(t, region, account)) for t in params.get("RequestItems", {})
        ]
    table = params.get("TableName") or params.get("TableArn") or params.get("ResourceArn")
    if not table:
        return [Request(f"dynamodb:{op}", "*")]
    arn = _table_arn(table, region, account)
    if op in ("Query", "Scan") and params.get("IndexName"):
        arn = f"{arn}/index/{params['IndexName']}"
    return [Request(f"dynamodb:{op}", arn)]


_S3_ACTIONS = {
    "HeadObject": "s3:GetObject",
    "GetObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "DeleteObject": "s3:DeleteObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
}


def _s3(op: str, params: dict[str, Any]) -> list[Request]:
    bucket = params.get("Bucket", "")
    if op in _S3_ACTIONS:
        return [Request(_S3_ACTIONS[op], f"arn:{PARTITION}:s3:::{bucket}/{params.get('Key', '')}")]
    if op == "DeleteObjects":
        keys = [o["Key"] for o in params.get("Delete", {}).get("Objects", [])]
        return [Request("s3:DeleteObject", f"arn:{PARTITION}:s3:::{bucket}/{key}") for key in keys]
    if op == "CopyObject":
        source = params.get("CopySource", "")
        if isinstance(source, dict):
            source = f"{source.get('Bucket', '')}/{source.get('Key', '')}"
        return [
            Request("s3:GetObject", f"arn:{PARTITION}:s3:::{str(source).lstrip('/').split('?')[0]}"),
            Request("s3:PutObject", f"arn:{PARTITION}:s3:::{bucket}/{params.get('Key', '')}"),
        ]
    if op in ("ListObjectsV2", "ListObjects"):
        context = {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}
        return [Request("s3:ListBucket", f"arn:{PARTITION}:s3:::{bucket}", context)]
    return [Request(f"s3:{op}", f"arn:{PARTITION}:s3:::{bucket}")]


def _states(op: str, params: dict[str, Any], env: dict[str, str]) -> list[Request]:
    if op in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
        return [Request(f"states:{op}", env.get("SKYLOOP_STATE_MACHINE_ARN", "*"))]
    arn = params.get("executionArn") or params.get("stateMachineArn") or "*"
    return [Request(f"states:{op}", arn)]


def _function_arn(name: str, qualifier: str | None, region: str, account: str) -> str:
    if name.startswith("arn:"):
        arn = name
    elif ":function:" in name:  # a partial ARN: account:function:name
        arn = f"arn:{PARTITION}:lambda:{region}:{name}"
    else:
        arn = f"arn:{PARTITION}:lambda:{region}:{account}:function:{name}"
    return f"{arn}:{qualifier}" if qualifier else arn


def _lambda(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    action = {
        "Invoke": "InvokeFunction",
        "InvokeAsync": "InvokeAsync",
        "InvokeWithResponseStream": "InvokeFunction",
    }
    name = params.get("FunctionName", "*")
    return [
        Request(f"lambda:{action.get(op, op)}", _function_arn(name, params.get("Qualifier"), region, account))
    ]


def _secrets(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    secret = params.get("SecretId") or params.get("Name") or "*"
    arn = (
        secret
        if secret.startswith("arn:")
        else f"arn:{PARTITION}:secretsmanager:{region}:{account}:secret:{secret}{SECRET_SUFFIX}"
    )
    return [Request(f"secretsmanager:{op}", arn)]


def _scheduler(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    if op == "ListSchedules" or op == "ListScheduleGroups":
        return [Request(f"scheduler:{op}", "*")]
    if op in ("CreateScheduleGroup", "DeleteScheduleGroup", "GetScheduleGroup"):
        name = params.get("Name", "")
        return [
            Request(f"scheduler:{op}", f"arn:{PARTITION}:scheduler:{region}:{account}:schedule-group/{name}")
        ]
    group = params.get("GroupName") or "default"
    out = [
        Request(
            f"scheduler:{op}",
            f"arn:{PARTITION}:scheduler:{region}:{account}:schedule/{group}/{params.get('Name', '')}",
        )
    ]
    role = (params.get("Target") or {}).get("RoleArn")
    if role and op in ("CreateSchedule", "UpdateSchedule"):
        out.append(Request("iam:PassRole", role, {"iam:PassedToService": "scheduler.amazonaws.com"}))
    return out


def _events(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    def bus(name: str | None) -> str:
        name = name or "default"
        return (
            name if name.startswith("arn:") else f"arn:{PARTITION}:events:{region}:{account}:event-bus/{name}"
        )

    if op == "PutEvents":
        return [Request("events:PutEvents", bus(e.get("EventBusName"))) for e in params.get("Entries", [])]
    if op in (
        "PutRule",
        "DeleteRule",
        "DescribeRule",
        "PutTargets",
        "RemoveTargets",
        "EnableRule",
        "DisableRule",
    ):
        name = params.get("Name") or params.get("Rule") or ""
        bus_name = params.get("EventBusName")
        path = f"{bus_name}/{name}" if bus_name and bus_name != "default" else name
        return [Request(f"events:{op}", f"arn:{PARTITION}:events:{region}:{account}:rule/{path}")]
    return [Request(f"events:{op}", "*")]


def _sqs(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    action = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}.get(op, op)
    action = action.replace("ChangeMessageVisibilityBatch", "ChangeMessageVisibility")
    if op == "GetQueueUrl":
        owner = params.get("QueueOwnerAWSAccountId") or account
        return [
            Request("sqs:GetQueueUrl", f"arn:{PARTITION}:sqs:{region}:{owner}:{params.get('QueueName', '')}")
        ]
    url = params.get("QueueUrl")
    return [Request(f"sqs:{action}", queue_arn(url, region) if url else "*")]


def _agentcore(op: str, params: dict[str, Any], region: str, account: str) -> list[Request]:
    identifier = str(params.get("codeInterpreterIdentifier") or "*")
    return [Request(f"bedrock-agentcore:{op}", interpreter_arn(identifier, region, account))]


_MODELLED: dict[str, Any] = {
    "dynamodb": _dynamodb,
    "s3": lambda op, params, _region, _account: _s3(op, params),
    "lambda": _lambda,
    "secretsmanager": _secrets,
    "scheduler": _scheduler,
    "events": _events,
    "sqs": _sqs,
    "bedrock-agentcore": _agentcore,
    # what it names is in its endpoint's URL: checked when the request is built (check_url)
    "apigatewaymanagementapi": lambda *_: [],
}


def requests_for(
    service: str, op: str, params: dict[str, Any], region: str, *, env: dict[str, str] | None = None
) -> list[Request]:
    """What IAM authorizes for one call (AWS's Service Authorization Reference, per operation)."""
    if service == "stepfunctions":
        return _states(op, params, env if env is not None else dict(os.environ))
    modelled = _MODELLED.get(service)
    if modelled is not None:
        return modelled(op, params, region, _account())
    return [Request(f"{SERVICE_PREFIX.get(service, service)}:{op}", "*")]


_CONNECTION_METHODS = {"PostToConnection": "POST", "GetConnection": "GET", "DeleteConnection": "DELETE"}


def connection_request(op: str, url: str, region: str) -> Request:
    """``execute-api:ManageConnections`` on ``<api id>/<stage>/<method>/@connections/<id>``, from the
    management endpoint's URL (``https://<api id>.execute-api.<region>.amazonaws.com/<stage>/@connections/<id>``)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    api_id = parts.netloc.split(".", 1)[0]
    stage, _, connection = unquote(parts.path).lstrip("/").partition("/@connections/")
    method = _CONNECTION_METHODS.get(op, "POST")
    arn = f"arn:{PARTITION}:execute-api:{region}:{_account()}:{api_id}/{stage}/{method}/@connections/{connection}"
    return Request("execute-api:ManageConnections", arn)


# ------------------------------------------------------------------------------------------- refusal
_ERROR_CODE = {"s3": "AccessDenied", "sqs": "AccessDenied"}  # the others: AccessDeniedException
# S3 and SQS answer AccessDenied with 403 (S3's model says so; SQS's has no such shape)
_ERROR_STATUS = {"s3": 403, "sqs": 403}


@functools.cache
def denial_status(service: str) -> int:
    """The HTTP status AWS answers an IAM refusal with in ``service``: its model's AccessDeniedException
    ``httpStatusCode`` where the model has one (bedrock-agentcore: 403), else by protocol: the REST
    protocols' front end answers 403 (Lambda, EventBridge Scheduler, whose model lists no such error
    though it answers one), the JSON and query protocols 400 (DynamoDB, EventBridge, Step Functions)."""
    if service in _ERROR_STATUS:
        return _ERROR_STATUS[service]
    import botocore.session
    from botocore.model import NoShapeFoundError

    model = botocore.session.get_session().get_service_model(service)
    try:
        shape = model.shape_for(_ERROR_CODE.get(service, "AccessDeniedException"))
    except NoShapeFoundError:
        shape = None
    status = (shape.metadata.get("error") or {}).get("httpStatusCode") if shape is not None else None
    if isinstance(status, int):
        return status
    return 403 if model.protocol.startswith("rest-") else 400


def denial(service: str, op: str, policy: Policy, request: Request) -> Exception:
    """The ``ClientError`` AWS raises for a call the caller's identity policy does not allow."""
    from botocore.exceptions import ClientError

    code, status = _ERROR_CODE.get(service, "AccessDeniedException"), denial_status(service)
    caller = (
        f"arn:{PARTITION}:sts::{_account()}:assumed-role/{policy.role}/{FUNCTION_PREFIX}{policy.function}"
    )
    message = (
        f"User: {caller} is not authorized to perform: {request.action} on resource: {request.resource} "
        f"because no identity-based policy allows the {request.action} action"
    )
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }
    return ClientError(response, op)


def _caller(context: dict[str, Any] | None) -> tuple[str, Any]:
    """The call's region, and the calling function's policy there (None outside a function, or unknown)."""
    region = (context or {}).get("client_region") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    function = function_identity.current()
    return region, None if function is None else policy_for(function, region)


def check(model: Any, params: dict[str, Any], context: dict[str, Any] | None = None, **_: Any) -> None:
    """botocore ``before-parameter-build``: refuse the call when the calling function may not make it."""
    service = model.service_model.service_name
    if service not in SERVICE_PREFIX:
        return
    region, policy = _caller(context)
    if policy is None:
        return
    for request in requests_for(service, model.name, params, region):
        if not policy.allows(request):
            raise denial(service, model.name, policy, request)


def check_url(model: Any, params: dict[str, Any], context: dict[str, Any] | None = None, **_: Any) -> None:
    """botocore ``before-call`` of the API Gateway management API: its resource is in the request's URL."""
    region, policy = _caller(context)
    if policy is None:
        return
    request = connection_request(model.name, params.get("url", ""), region)
    if not policy.allows(request):
        raise denial("apigatewaymanagementapi", model.name, policy, request)


MANAGEMENT_EVENT = "before-call.apigatewaymanagementapi"

# ------------------------------------------------------------------------------ model calls (Bedrock)
MODEL_EVENT = "before-call.bedrock-runtime"
_MODEL_ACTIONS = {
    "Converse": "bedrock:InvokeModel",
    "InvokeModel": "bedrock:InvokeModel",
    "ConverseStream": "bedrock:InvokeModelWithResponseStream",
    "InvokeModelWithResponseStream": "bedrock:InvokeModelWithResponseStream",
}
_MODEL_PATH = re.compile(r"/model/(?P<id>.+)/(converse|converse-stream|invoke|invoke-with-response-stream)")
# Cross-region inference profiles' ids start with their geography ("us.anthropic.claude-...")
PROFILE_GEOGRAPHIES = frozenset({"us", "us-gov", "eu", "apac", "jp", "au", "ca", "global"})
AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn", ".api.aws")


def model_arn(model_id: str, region: str, account: str) -> str:
    """What IAM authorizes a model call on: an ARN as given, an inference profile (by its geography
    prefix) in the caller's account, else a foundation model (no account)."""
    if model_id.startswith("arn:"):
        return model_id
    if model_id.split(".", 1)[0] in PROFILE_GEOGRAPHIES:
        return f"arn:{PARTITION}:bedrock:{region}:{account}:inference-profile/{model_id}"
    return f"arn:{PARTITION}:bedrock:{region}::foundation-model/{model_id}"


def _deploy_account(policy: Policy) -> str:
    """The account a profile named by id is in: the one the granted ARNs name (the deploy's), as the
    local stack's own account (moto's) is not the one the call reaches."""
    for statement in policy.statements:
        for arn in statement.resources:
            parts = arn.split(":")
            if len(parts) > 4 and parts[2] == "bedrock" and re.fullmatch(r"[0-9]{12}", parts[4]):
                return parts[4]
    return _account()


def model_request(op: str, url: str, region: str, policy: Policy) -> Request | None:
    """The authorization a Bedrock runtime call makes, from its URL (None: not an AWS endpoint)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if not (parts.hostname or "").endswith(AWS_HOSTS):
        return None  # a mock model or a proxy: IAM is not asked
    found = _MODEL_PATH.fullmatch(unquote(parts.path))
    model_id = found["id"] if found else "*"
    action = _MODEL_ACTIONS.get(op, f"bedrock:{op}")
    return Request(action, model_arn(model_id, region, _deploy_account(policy)))


def check_model_call(
    model: Any, params: dict[str, Any], context: dict[str, Any] | None = None, **_: Any
) -> None:
    """botocore ``before-call`` of ``bedrock-runtime``: the calling function must be granted the model."""
    region, policy = _caller(context)
    if policy is None:
        return
    request = model_request(model.name, params.get("url", ""), region, policy)
    if request is not None and not policy.allows(request):
        raise denial("bedrock-runtime", model.name, policy, request)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "on").lower() not in ("off", "0", "false", "no")


def install() -> None:
    """Check the calls of every boto3 client this process creates from now on (and of the shared session)."""
    import botocore.handlers

    if not enabled():
        return
    forget()
    for spec in _handlers():
        if spec not in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.append(spec)


def _handlers() -> tuple[tuple[Any, ...], ...]:
    import botocore.handlers

    return (
        (EVENT, check),
        (MANAGEMENT_EVENT, check_url, botocore.handlers.REGISTER_FIRST),
        (MODEL_EVENT, check_model_call, botocore.handlers.REGISTER_FIRST),
    )


def uninstall() -> None:
    import botocore.handlers

    for spec in _handlers():
        while spec in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.remove(spec)
