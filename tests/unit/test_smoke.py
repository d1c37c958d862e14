"""``skyloop smoke``'s pure parts: the agent it registers and the report it prints (no HTTP)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skyloop import smoke
from skyloop.bundles import load_agent_spec_dict
from skyloop.harnesses import scripted
from skyloop.models.session import ConversationItem

WORKDIR = Path("/tmp/skyloop-smoke-unit")


def user(text: str) -> list[ConversationItem]:
    data = {"role": "user", "content": [{"type": "input_text", "text": text}]}
    return [ConversationItem(id="i1", type="message", created_at=0, data=data, position=1)]


def test_the_smoke_agent_is_a_valid_scripted_spec_with_an_approved_echo_tool() -> None:
    spec = load_agent_spec_dict(
        smoke.smoke_agent("smoke-abc", WORKDIR, "arn:aws:lambda:eu-west-1:123456789012:function:x", "abc")
    )
    assert spec.executor.harness == "scripted"
    tool = spec.tools["smoke_echo"]
    assert (tool["type"], tool["function"], tool["approval"]) == (
        "lambda",
        "arn:aws:lambda:eu-west-1:123456789012:function:x",
        "required",
    )


def test_each_scenario_token_selects_its_script() -> None:
    script = scripted.validate_script(
        smoke.smoke_agent("smoke-abc", WORKDIR, "smoke_echo", "abc")["executor"]["script"]
    )
    first = {
        token: scripted.choose(script, user(f"{token} go"))[0]
        for token in ("#seed", "#resume", "#approve", "#interrupt")
    }
    assert [c.name for c in first["#seed"].tool_calls] == ["Glob"]
    assert json.loads(first["#seed"].tool_calls[0].arguments) == {"pattern": "**/*.py", "path": str(WORKDIR)}
    assert first["#resume"].text == smoke.RESUME_TEXT
    assert first["#resume"].word_delay_ms > 0
    assert json.loads(first["#approve"].tool_calls[0].arguments) == {"text": "approve-abc"}
    assert first["#interrupt"].delay_ms == smoke.INTERRUPT_DELAY_MS
    assert scripted.choose(script, user("hello"))[0].text.startswith("skyloop smoke: nothing is scripted")


def test_report_lines_and_summary() -> None:
    report = smoke.Report("http://x")
    report.steps += [smoke.Step("health", True, 12.4, "ok"), smoke.Step("bad:unknown-call", True, 3.0, "404")]
    assert report.summary() == "PASS 2/2"
    line = re.compile(r"^(?P<mark>[✓✗]) (?P<name>\S+)\s+(?P<ms>\d+) ms  (?P<detail>.*)$")
    assert line.match(report.steps[0].line())
    report.steps.append(smoke.Step("seed", False, 900.0, "parked on []"))
    assert report.summary() == "FAIL 2/3 (failed: seed)"
    assert not report.ok
    assert report.to_json()["steps"][2] == {
        "name": "seed",
        "ok": False,
        "ms": 900.0,
        "detail": "parked on []",
    }


def test_an_empty_report_is_not_a_pass() -> None:
    assert not smoke.Report("http://x").ok
