"""Amazon States Language rules Step Functions enforces at CreateStateMachine (or at the first call).

moto runs definitions AWS refuses (it never checked that state names are unique
across Map and Parallel bodies; the first ``cdk deploy`` failed on that), so the
definition is checked here, generically, against AWS's documented rules:

* the ASL spec, https://states-language.net/spec.html (state names, transitions,
  retriers and catchers, timeouts, paths);
* https://docs.aws.amazon.com/step-functions/latest/dg/statemachine-structure.html
  and ``state-task.html``, ``state-choice.html``, ``state-map.html``, ``state-parallel.html``;
* https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html (Retry/Catch);
* https://docs.aws.amazon.com/step-functions/latest/dg/input-output-contextobject.html
  (where ``$$.`` may appear) and ``connect-to-resource.html#connect-wait-token`` (task tokens);
* https://docs.aws.amazon.com/step-functions/latest/dg/transforming-data.html (JSONata);
* https://docs.aws.amazon.com/step-functions/latest/apireference/API_CreateStateMachine.html
  (``definition``: at most 1,048,576 characters) and the 1 MB request-size quota
  (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html).

``check_definition_text`` takes the text CreateStateMachine receives (after
substitutions); ``check_definition`` a parsed definition.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from infra.checks.findings import Finding
from infra.checks.jsonpath import PathKind, context_fields, path_error

MAX_DEFINITION_BYTES = 1_048_576  # CreateStateMachine definition, and the whole request (1 MB quota)
MAX_STATE_NAME = 80  # ASL spec: "State names MUST have length of less than or equal to 80"
MAX_SECONDS = 99_999_999  # TimeoutSeconds, HeartbeatSeconds, IntervalSeconds, MaxAttempts
MAX_DELAY_SECONDS = 31_622_400  # a retrier's MaxDelaySeconds must be less than 31,622,401

STATE_TYPES = frozenset({"Task", "Pass", "Choice", "Wait", "Succeed", "Fail", "Parallel", "Map"})
TRANSITIONING = frozenset({"Task", "Pass", "Wait", "Parallel", "Map"})  # Next or End, exactly one
TERMINAL = frozenset({"Succeed", "Fail"})
CAN_RETRY = frozenset({"Task", "Parallel", "Map"})

# The Context object's top-level fields (input-output-contextobject.html).
CONTEXT_FIELDS = frozenset({"Execution", "State", "StateMachine", "Task", "Map"})
# Fields of a JSONPath state that may read the Context object ($$.): input-output-contextobject.html
# lists InputPath, OutputPath, ItemsPath, Choice Variable and its *Path operators, ResultSelector and
# Parameters; ItemSelector (Parameters' successor in Map) and Assign take payload templates too.
CONTEXT_OK = frozenset({"InputPath", "OutputPath", "ItemsPath", "Variable", "payload"})

REFERENCE_FIELDS = (
    "ItemsPath",
    "TimeoutSecondsPath",
    "HeartbeatSecondsPath",
    "SecondsPath",
    "TimestampPath",
    "MaxConcurrencyPath",
    "ToleratedFailureCountPath",
    "ToleratedFailurePercentagePath",
)
PATH_FIELDS = ("InputPath", "OutputPath")
# JSONPath-only and JSONata-only fields (transforming-data.html, "JSONPath fields not supported").
JSONPATH_ONLY = frozenset(
    {"InputPath", "OutputPath", "Parameters", "ResultSelector", "ResultPath", "ItemsPath", *REFERENCE_FIELDS}
    | {"ErrorPath", "CausePath"}
)
JSONATA_ONLY = frozenset({"Arguments", "Output", "Items", "Condition"})
NESTED = ("Branches", "ItemProcessor", "Iterator")  # their States are checked as scopes of their own

_PARTITION = r"aws(-cn|-us-gov|-iso(-[a-z])?|-eusc)?"
RESOURCE_ARNS = (
    # service integrations: arn:aws:states:::lambda:invoke, ...:aws-sdk:s3:getObject, ...startExecution.sync:2
    re.compile(
        rf"arn:{_PARTITION}:states:::[a-z0-9-]+(:[A-Za-z0-9-]+)+"
        r"(\.(sync(:2)?|waitForTaskToken))?"
    ),
    re.compile(rf"arn:{_PARTITION}:states:[a-z0-9-]+:\d{{12}}:activity:[A-Za-z0-9_-]{{1,80}}"),
    re.compile(
        rf"arn:{_PARTITION}:lambda:[a-z0-9-]+:\d{{12}}:function:[A-Za-z0-9_-]{{1,64}}(:[A-Za-z0-9_$-]+)?"
    ),
)
COMPARISONS = frozenset(
    f"{kind}{op}{path}"
    for kind, ops in (
        ("String", ("Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals")),
        ("Numeric", ("Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals")),
        ("Timestamp", ("Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals")),
        ("Boolean", ("Equals",)),
    )
    for op in ops
    for path in ("", "Path")
) | {"StringMatches", "IsNull", "IsPresent", "IsNumeric", "IsString", "IsBoolean", "IsTimestamp"}


@dataclass(frozen=True)
class Scope:
    """One ``States`` map: the machine's top level, a Parallel branch or a Map body."""

    path: str
    start_at: Any
    states: dict[str, Any]


