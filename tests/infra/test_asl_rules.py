"""The turn machine's definition against Step Functions' rules (``infra.checks.asl``), and planted defects.

The definition is the one the synthesized template hands CreateStateMachine: the
``DefinitionString`` with its ``DefinitionSubstitutions`` applied at their worst
case. It has no finding. Then each rule gets a copy of it changed as little as
possible to break that rule alone, and exactly that rule must fire. States are
found by their shape (a Map body, a ``.waitForTaskToken`` task, a retrier), not by
name, so the tests follow the definition as it changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from infra.checks import asl
from infra.checks import template as T
from infra.checks.findings import Finding
from infra.checks.intrinsics import WorstCase
from infra.checks.jsonpath import PathKind, path_error
from skyloop import manifest

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

Definition = dict[str, Any]
Scope = dict[str, Any]  # {"StartAt": ..., "States": {...}}


@pytest.fixture(scope="module")
def rendered_text(synth: Synth) -> str:
    template = synth.template
    (machine,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    return T.rendered_definition(machine, WorstCase(template))


@pytest.fixture
def definition(rendered_text: str) -> Definition:
    return json.loads(rendered_text)


def rules(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


def check(definition: Definition) -> set[str]:
    return rules(asl.check_definition_text(json.dumps(definition)))


# ---------------------------------------------------------------- finding states by shape
def scopes(node: Scope) -> Iterator[Scope]:
    """Every States container: the machine, then Parallel branches and Map bodies, depth first."""
    yield node
    for body in node["States"].values():
        for branch in body.get("Branches", []):
            yield from scopes(branch)
        for key in ("ItemProcessor", "Iterator"):
            if key in body:
                yield from scopes(body[key])


def find(
    definition: Definition, what: str, test: Callable[[dict[str, Any]], bool]
) -> tuple[Scope, str, dict[str, Any]]:
    for scope in scopes(definition):
        for name, body in scope["States"].items():
            if test(body):
                return scope, name, body
    pytest.fail(f"the definition has no {what}: plant one for this test")


def map_bodies(definition: Definition) -> list[Scope]:
    return [
        body.get("ItemProcessor") or body["Iterator"]
        for scope in scopes(definition)
        for body in scope["States"].values()
        if body["Type"] == "Map"
    ]


def rename(scope: Scope, old: str, new: str) -> None:
    """Rename a state and every transition to it within its scope."""
    scope["States"] = {new if k == old else k: v for k, v in scope["States"].items()}
    if scope["StartAt"] == old:
        scope["StartAt"] = new
    for body in scope["States"].values():
        for holder in [body, *body.get("Choices", []), *body.get("Catch", [])]:
            for key in ("Next", "Default"):
                if holder.get(key) == old:
                    holder[key] = new


def with_next(body: dict[str, Any]) -> bool:
    return isinstance(body.get("Next"), str)


def is_task(body: dict[str, Any]) -> bool:
    return body["Type"] == "Task"


# ---------------------------------------------------------------- the real definition
def test_the_synthesized_definition_has_no_finding(rendered_text: str) -> None:
    assert asl.check_definition_text(rendered_text) == []


def test_the_file_and_the_local_stacks_rendering_have_no_finding() -> None:
    # The local stack runs the same file rendered with moto's ARNs
    arns = {
        f.name: f"arn:aws:lambda:us-east-1:123456789012:function:Skyloop-{f.name}" for f in manifest.FUNCTIONS
    }
    assert asl.check_definition_text(manifest.render_asl(arns)) == []
    # And the file itself, its task resources rendered (whole-value placeholders: the partition's ARN)
    # and its function placeholders kept
    keep = {f.name: f"${{{f.asl_key}FunctionArn}}" for f in manifest.FUNCTIONS if f.asl_key}
    assert asl.check_definition_text(manifest.render_asl(keep)) == []


# ---------------------------------------------------------------- names
def test_a_state_name_used_in_two_map_bodies(definition: Definition) -> None:
    # The defect that made CreateStateMachine refuse the turn machine: a Map body reusing the
    # state names of another
    bodies = map_bodies(definition)
    if len(bodies) < 2:
        pytest.skip("one Map body: the next test plants its duplicate against the top level")
    rename(bodies[1], bodies[1]["StartAt"], bodies[0]["StartAt"])
    assert check(definition) == {"asl/unique-names"}


def test_a_state_name_used_in_a_map_body_and_at_the_top(definition: Definition) -> None:
    body = map_bodies(definition)[0]
    rename(body, body["StartAt"], definition["StartAt"])
    assert check(definition) == {"asl/unique-names"}


def test_a_state_name_used_in_two_parallel_branches(definition: Definition) -> None:
    _, _, parallel = find(
        definition, "Parallel state of two branches", lambda b: len(b.get("Branches", [])) > 1
    )
    first, second = parallel["Branches"][:2]
    rename(second, second["StartAt"], first["StartAt"])
    assert check(definition) == {"asl/unique-names"}


@pytest.mark.parametrize("length", [80, 81])
def test_a_state_name_over_80_characters(definition: Definition, length: int) -> None:
    rename(definition, definition["StartAt"], "S" * length)
    assert check(definition) == (set() if length == 80 else {"asl/name-length"})


# ---------------------------------------------------------------- transitions
def extra_rule(target: str) -> dict[str, Any]:
    """A choice rule to ``target``: adds a transition without taking one away (nothing becomes unreachable)."""
    return {"Variable": "$.planted", "IsPresent": True, "Next": target}


def test_a_next_that_names_no_state(definition: Definition) -> None:
    _, _, choice = find(definition, "Choice state", lambda b: b["Type"] == "Choice")
    choice["Choices"].append(extra_rule("NoSuchState"))
    assert check(definition) == {"asl/next-missing"}


def test_a_default_that_names_no_state(definition: Definition) -> None:
    # (the old default's target may become unreachable: it is reported too)
    _, _, choice = find(definition, "Choice with Default", lambda b: "Default" in b)
    choice["Default"] = "NoSuchState"
    assert "asl/next-missing" in check(definition)


def test_a_catch_that_names_no_state(definition: Definition) -> None:
    _, _, state = find(definition, "state with Catch", lambda b: bool(b.get("Catch")))
    state["Catch"][0]["Next"] = "NoSuchState"
    assert check(definition) == {"asl/next-missing"}


def test_a_next_crossing_out_of_a_map_body(definition: Definition) -> None:
    # Given a Map body's choice jumping to a state of the machine's top level (which exists)
    body = map_bodies(definition)[0]
    choice = next((b for b in body["States"].values() if b["Type"] == "Choice"), None)
    assert choice is not None, "the Map body has no Choice state: plant the jump elsewhere"
    choice["Choices"].append(extra_rule(definition["StartAt"]))
    assert check(definition) == {"asl/next-out-of-scope"}


def test_a_catch_crossing_out_of_a_parallel_branch(definition: Definition) -> None:
    # Given a state inside a branch whose catcher goes to the machine's own failure handler
    _, _, parallel = find(definition, "Parallel state", lambda b: b["Type"] == "Parallel")
    top_catch = parallel.get("Catch", [{"Next": definition["StartAt"]}])[0]["Next"]
    scope = next(s for s in scopes(parallel["Branches"][0]) for b in s["States"].values() if is_task(b))
    task = next(b for b in scope["States"].values() if is_task(b))
    task["Catch"] = [*task.get("Catch", []), {"ErrorEquals": ["Custom.Error"], "Next": top_catch}]
    task["Catch"].sort(key=lambda c: "States.ALL" in c["ErrorEquals"])  # States.ALL stays last
    assert check(definition) == {"asl/next-out-of-scope"}


def test_an_unreachable_state(definition: Definition) -> None:
    definition["States"]["Orphan"] = {"Type": "Succeed"}
    assert check(definition) == {"asl/unreachable"}


def test_an_unreachable_state_in_a_map_body(definition: Definition) -> None:
    map_bodies(definition)[0]["States"]["OrphanInBody"] = {"Type": "Succeed"}
    assert check(definition) == {"asl/unreachable"}


def test_a_state_with_both_next_and_end(definition: Definition) -> None:
    _, _, state = find(definition, "Task with Next", lambda b: is_task(b) and with_next(b))
    state["End"] = True
    assert check(definition) == {"asl/no-transition"}


def test_a_state_with_neither_next_nor_end(definition: Definition) -> None:
    _, _, state = find(definition, "state with End", lambda b: b.get("End") is True)
    state["End"] = False
    found = check(definition)
    assert "asl/no-transition" in found
    assert found <= {"asl/no-transition", "asl/no-terminal"}  # it may have been its scope's only end


def test_a_choice_rule_without_next(definition: Definition) -> None:
    _, _, choice = find(definition, "Choice state", lambda b: b["Type"] == "Choice")
    choice["Choices"].append({"Variable": "$.anything", "IsPresent": True})
    assert check(definition) == {"asl/choice"}


def test_a_scope_that_never_ends(definition: Definition) -> None:
    body = map_bodies(definition)[0]
    body["StartAt"] = "Spin"
    body["States"] = {"Spin": {"Type": "Pass", "Next": "Spin"}}
    assert check(definition) == {"asl/no-terminal"}


def test_start_at_names_no_state(definition: Definition) -> None:
    body = map_bodies(definition)[0]
    body["StartAt"] = "NoSuchState"
    found = check(definition)
    assert found == {"asl/structure"}


# ---------------------------------------------------------------- paths
def _path_planters() -> list[tuple[str, Callable[[Definition], None]]]:
    def result_path(d: Definition) -> None:
        find(d, "state with ResultPath", lambda b: isinstance(b.get("ResultPath"), str))[2]["ResultPath"] = (
            "$.a[*]"
        )

    def output_path(d: Definition) -> None:
        find(d, "Task", is_task)[2]["OutputPath"] = "$.Payload["

    def payload(d: Definition) -> None:
        params = find(d, "Task with Parameters", lambda b: "Parameters" in b)[2]["Parameters"]
        params["broken.$"] = "$.a b"

    def intrinsic(d: Definition) -> None:
        params = find(d, "Task with Parameters", lambda b: "Parameters" in b)[2]["Parameters"]
        params["broken.$"] = "States.Format('{}', $.a"

    def variable(d: Definition) -> None:
        choice = find(d, "Choice state", lambda b: b["Type"] == "Choice")[2]
        choice["Choices"][0]["Variable"] = "$..next"

    def items_path(d: Definition) -> None:
        find(d, "Map state", lambda b: b["Type"] == "Map")[2]["ItemsPath"] = "$.calls[?(@.id)]"

    def not_a_path(d: Definition) -> None:
        find(d, "Task", is_task)[2]["InputPath"] = "input"

    return [
        ("ResultPath selecting many nodes", result_path),
        ("OutputPath unterminated", output_path),
        ("payload value with a space", payload),
        ("intrinsic function unclosed", intrinsic),
        ("Choice Variable with descent", variable),
        ("ItemsPath with a filter", items_path),
        ("InputPath without $", not_a_path),
    ]


@pytest.mark.parametrize("plant", [p for _, p in _path_planters()], ids=[i for i, _ in _path_planters()])
def test_a_bad_jsonpath(definition: Definition, plant: Callable[[Definition], None]) -> None:
    plant(definition)
    assert check(definition) == {"asl/path"}


def _context_planters() -> list[tuple[str, Callable[[Definition], None]]]:
    def map_item_outside_map(d: Definition) -> None:
        params = find(d, "Task with Parameters", lambda b: "Parameters" in b)[2]["Parameters"]
        params["item.$"] = "$$.Map.Item.Value"

    def no_such_field(d: Definition) -> None:
        params = find(d, "Task with Parameters", lambda b: "Parameters" in b)[2]["Parameters"]
        params["when.$"] = "$$.Executoin.StartTime"

    def in_timeout_path(d: Definition) -> None:
        task = find(d, "Task with TimeoutSecondsPath", lambda b: "TimeoutSecondsPath" in b)[2]
        task["TimeoutSecondsPath"] = "$$.Execution.Input.timeout_s"

    def task_token_outside_a_task(d: Definition) -> None:
        body = find(d, "Map state", lambda b: b["Type"] == "Map")[2]
        body["ItemSelector"]["token.$"] = "$$.Task.Token"

    return [
        ("$$.Map outside a Map", map_item_outside_map),
        ("no such Context field", no_such_field),
        ("$$ in TimeoutSecondsPath", in_timeout_path),
        ("$$.Task in a Map", task_token_outside_a_task),
    ]


@pytest.mark.parametrize(
    "plant", [p for _, p in _context_planters()], ids=[i for i, _ in _context_planters()]
)
def test_a_context_path_where_aws_refuses_it(
    definition: Definition, plant: Callable[[Definition], None]
) -> None:
    plant(definition)
    assert check(definition) == {"asl/context"}


# ---------------------------------------------------------------- Retry and Catch
@pytest.mark.parametrize(
    ("change", "value"),
    [
        ("IntervalSeconds", 0),
        ("IntervalSeconds", 1.5),
        ("MaxAttempts", -1),
        ("BackoffRate", 0.5),
        ("MaxDelaySeconds", 31_622_401),
        ("MaxDelaySeconds", 0),
        ("JitterStrategy", "full"),
        ("ErrorEquals", []),
        ("ErrorEquals", ["States.ALL", "States.Timeout"]),
    ],
)
def test_a_bad_retrier(definition: Definition, change: str, value: Any) -> None:
    _, _, state = find(definition, "state with Retry", lambda b: bool(b.get("Retry")))
    state["Retry"][0][change] = value
    assert check(definition) == {"asl/retry"}


def test_retrier_limits_are_inclusive(definition: Definition) -> None:
    _, _, state = find(definition, "state with Retry", lambda b: bool(b.get("Retry")))
    state["Retry"][0].update(IntervalSeconds=1, MaxAttempts=0, BackoffRate=1.0, MaxDelaySeconds=31_622_400)
    assert check(definition) == set()


def test_states_all_must_be_the_last_retrier(definition: Definition) -> None:
    _, _, state = find(definition, "state with Retry", lambda b: bool(b.get("Retry")))
    state["Retry"].insert(0, {"ErrorEquals": ["States.ALL"], "MaxAttempts": 1})
    assert check(definition) == {"asl/retry"}


def test_states_all_must_be_the_last_catcher(definition: Definition) -> None:
    _, _, state = find(
        definition,
        "state catching States.ALL",
        lambda b: any(c["ErrorEquals"] == ["States.ALL"] for c in b.get("Catch", [])),
    )
    catch_all = next(c for c in state["Catch"] if c["ErrorEquals"] == ["States.ALL"])
    state["Catch"].append({"ErrorEquals": ["Custom.Error"], "Next": catch_all["Next"]})
    assert check(definition) == {"asl/catch"}


def test_a_catcher_without_error_names(definition: Definition) -> None:
    _, _, state = find(definition, "state with Catch", lambda b: bool(b.get("Catch")))
    state["Catch"][0]["ErrorEquals"] = []
    assert check(definition) == {"asl/catch"}


# ---------------------------------------------------------------- Task states
@pytest.mark.parametrize(
    "values",
    [{"TimeoutSeconds": 60, "HeartbeatSeconds": 60}, {"TimeoutSeconds": 0}, {"HeartbeatSeconds": 1.5}],
    ids=["heartbeat-not-below-timeout", "zero-timeout", "fractional-heartbeat"],
)
def test_bad_task_timeouts(definition: Definition, values: dict[str, Any]) -> None:
    _, _, task = find(
        definition, "Task without timeouts", lambda b: is_task(b) and "TimeoutSecondsPath" not in b
    )
    task.update(values)
    assert check(definition) == {"asl/timeout"}


def test_a_timeout_and_its_path_together(definition: Definition) -> None:
    _, _, task = find(definition, "Task with TimeoutSecondsPath", lambda b: "TimeoutSecondsPath" in b)
    task["TimeoutSeconds"] = 3600
    assert check(definition) == {"asl/timeout"}


def test_a_wait_for_task_token_task_without_the_token(definition: Definition) -> None:
    _, _, task = find(
        definition,
        ".waitForTaskToken task",
        lambda b: str(b.get("Resource", "")).endswith(".waitForTaskToken"),
    )

    def drop_token(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: drop_token(v) for k, v in node.items() if v != "$$.Task.Token"}
        return node

    task["Parameters"] = drop_token(task["Parameters"])
    assert "$$.Task.Token" not in json.dumps(task)
    assert check(definition) == {"asl/task-token"}


@pytest.mark.parametrize(
    "resource",
    [
        "arn:aws:states::lambda:invoke",
        "lambda:invoke",
        "arn:aws:states:::lambda:invoke.waitForTaskTokens",
        "",
    ],
)
def test_a_malformed_resource_arn(definition: Definition, resource: str) -> None:
    _, _, task = find(
        definition,
        "Task without a task token",
        lambda b: is_task(b) and "waitForTaskToken" not in b["Resource"],
    )
    task["Resource"] = resource
    assert check(definition) == {"asl/resource"}


# ---------------------------------------------------------------- JSONata
def test_jsonata_state_with_jsonpath_fields(definition: Definition) -> None:
    _, _, task = find(definition, "Task with Parameters", lambda b: is_task(b) and "Parameters" in b)
    task["QueryLanguage"] = "JSONata"
    assert check(definition) == {"asl/jsonata"}


def test_jsonpath_state_with_jsonata_fields(definition: Definition) -> None:
    _, _, task = find(definition, "Task", is_task)
    task["Output"] = "{% $states.result.Payload %}"
    assert check(definition) == {"asl/jsonata"}


def test_a_malformed_jsonata_expression(definition: Definition) -> None:
    _, _, state = find(definition, "Succeed state", lambda b: b["Type"] == "Succeed")
    state.update(QueryLanguage="JSONata", Output="{% $states.input")
    assert check(definition) == {"asl/jsonata"}


def test_an_unknown_query_language(definition: Definition) -> None:
    _, _, state = find(definition, "Succeed state", lambda b: b["Type"] == "Succeed")
    state["QueryLanguage"] = "JsonPath"
    assert check(definition) == {"asl/jsonata"}


def test_a_jsonata_machine_cannot_switch_a_state_back() -> None:
    # (a JSONata machine of one state: turning the real one to JSONata breaks every state)
    machine = {"QueryLanguage": "JSONata", "StartAt": "A", "States": {"A": {"Type": "Succeed"}}}
    assert check(machine) == set()
    machine["States"]["A"]["QueryLanguage"] = "JSONPath"
    assert check(machine) == {"asl/jsonata"}


# ---------------------------------------------------------------- size
def test_a_definition_over_1_mb(definition: Definition) -> None:
    text = json.dumps(definition)
    definition["Comment"] += "c" * (asl.MAX_DEFINITION_BYTES - len(text.encode()) + 1)
    assert len(json.dumps(definition).encode()) == asl.MAX_DEFINITION_BYTES + 1
    assert check(definition) == {"asl/size"}


def test_the_size_counts_the_escaping_of_the_request_body(definition: Definition) -> None:
    # Given a definition under 1 MB of text whose quotes, escaped in the CreateStateMachine request, are not
    definition["Comment"] += '"' * 400_000
    assert len(json.dumps(definition).encode()) < asl.MAX_DEFINITION_BYTES
    findings = asl.check_definition_text(json.dumps(definition))
    assert rules(findings) == {"asl/size"}
    assert "request body" in findings[0].message


def test_a_definition_well_under_1_mb_passes(definition: Definition) -> None:
    definition["Comment"] += "c" * 500_000
    assert check(definition) == set()


# ---------------------------------------------------------------- the path grammar
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("$", PathKind.RESULT),
        ("$.a.b[0]", PathKind.REFERENCE),
        ("$['a b'].c", PathKind.REFERENCE),
        ("$.a[*].b", PathKind.PATH),
        ("$..b", PathKind.PATH),
        ("$.a[0:2]", PathKind.PATH),
        ("$.a[-1]", PathKind.PATH),
        ("$.a[?(@.price < 10)]", PathKind.PATH),
        ("$$.Execution.Id", PathKind.PATH),
        ("$myVariable.field", PathKind.REFERENCE),
        ("States.Format('{} and {}', $.a, $$.Execution.Name)", PathKind.PAYLOAD),
        ("States.ArrayGetItem(States.Array(1, 2), 0)", PathKind.PAYLOAD),
        ("States.MathAdd($.n, -1)", PathKind.PAYLOAD),
        ("States.UUID()", PathKind.PAYLOAD),
    ],
)
def test_valid_paths(text: str, kind: PathKind) -> None:
    assert path_error(text, kind) is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("$.a[*]", PathKind.REFERENCE),
        ("$..a", PathKind.REFERENCE),
        ("$.a[-1]", PathKind.REFERENCE),
        ("$$.Execution.Id", PathKind.RESULT),
        ("$var.x", PathKind.RESULT),
        ("$.a.length()", PathKind.PATH),
        ("$.", PathKind.PATH),
        ("$.a[", PathKind.PATH),
        ("$.a[?()]", PathKind.PATH),
        ("a.b", PathKind.PATH),
        ("States.Nope(1)", PathKind.PAYLOAD),
        ("States.Format('x', $.a) tail", PathKind.PAYLOAD),
    ],
)
def test_invalid_paths(text: str, kind: PathKind) -> None:
    assert path_error(text, kind) is not None
