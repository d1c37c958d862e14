"""Harness ``scripted``: a test model that answers from a script in the agent spec itself.

No network, no key, no SDK: ``skyloop smoke`` registers an agent with a
script and gets the same answers on ``skyloop dev`` and on a deployed stack,
where a laptop's mock model cannot be reached from Lambda::

    executor:
      harness: scripted
      model: smoke                       # any name; reported as the response's model
      script:
        - match: "#files"                # optional: only for inputs containing this token
          tool_calls: [{name: Glob, arguments: {pattern: "*.py"}}]
        - match: "#files"
          text: "Found: {{output}}"      # {{output}}: the newest tool output the model was given
          delay_ms: 500                  # wait before the first word (time to first token)
          word_delay_ms: 50              # and between words (the text streams word by word)
          usage: {input_tokens: 1000, output_tokens: 20}   # what the call reports (default: nothing)

Which answer a model call gets is decided by the conversation alone, so a
retried step answers the same:

* the *input* is the newest user message;
* the *candidates* are the answers whose ``match`` token occurs in the input
  (the longest such token wins; on a tie the one first in the script), or,
  when none occurs, the answers without ``match``;
* the answer is candidate number *k*, where *k* counts the answers this script
  already gave to that input. An answer that calls tools is followed by
  another model call; one with only text ends the turn. So *k* is read from
  the call ids the harness generates (``call_s<k>_<n>_<h>``, ``h`` derived
  from the input's item id): one more than the highest *k* among the calls
  after the input, else 0. A message posted during a turn is a new input and
  starts again at 0.

Running past the candidates fails the turn with ``model_error`` (a test wants
to hear that its script was too short). The script is validated when the agent
is registered (:func:`validate_script`), so a bad one is a 400 then, never a
failed turn. This module is imported only by agents that use it.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING

from skyloop.errors import ModelCallError
from skyloop.harnesses.base import FunctionCall, ModelResult
from skyloop.models.script import validate_script

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.models.agent import AgentSpec
    from skyloop.models.script import ScriptedAnswer
    from skyloop.models.session import ClientTool, ConversationItem

OUTPUT_PLACEHOLDER = "{{output}}"
_CALL_ID = re.compile(r"^call_s(\d+)_\d+_([0-9a-f]{12})$")
_WORDS = re.compile(r"\s*\S+\s*|\s+")


def call_model(
    spec: AgentSpec,
    items: list[ConversationItem],
    tools: list[ClientTool],  # noqa: ARG001  (the script decides; calls to tools not offered are the turn's to answer)
    on_delta: Callable[[str], None],
    *,
    timeout_s: float = 600.0,
) -> ModelResult:
    """The scripted answer for this point of the conversation, its text streamed word by word."""
    deadline = time.monotonic() + timeout_s
    script = validate_script((spec.executor.model_extra or {}).get("script"))
    answer, k, tag = choose(script, items)
    _sleep(answer.delay_ms, deadline)
    text = answer.text.replace(OUTPUT_PLACEHOLDER, newest_output(items)) if answer.text else ""
    for n, word in enumerate(_WORDS.findall(text)):
        if n and answer.word_delay_ms:
            _sleep(answer.word_delay_ms, deadline)
        on_delta(word)
    calls = [
        FunctionCall(call_id=f"call_s{k}_{n}_{tag}", name=c.name, arguments=c.arguments)
        for n, c in enumerate(answer.tool_calls)
    ]
    usage = answer.usage.model_dump() if answer.usage else None
    return ModelResult(text=text, calls=calls, model=spec.executor.model, usage=usage)


def choose(script: list[ScriptedAnswer], items: list[ConversationItem]) -> tuple[ScriptedAnswer, int, str]:
    """The answer for this model call, its index among the candidates and the input's tag (see the module)."""
    start, input_text, input_id = _input(items)
    tag = hashlib.sha256(input_id.encode()).hexdigest()[:12]
    found = [a.match for a in script if a.match and a.match in input_text]
    if found:
        token = max(found, key=len)  # max keeps the first of equal length: the earliest in the script
        candidates = [a for a in script if a.match == token]
        which = f"inputs containing {token!r}"
    else:
        candidates = [a for a in script if a.match is None]
        which = "inputs no match token selects"
    k = 0
    for item in items[start:]:
        m = _CALL_ID.match(str(item.data.get("call_id", ""))) if item.type == "function_call" else None
        if m is not None and m.group(2) == tag:
            k = max(k, int(m.group(1)) + 1)
    if k >= len(candidates):
        raise ModelCallError(
            f"scripted: the script has no answer #{k + 1} for {which} ({len(candidates)} answer(s))",
            code="model_error",
        )
    return candidates[k], k, tag


def newest_output(items: list[ConversationItem]) -> str:
    """The newest tool output in the conversation ("" if none): what ``{{output}}`` stands for."""
    for item in reversed(items):
        if item.type == "function_call_output":
            return str(item.data.get("output", ""))
    return ""


def _input(items: list[ConversationItem]) -> tuple[int, str, str]:
    """Where the newest user message is (the index after it), its text and its item id."""
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if item.type == "message" and item.data.get("role", "user") == "user":
            content = item.data.get("content")
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))
            return i + 1, text, item.id
    return 0, "", ""


def _sleep(ms: int, deadline: float) -> None:
    """Wait as a slow model would; past the step's budget the call times out as a real one does."""
    if ms <= 0:
        return
    remaining = deadline - time.monotonic()
    if ms / 1000 > remaining:
        time.sleep(max(0.0, remaining))
        raise ModelCallError(
            "scripted: the answer's delay outlasted the model call's timeout", code="model_timeout"
        )
    time.sleep(ms / 1000)