@dataclass(frozen=True)
class State:
    name: str
    body: dict[str, Any]
    scope: Scope
    jsonata: bool

    @property
    def where(self) -> str:
        return f"{self.scope.path}/{self.name}" if self.scope.path else self.name

    @property
    def type(self) -> Any:
        return self.body.get("Type")


def check_definition_text(text: str) -> list[Finding]:
    """The definition as CreateStateMachine receives it: its size, then every rule."""
    findings = size_findings(text)
    try:
        definition = json.loads(text)
    except json.JSONDecodeError as exc:
        return [*findings, Finding(rule="asl/structure", resource="definition", message=f"not JSON: {exc}")]
    return findings + check_definition(definition)


def size_findings(text: str) -> list[Finding]:
    """CreateStateMachine takes at most 1,048,576 characters of definition in a request of at most 1 MB.

    Measured as UTF-8 bytes (never fewer than characters), and once more as the JSON string the
    request body carries (quotes and newlines escaped), which is what the 1 MB request quota sees.
    """
    out = []
    for what, size in (
        ("definition", len(text.encode())),
        ("definition as sent in the request body", len(json.dumps(text).encode())),
    ):
        if size > MAX_DEFINITION_BYTES:
            out.append(
                Finding(
                    rule="asl/size",
                    resource="definition",
                    message=f"the {what} is {size:,} bytes; Step Functions takes at most "
                    f"{MAX_DEFINITION_BYTES:,} (CreateStateMachine, 1 MB request quota)",
                )
            )
    return out


def check_definition(definition: Any) -> list[Finding]:
    """Every rule over a parsed definition; an empty list when Step Functions would accept it."""
    if not isinstance(definition, dict) or not isinstance(definition.get("States"), dict):
        return [_f("asl/structure", "definition", "a definition is an object with States and StartAt")]
    top_jsonata = definition.get("QueryLanguage") == "JSONata"
    findings = _query_language(definition, "definition", None)
    scopes, states = _collect(Scope("", definition.get("StartAt"), definition["States"]), top_jsonata)
    findings += _structure(scopes) + _names(states) + _transitions(scopes, states)
    for state in states:
        findings += _state_rules(state, top_jsonata)
    return findings


def _f(rule: str, where: str, message: str) -> Finding:
    return Finding(rule=rule, resource=where, message=message)


