"""Imported history takes the items ``omnigent session export`` writes, from skyloop or omnigent's server."""

from __future__ import annotations

from typing import Any

import pytest

from skyloop.api.requests import InitialItem, imported_items
from skyloop.errors import InvalidInputError

# One export line each, as `omnigent session import` sends them (record_type, id, type, status,
# response_id and created_by stripped; created_at and omnigent's own flags left on)
EXPORTED: list[dict[str, Any]] = [
    {
        "type": "message",
        "data": {
            "created_at": 1796281441,
            "role": "user",
            "content": [{"type": "input_text", "text": "read a.py"}],
            "user_authored": True,
            "stream_message_id": None,
        },
    },
    {
        "type": "function_call",
        "data": {
            "created_at": 1796281444,
            "name": "Read",
            "arguments": "{}",
            "call_id": "r1",
            "agent": "old",
        },
    },
    {"type": "function_call_output", "data": {"created_at": 1796281444, "call_id": "r1", "output": "hi"}},
    {
        "type": "message",
        "data": {
            "created_at": 1796281444,
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
            "agent": "old",
        },
    },
]


def _entries(raw: list[dict[str, Any]]) -> list[InitialItem]:
    return [InitialItem.model_validate(e) for e in raw]


def test_an_export_imports_as_its_data_alone() -> None:
    out = imported_items(_entries(EXPORTED), "agent")
    assert out == [
        (
            "message",
            {"role": "user", "content": [{"type": "input_text", "text": "read a.py"}], "model": None},
        ),
        ("function_call", {"name": "Read", "arguments": "{}", "call_id": "r1", "model": "old"}),
        ("function_call_output", {"call_id": "r1", "output": "hi"}),
        (
            "message",
            {"role": "assistant", "content": [{"type": "output_text", "text": "done"}], "model": "old"},
        ),
    ]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"created_at": -1}, "created_at"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"colour": "red"}, "colour"),
        ({"user_authored": "maybe"}, "user_authored"),
    ],
)
def test_a_bad_or_unknown_field_is_refused_naming_the_item(data: dict[str, Any], needle: str) -> None:
    bad = [EXPORTED[0], {"type": "message", "data": {**EXPORTED[3]["data"], **data}}]
    with pytest.raises(InvalidInputError) as raised:
        imported_items(_entries(bad), "agent")
    assert raised.value.param == "initial_items[1]"
    assert needle in str(raised.value)
