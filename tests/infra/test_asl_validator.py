"""The turn machine's definition as Step Functions' CreateStateMachine will judge it: the npm asl-validator.

moto runs definitions that AWS refuses (it never checked that state names are
unique across Map and Parallel bodies, and the first ``cdk deploy`` failed on
that). ``make test`` installs asl-validator from ``package-lock.json`` and this
module runs it over the definition both stacks use, rendered with real-looking
ARNs, over the definition the synthesized template hands CreateStateMachine (its
substitutions at their worst case, as ``infra.checks`` measures it), and over planted
defects to show that it would notice. ``test_asl_rules.py`` runs our own checks of
the rules asl-validator does not know.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra.checks.intrinsics import WorstCase
from infra.checks.template import rendered_definition
from skyloop import manifest

if TYPE_CHECKING:
    from tests.infra.conftest import Synth

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / "node_modules" / "asl-validator" / "dist" / "bin" / "asl-validator.js"


def _arns() -> dict[str, str]:
    return {
        f.name: f"arn:aws:lambda:us-east-1:123456789012:function:Skyloop-{f.name}"
        for f in manifest.FUNCTIONS
        if f.asl_key
    }


def rendered() -> dict[str, Any]:
    return json.loads(manifest.render_asl(_arns()))


def asl_validator(definition: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    """Exit code and report of ``asl-validator`` over one definition (path and ARN checks on)."""
    node = shutil.which("node")
    if node is None or not VALIDATOR.exists():
        pytest.fail("asl-validator is not installed: run `make test` (it runs `npm ci` first)")
    path = tmp_path / "definition.asl.json"
    path.write_text(json.dumps(definition))
    out = subprocess.run(
        [node, str(VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, timeout=60
    )
    return out.returncode, out.stdout + out.stderr


def test_the_turn_machine_passes_asl_validator(tmp_path: Path) -> None:
    code, report = asl_validator(rendered(), tmp_path)
    assert code == 0, report


def test_the_synthesized_definition_passes_asl_validator(synth: Synth, tmp_path: Path) -> None:
    template = synth.template
    (machine,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    code, report = asl_validator(json.loads(rendered_definition(machine, WorstCase(template))), tmp_path)
    assert code == 0, report


def _approved_tools(definition: dict[str, Any]) -> dict[str, Any]:
    return definition["States"]["Act"]["Branches"][1]["States"]["RunApprovedTools"]["ItemProcessor"]


def test_asl_validator_rejects_a_state_name_used_in_two_map_bodies(tmp_path: Path) -> None:
    # Given the approved tools' Map body renamed back to the names of the RunTools body (the bug that
    # made CreateStateMachine refuse the definition)
    definition = rendered()
    body = _approved_tools(definition)
    run_tools = definition["States"]["Act"]["Branches"][0]["States"]["RunTools"]["ItemProcessor"]
    body["StartAt"] = run_tools["StartAt"]
    body["States"] = copy.deepcopy(run_tools["States"])
    code, report = asl_validator(definition, tmp_path)
    assert code != 0
    assert "DUPLICATE_STATE_NAMES" in report


def test_asl_validator_rejects_a_next_that_names_no_state(tmp_path: Path) -> None:
    definition = rendered()
    definition["States"]["CallModel"]["Next"] = "NoSuchState"
    code, report = asl_validator(definition, tmp_path)
    assert code != 0, report