# ---------------------------------------------------------------- scopes and states
def _collect(root: Scope, top_jsonata: bool) -> tuple[list[Scope], list[State]]:
    """Every scope and state, depth first: Parallel branches and Map bodies (ItemProcessor or Iterator)."""
    scopes, states = [], []
    pending: deque[tuple[Scope, bool]] = deque([(root, top_jsonata)])
    while pending:
        scope, inherited = pending.popleft()
        scopes.append(scope)
        for name, body in scope.states.items():
            if not isinstance(body, dict):
                body = {}
            lang = body.get("QueryLanguage")
            state = State(name, body, scope, lang == "JSONata" or (lang is None and inherited))
            states.append(state)
            pending.extend((child, state.jsonata) for child in _children(state))
    return scopes, states


def _children(state: State) -> list[Scope]:
    out = []
    for i, branch in enumerate(state.body.get("Branches") or []):
        if isinstance(branch, dict) and isinstance(branch.get("States"), dict):
            out.append(Scope(f"{state.where}/Branches[{i}]", branch.get("StartAt"), branch["States"]))
    for key in ("ItemProcessor", "Iterator"):
        body = state.body.get(key)
        if isinstance(body, dict) and isinstance(body.get("States"), dict):
            out.append(Scope(f"{state.where}/{key}", body.get("StartAt"), body["States"]))
    return out


def _structure(scopes: list[Scope]) -> list[Finding]:
    out = []
    for scope in scopes:
        where = scope.path or "definition"
        if scope.start_at not in scope.states:
            out.append(_f("asl/structure", where, f"StartAt {scope.start_at!r} names no state of this scope"))
        terminal = [
            s
            for s in scope.states.values()
            if isinstance(s, dict) and (s.get("Type") in TERMINAL or s.get("End") is True)
        ]
        if not terminal:
            out.append(_f("asl/no-terminal", where, "no state ends the scope (End: true, Succeed or Fail)"))
    return out


def _names(states: list[State]) -> list[Finding]:
    """State names are unique machine-wide (Map and Parallel bodies included) and at most 80 characters."""
    out = []
    seen: dict[str, list[str]] = {}
    for state in states:
        seen.setdefault(state.name, []).append(state.where)
        if len(state.name) > MAX_STATE_NAME:
            out.append(
                _f("asl/name-length", state.where, f"{len(state.name)} characters; at most {MAX_STATE_NAME}")
            )
    for name, places in seen.items():
        if len(places) > 1:
            out.append(
                _f(
                    "asl/unique-names",
                    places[-1],
                    f"the state name {name!r} is used {len(places)} times ({', '.join(places)}); "
                    "names must be unique in the whole machine",
                )
            )
    return out


