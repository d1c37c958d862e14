"""The function manifest agrees with the code on disk and with the state machine's placeholders."""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import manifest

if TYPE_CHECKING:
    from collections.abc import Iterator

PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def _fake_arns() -> dict[str, str]:
    return {
        f.name: f"arn:aws:lambda:us-east-1:123456789012:function:skyloop-{f.name}" for f in manifest.FUNCTIONS
    }


def test_names_are_unique() -> None:
    names = [f.name for f in manifest.FUNCTIONS]
    keys = [f.asl_key for f in manifest.FUNCTIONS if f.asl_key]
    assert len(names) == len(set(names))
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_every_entry_has_its_handler_file(spec: manifest.FunctionSpec) -> None:
    # Given a manifest entry
    # Then its code lives in functions/<name>/ and the handler file exists there
    assert spec.code_dir == manifest.FUNCTIONS_DIR / spec.name
    assert spec.handler_file.is_file(), spec.handler_file
    assert spec.handler_file.is_relative_to(spec.code_dir)
    if spec.handler.endswith(".sh"):
        return
    # And the module defines the handler function it names
    attr = spec.handler.rsplit(".", 1)[1]
    tree = ast.parse(spec.handler_file.read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert attr in defined, f"{spec.handler_file} defines no {attr}()"


def test_every_function_folder_is_in_the_manifest() -> None:
    # Given the folders under functions/
    folders = {
        p.name for p in manifest.FUNCTIONS_DIR.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
    }
    # Then each one is a manifest entry, and each entry has a folder
    assert folders == {f.name for f in manifest.FUNCTIONS}


def test_asl_placeholders_match_the_substitutions() -> None:
    # Given the placeholders used by the state machine definition
    used = set(PLACEHOLDER.findall(manifest.ASL_PATH.read_text()))
    # When the manifest's substitutions are computed
    provided = set(manifest.asl_substitutions(_fake_arns()))
    # Then every placeholder is provided, and every substitution is used
    assert used == provided
    assert all(key.endswith("FunctionArn") for key in provided - set(manifest.TASK_RESOURCES))


def test_render_asl_puts_the_partition_in_every_task_resource() -> None:
    definition = json.loads(manifest.render_asl(_fake_arns(), partition="aws-cn"))
    resources = [
        state["Resource"]
        for machine in _machines(definition)
        for state in machine["States"].values()
        if state["Type"] == "Task"
    ]
    assert resources
    assert all(r.startswith("arn:aws-cn:states:::") for r in resources), resources


def test_streaming_and_scheduled_functions_are_not_steps() -> None:
    for spec in manifest.FUNCTIONS:
        if spec.streaming or spec.scheduled:
            assert spec.asl_key is None, spec.name
        assert not (spec.streaming and spec.scheduled), spec.name


def test_render_asl_leaves_no_placeholder() -> None:
    # When the definition is rendered with every function's ARN
    text = manifest.render_asl(_fake_arns())
    # Then no "${" is left anywhere in it
    assert "${" not in text, [line.strip() for line in text.splitlines() if "${" in line]


def test_render_asl_substitutes_every_task_into_valid_json() -> None:
    # When the definition is rendered with every function's ARN
    arns = _fake_arns()
    text = manifest.render_asl(arns)

    # Then every placeholder outside the free-text Comment is substituted, and the result is valid JSON
    definition = json.loads(text)
    assert "${" not in json.dumps({k: v for k, v in definition.items() if k != "Comment"})
    assert definition["StartAt"] in definition["States"]

    # And every Lambda task names one of the step functions (or, for tools, a function from the
    # state), each step being used
    machines = list(_machines(definition))
    targets = {
        state["Parameters"]["FunctionName"]
        for machine in machines
        for state in machine["States"].values()
        if state["Type"] == "Task"
        and state["Resource"].startswith("arn:aws:states:::lambda:invoke")
        and "FunctionName" in state["Parameters"]
    }
    steps = {arns[f.name] for f in manifest.FUNCTIONS if f.asl_key}
    assert targets == steps

    # And every transition points at a state of its own (sub-)machine
    for machine in machines:
        names = set(machine["States"])
        assert machine["StartAt"] in names
        for state in machine["States"].values():
            nexts = [state.get("Next"), state.get("Default")]
            nexts += [c["Next"] for c in state.get("Choices", [])]
            nexts += [c["Next"] for c in state.get("Catch", [])]
            assert {n for n in nexts if n} <= names


def _machines(machine: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The machine and every machine nested in it (Parallel branches, Map item processors)."""
    yield machine
    for state in machine["States"].values():
        for branch in state.get("Branches", []):
            yield from _machines(branch)
        if "ItemProcessor" in state:
            yield from _machines(state["ItemProcessor"])
