"""A model call's input is built from the conversation items without changing them.

A warm turn environment hands its model calls the items it read before (see
``store.dynamodb.events._TurnItems``): a harness that wrote into an item's
data would change the history every later call of that session sees.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skyloop.harnesses import bedrock_converse, chat_completions, openai_responses, scripted
from skyloop.models.session import ConversationItem


def _items() -> list[ConversationItem]:
    raw: list[tuple[str, dict[str, Any]]] = [
        ("message", {"role": "user", "content": [{"type": "input_text", "text": "look"}]}),
        (
            "message",
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "and this"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                ],
            },
        ),
        ("message", {"role": "assistant", "content": [{"type": "output_text", "text": "calling"}]}),
        ("function_call", {"call_id": "c1", "name": "Read", "arguments": '{"file_path": "a"}'}),
        ("function_call", {"call_id": "c2", "name": "Glob", "arguments": ""}),
        ("function_call_output", {"call_id": "c1", "output": "1\tx"}),
        ("function_call_output", {"call_id": "c2", "output": "a.py"}),
        ("message", {"role": "user", "content": [{"type": "input_text", "text": "again"}]}),
    ]
    return [
        ConversationItem(id=f"i{n}", type=kind, created_at=0, position=n + 1, data=data)  # type: ignore[arg-type]
        for n, (kind, data) in enumerate(raw)
    ]


BUILDERS = {
    "openai_responses": lambda items: openai_responses.to_input_items(items),
    "chat_completions": lambda items: chat_completions.to_messages("be brief", items),
    "bedrock_converse": lambda items: bedrock_converse.to_messages(items),
    "scripted": lambda items: (scripted.newest_output(items), scripted._input(items)),
}


@pytest.mark.parametrize("harness", sorted(BUILDERS))
def test_building_a_model_calls_input_changes_no_item(harness: str) -> None:
    # Given a conversation with messages, an image, calls and their outputs
    items = _items()
    before = copy.deepcopy([item.model_dump() for item in items])

    # When a harness builds its request from it, twice, and the first request is then changed
    first = BUILDERS[harness](items)
    _scribble(first)
    BUILDERS[harness](items)

    # Then the items are as they were
    assert [item.model_dump() for item in items] == before


def _scribble(value: Any) -> None:
    """Change every dict and list reachable from ``value``, as a later step might."""
    if isinstance(value, dict):
        for key in list(value):
            _scribble(value[key])
        value["scribbled"] = True
    elif isinstance(value, list | tuple):
        for entry in value:
            _scribble(entry)
        if isinstance(value, list):
            value.append("scribbled")