# ---------------------------------------------------------------- transitions
def _targets(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(field, state name)`` for every transition a state declares."""
    out: list[tuple[str, Any]] = [(key, body[key]) for key in ("Next", "Default") if key in body]
    for i, rule in enumerate(body.get("Choices") or []):
        if isinstance(rule, dict) and "Next" in rule:
            out.append((f"Choices[{i}].Next", rule["Next"]))
    for i, catcher in enumerate(body.get("Catch") or []):
        if isinstance(catcher, dict) and "Next" in catcher:
            out.append((f"Catch[{i}].Next", catcher["Next"]))
    return out


def _transitions(scopes: list[Scope], states: list[State]) -> list[Finding]:
    everywhere = {s.name: s.where for s in states}
    out = []
    for state in states:
        for field, target in _targets(state.body):
            if target in state.scope.states:
                continue
            if isinstance(target, str) and target in everywhere:
                out.append(
                    _f(
                        "asl/next-out-of-scope",
                        state.where,
                        f"{field} {target!r} is a state of another scope ({everywhere[target]}); a "
                        "transition stays within its Parallel branch or Map body",
                    )
                )
            else:
                out.append(_f("asl/next-missing", state.where, f"{field} {target!r} names no state"))
        out += _transition_shape(state)
    for scope in scopes:
        out += _unreachable(scope)
    return out


def _transition_shape(state: State) -> list[Finding]:
    body, kind = state.body, state.type
    has_next, ends = "Next" in body, body.get("End") is True
    if kind not in STATE_TYPES:
        return [_f("asl/structure", state.where, f"Type {kind!r} is not a state type")]
    if kind in TRANSITIONING and has_next == ends:
        what = "both Next and End" if has_next else "neither Next nor End: true"
        return [_f("asl/no-transition", state.where, f"a {kind} state has {what}; it needs exactly one")]
    if kind not in TRANSITIONING and (has_next or "End" in body):
        return [_f("asl/structure", state.where, f"a {kind} state takes no Next or End")]
    if kind == "Choice":
        return _choice_shape(state)
    return _container_shape(state)


def _container_shape(state: State) -> list[Finding]:
    """A Parallel state has branches; a Map state has one body (ItemProcessor, or the older Iterator)."""
    if state.type == "Parallel":
        branches = state.body.get("Branches")
        if not isinstance(branches, list) or not branches or not all(_is_scope(b) for b in branches):
            return [_f("asl/structure", state.where, "a Parallel state needs Branches, each with States")]
    if state.type == "Map":
        bodies = [k for k in ("ItemProcessor", "Iterator") if k in state.body]
        if len(bodies) != 1 or not _is_scope(state.body[bodies[0]]):
            return [_f("asl/structure", state.where, "a Map state needs one ItemProcessor (or Iterator)")]
    return []


def _is_scope(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("States"), dict) and "StartAt" in node


def _choice_shape(state: State) -> list[Finding]:
    choices = state.body.get("Choices")
    if not isinstance(choices, list) or not choices:
        return [_f("asl/choice", state.where, "a Choice state needs a non-empty Choices array")]
    return [
        _f("asl/choice", f"{state.where}/Choices[{i}]", "a choice rule needs Next")
        for i, rule in enumerate(choices)
        if not isinstance(rule, dict) or "Next" not in rule
    ]


def _unreachable(scope: Scope) -> list[Finding]:
    """Every state is reachable from its scope's StartAt (Step Functions refuses an unreachable state)."""
    if scope.start_at not in scope.states:
        return []
    seen, queue = {scope.start_at}, deque([scope.start_at])
    while queue:
        body = scope.states[queue.popleft()]
        for _, target in _targets(body if isinstance(body, dict) else {}):
            if target in scope.states and target not in seen:
                seen.add(target)
                queue.append(target)
    prefix = f"{scope.path}/" if scope.path else ""
    return [
        _f("asl/unreachable", f"{prefix}{name}", f"not reachable from StartAt {scope.start_at!r}")
        for name in scope.states
        if name not in seen
    ]


# ---------------------------------------------------------------- per-state rules
def _state_rules(state: State, top_jsonata: bool) -> list[Finding]:
    out = _query_language(state.body, state.where, top_jsonata)
    out += _jsonata(state) if state.jsonata else _jsonpath(state)
    out += _retry(state) + _catch(state) + _timeouts(state) + _resource(state) + _task_token(state)
    return out


def _query_language(body: dict[str, Any], where: str, top_jsonata: bool | None) -> list[Finding]:
    lang = body.get("QueryLanguage")
    if lang is None:
        return []
    if lang not in ("JSONPath", "JSONata"):
        return [_f("asl/jsonata", where, f"QueryLanguage {lang!r}: JSONPath or JSONata")]
    if top_jsonata and lang == "JSONPath":
        return [_f("asl/jsonata", where, "a JSONata machine cannot switch a state back to JSONPath")]
    return []


# ---------------------------------------------------------------- JSONPath
def _jsonpath(state: State) -> list[Finding]:
    body, out = state.body, []
    mixed = sorted(JSONATA_ONLY & body.keys())
    if mixed:
        out.append(_f("asl/jsonata", state.where, f"{', '.join(mixed)}: JSONata fields in a JSONPath state"))
    for field in PATH_FIELDS:
        out += _path_field(state, field, body.get(field), PathKind.PATH)
    out += _path_field(state, "ResultPath", body.get("ResultPath"), PathKind.RESULT)
    for field in REFERENCE_FIELDS:
        out += _path_field(state, field, body.get(field), PathKind.REFERENCE)
    for field in ("ErrorPath", "CausePath"):  # a reference path or an intrinsic function (state-fail.html)
        out += _path_field(state, field, body.get(field), PathKind.PAYLOAD)
    for i, catcher in enumerate(body.get("Catch") or []):
        if isinstance(catcher, dict):
            out += _path_field(state, f"Catch[{i}].ResultPath", catcher.get("ResultPath"), PathKind.RESULT)
    for i, rule in enumerate(body.get("Choices") or []):
        out += _choice_rule(state, f"Choices[{i}]", rule)
    for where, _key, value in _payload_fields(body, ""):
        out += _payload_value(state, where, value)
    return out


def _path_field(state: State, field: str, value: Any, kind: PathKind) -> list[Finding]:
    if value is None:
        return []
    if not isinstance(value, str):
        return [_f("asl/path", state.where, f"{field} must be a {kind} string, got {value!r}")]
    error = path_error(value, kind)
    if error:
        return [_f("asl/path", state.where, f"{field}: not a valid {kind}: {error}")]
    base = field.rsplit(".", 1)[-1]
    context_ok = base in CONTEXT_OK or (base in COMPARISONS and base.endswith("Path"))
    return _context(state, field, value, base if context_ok else None)


def _choice_rule(state: State, where: str, rule: Any) -> list[Finding]:
    if not isinstance(rule, dict):
        return [_f("asl/choice", f"{state.where}/{where}", "a choice rule is an object")]
    out = []
    for key in ("And", "Or"):
        for i, sub in enumerate(rule.get(key) or []):
            out += _choice_rule(state, f"{where}.{key}[{i}]", sub)
    if "Not" in rule:
        out += _choice_rule(state, f"{where}.Not", rule["Not"])
    if rule.keys() & {"And", "Or", "Not"}:
        return out
    operators = [k for k in rule if k in COMPARISONS]
    if len(operators) != 1 or "Variable" not in rule:
        out.append(
            _f("asl/choice", f"{state.where}/{where}", "a comparison needs Variable and exactly one operator")
        )
    out += _path_field(state, f"{where}.Variable", rule.get("Variable"), PathKind.REFERENCE)
    for op in operators:
        if op.endswith("Path"):
            out += _path_field(state, f"{where}.{op}", rule[op], PathKind.REFERENCE)
    return out


def _payload_fields(node: Any, where: str) -> list[tuple[str, str, Any]]:
    """``(where, key, value)`` of every ``.$`` key in a state, outside its nested Branches and bodies."""
    out: list[tuple[str, str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if not where and key in NESTED:
                continue
            inner = f"{where}.{key}" if where else key
            if key.endswith(".$"):
                out.append((inner, key, value))
            else:
                out += _payload_fields(value, inner)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _payload_fields(value, f"{where}[{i}]")
    return out


def _payload_value(state: State, where: str, value: Any) -> list[Finding]:
    if not isinstance(value, str):
        return [_f("asl/path", state.where, f"{where}: a '.$' key takes a path string, got {value!r}")]
    out = []
    error = path_error(value, PathKind.PAYLOAD)
    if error:
        out.append(_f("asl/path", state.where, f"{where}: not a path or intrinsic function: {error}"))
    return out + _context(state, where, value, "payload")


def _context(state: State, where: str, value: str, allowed: str | None) -> list[Finding]:
    """``$$.`` only in the fields that may read the Context object, and only its real fields."""
    if "$$" not in value:
        return []
    if allowed is None:
        return [_f("asl/context", state.where, f"{where} cannot read the Context object ($$)")]
    out = []
    for field in context_fields(value):
        if field not in CONTEXT_FIELDS:
            out.append(_f("asl/context", state.where, f"{where}: $$.{field} is no Context object field"))
        elif field == "Map" and not (
            state.type == "Map" and where.split(".")[0] in ("ItemSelector", "Parameters")
        ):
            out.append(_f("asl/context", state.where, f"{where}: $$.Map exists only in a Map's ItemSelector"))
        elif field == "Task" and not (state.type == "Task" and where.startswith("Parameters")):
            out.append(_f("asl/context", state.where, f"{where}: $$.Task exists only in a Task's Parameters"))
    return out


# ---------------------------------------------------------------- JSONata
def _jsonata(state: State) -> list[Finding]:
    """A JSONata state uses Arguments/Output/Items/Condition and ``{% %}`` expressions, never JSONPath."""
    mixed = sorted(JSONPATH_ONLY & state.body.keys())
    out = []
    if mixed:
        out.append(_f("asl/jsonata", state.where, f"{', '.join(mixed)}: JSONPath fields in a JSONata state"))
    for where, _key, _value in _payload_fields(state.body, ""):
        out.append(_f("asl/jsonata", state.where, f"{where}: '.$' keys are JSONPath; JSONata uses {{% %}}"))
    for where, text in _strings(state.body, ""):
        opens, closes = text.startswith("{%"), text.endswith("%}")
        if opens != closes or (opens and not text[2:-2].strip()):
            out.append(_f("asl/jsonata", state.where, f"{where}: a JSONata expression is '{{% ... %}}'"))
    return out


def _strings(node: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(node, str):
        return [(where, node.strip())]
    if isinstance(node, dict):
        return [
            s
            for k, v in node.items()
            if not (not where and k in NESTED)
            for s in _strings(v, f"{where}.{k}" if where else k)
        ]
    if isinstance(node, list):
        return [s for i, v in enumerate(node) for s in _strings(v, f"{where}[{i}]")]
    return []


# ---------------------------------------------------------------- Retry and Catch
def _error_names(state: State, field: str, entries: Any, i: int, last: bool) -> list[Finding]:
    entry = entries[i]
    names = entry.get("ErrorEquals") if isinstance(entry, dict) else None
    rule, where = f"asl/{field.lower()}", f"{field}[{i}]"
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        return [_f(rule, state.where, f"{where}.ErrorEquals must be a non-empty array of error names")]
    if "States.ALL" in names and (len(names) > 1 or not last):
        return [
            _f(rule, state.where, f"{where}: States.ALL must be alone in ErrorEquals and in the last {field}")
        ]
    return []


def _retry(state: State) -> list[Finding]:
    retriers = state.body.get("Retry")
    if retriers is None:
        return []
    if state.type not in CAN_RETRY or not isinstance(retriers, list):
        return [_f("asl/retry", state.where, "Retry is an array, on Task, Parallel and Map states only")]
    out = []
    for i, retrier in enumerate(retriers):
        out += _error_names(state, "Retry", retriers, i, i == len(retriers) - 1)
        if isinstance(retrier, dict):
            out += [_f("asl/retry", state.where, f"Retry[{i}].{why}") for why in _retrier_values(retrier)]
    return out


def _retrier_values(retrier: dict[str, Any]) -> list[str]:
    """concepts-error-handling.html: the retrier fields and their ranges."""
    out = []
    checks = (
        ("IntervalSeconds", 1, MAX_SECONDS, "a positive integer"),
        ("MaxAttempts", 0, MAX_SECONDS, "a non-negative integer"),
        ("MaxDelaySeconds", 1, MAX_DELAY_SECONDS, "a positive integer below 31,622,401"),
    )
    for key, low, high, what in checks:
        value = retrier.get(key)
        if value is not None and not (_is_int(value) and low <= value <= high):
            out.append(f"{key} {value!r}: must be {what}")
    rate = retrier.get("BackoffRate")
    if rate is not None and not (
        isinstance(rate, int | float) and not isinstance(rate, bool) and rate >= 1.0
    ):
        out.append(f"BackoffRate {rate!r}: must be a number of at least 1.0")
    jitter = retrier.get("JitterStrategy")
    if jitter is not None and jitter not in ("FULL", "NONE"):
        out.append(f"JitterStrategy {jitter!r}: FULL or NONE")
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _catch(state: State) -> list[Finding]:
    catchers = state.body.get("Catch")
    if catchers is None:
        return []
    if state.type not in CAN_RETRY or not isinstance(catchers, list):
        return [_f("asl/catch", state.where, "Catch is an array, on Task, Parallel and Map states only")]
    out = []
    for i, catcher in enumerate(catchers):
        out += _error_names(state, "Catch", catchers, i, i == len(catchers) - 1)
        if not isinstance(catcher, dict) or not isinstance(catcher.get("Next"), str):
            out.append(_f("asl/catch", state.where, f"Catch[{i}] needs Next"))
    return out


# ---------------------------------------------------------------- Task states
def _timeouts(state: State) -> list[Finding]:
    """state-task.html: positive integers; HeartbeatSeconds below TimeoutSeconds; a value or a path."""
    body, out = state.body, []
    for key in ("TimeoutSeconds", "HeartbeatSeconds"):
        if key not in body:
            continue
        value = body[key]
        expression = isinstance(value, str) and state.jsonata  # "{% ... %}", checked as JSONata
        if not expression and not (_is_int(value) and 1 <= value <= MAX_SECONDS):
            out.append(_f("asl/timeout", state.where, f"{key} {value!r}: a positive integer"))
        if f"{key}Path" in body:
            out.append(_f("asl/timeout", state.where, f"{key} and {key}Path are exclusive"))
    timeout, heartbeat = body.get("TimeoutSeconds"), body.get("HeartbeatSeconds")
    if isinstance(timeout, int) and isinstance(heartbeat, int) and heartbeat >= timeout:
        out.append(
            _f(
                "asl/timeout",
                state.where,
                f"HeartbeatSeconds {heartbeat} must be below TimeoutSeconds {timeout}",
            )
        )
    return out


def _resource(state: State) -> list[Finding]:
    """Task (and Map ItemReader/ResultWriter) resources are well-formed ARNs Step Functions can call."""
    resources = []
    if state.type == "Task":
        resources.append(("Resource", state.body.get("Resource")))
    for key in ("ItemReader", "ResultWriter"):
        part = state.body.get(key)
        if isinstance(part, dict) and "Resource" in part:
            resources.append((f"{key}.Resource", part["Resource"]))
    return [
        _f("asl/resource", state.where, f"{field} {value!r} is not a Step Functions resource ARN")
        for field, value in resources
        if not (isinstance(value, str) and any(p.fullmatch(value) for p in RESOURCE_ARNS))
    ]


def _task_token(state: State) -> list[Finding]:
    """A ``.waitForTaskToken`` task must hand its token out, or the execution waits until it times out."""
    resource = state.body.get("Resource")
    if state.type != "Task" or not (isinstance(resource, str) and resource.endswith(".waitForTaskToken")):
        return []
    if state.jsonata:
        found = any(
            "$states.context.Task.Token" in text for _, text in _strings(state.body.get("Arguments"), "")
        )
    else:
        found = any(
            isinstance(value, str) and "$$.Task.Token" in value
            for _, _, value in _payload_fields(state.body.get("Parameters"), "Parameters")
        )
    if found:
        return []
    return [
        _f(
            "asl/task-token",
            state.where,
            "a .waitForTaskToken task must pass $$.Task.Token in its Parameters "
            "(connect-to-resource.html#connect-wait-token)",
        )
    ]
