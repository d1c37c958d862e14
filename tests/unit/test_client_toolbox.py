"""Client-side tool plumbing: schemas from callables, dispatch that never raises, tool-set modules."""

from __future__ import annotations

import asyncio
import types
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from skyloop.client import Tool, ToolBox, tool
from skyloop.client._tools import MAX_OUTPUT_CHARS


def search(query: str, limit: int = 10, mode: Literal["fast", "full"] = "fast") -> list[str]:
    """Search the notes.

    Longer explanation that is not part of the description.

    Args:
        query: what to look for,
            possibly on two lines
        limit: how many hits
    """
    return [query] * min(limit, 2)


def test_schema_from_signature_and_docstring() -> None:
    (made,) = ToolBox.from_spec(search)._tools.values()
    schema = made.schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the notes."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {
        "type": "string",
        "description": "what to look for, possibly on two lines",
    }
    assert params["properties"]["limit"] == {"type": "integer", "default": 10, "description": "how many hits"}
    assert params["properties"]["mode"]["enum"] == ["fast", "full"]
    assert "additionalProperties" not in params
    assert "title" not in params


def test_annotated_fields_and_explicit_overrides() -> None:
    @tool(name="lookup", description="Find a thing.")
    def find(key: Annotated[str, Field(description="the key")]) -> str:
        return key

    assert find.name == "lookup"
    assert find.description == "Find a thing."
    assert find.parameters["properties"]["key"]["description"] == "the key"

    explicit = tool(lambda **kw: sorted(kw), name="raw", parameters={"type": "object", "properties": {}})
    assert explicit.parameters == {"type": "object", "properties": {}}
    assert ToolBox([explicit]).run("raw", '{"b": 1, "a": 2}') == '["a","b"]'


def test_run_validates_coerces_and_renders() -> None:
    class Hit(BaseModel):
        title: str

    def hits(n: int) -> list[Hit]:
        return [Hit(title=f"t{i}") for i in range(n)]

    def nothing() -> None:
        return None

    box = ToolBox.from_spec([search, hits, nothing])
    assert box.run("search", '{"query": "x", "limit": "1"}') == '["x"]'
    assert box.run("search", {"query": "x"}) == '["x","x"]'
    assert box.run("hits", '{"n": 1}') == '[{"title":"t0"}]'
    assert box.run("nothing", None) == ""
    assert box.run("nothing", "") == ""


@pytest.mark.parametrize(
    ("name", "arguments", "start"),
    [
        ("missing", "{}", "Error: unknown tool 'missing' (this client offers: search, explode)"),
        ("search", "{not json", "Error: invalid arguments for search: arguments are not valid JSON"),
        ("search", "[1, 2]", "Error: invalid arguments for search: arguments must be a JSON object"),
        ("search", "{}", "Error: invalid arguments for search: query: Field required"),
        ("search", '{"query": "x", "extra": 1}', "Error: invalid arguments for search: extra:"),
        ("explode", "{}", "Error: explode failed: RuntimeError: no"),
    ],
)
def test_run_never_raises(name: str, arguments: str, start: str) -> None:
    def explode() -> str:
        raise RuntimeError("no")

    box = ToolBox.from_spec([search, explode])
    assert box.run(name, arguments).startswith(start)


def test_declared_only_schemas_are_answered_with_an_error() -> None:
    schema = {"type": "function", "function": {"name": "remote", "parameters": {"type": "object"}}}
    box = ToolBox.from_spec(schema)
    assert box.schemas() == [
        {
            "type": "function",
            "function": {"name": "remote", "description": "", "parameters": {"type": "object"}},
        }
    ]
    assert box.run("remote", "{}") == "Error: tool 'remote' has no implementation in this client"


def test_tool_set_by_name_and_by_module() -> None:
    box = ToolBox.from_spec("coding")
    assert {"Read", "Write", "Edit", "Glob", "Grep", "Bash"} <= set(box.names)
    assert box.run("Read", '{"file_path": "/definitely/not/here"}').startswith("Error")

    module = types.ModuleType("mini_tools")
    module.TOOLS = [{"type": "function", "function": {"name": "ping", "description": "p"}}]  # type: ignore[attr-defined]
    module.execute_tool = lambda name, args: f"{name}:{args}"  # type: ignore[attr-defined]
    assert ToolBox.from_spec(module).run("ping", '{"a": 1}') == "ping:{'a': 1}"

    with pytest.raises(ValueError, match="unknown tool set"):
        ToolBox.from_spec("nope")
    with pytest.raises(TypeError, match="not a tool set"):
        ToolBox.from_spec(types.ModuleType("empty"))


def test_duplicate_names_are_rejected_and_bad_specs_too() -> None:
    with pytest.raises(ValueError, match="two client tools are named 'search'"):
        ToolBox.from_spec([search, search])
    with pytest.raises(TypeError):
        ToolBox.from_spec(42)


def test_huge_outputs_are_clipped_under_the_server_limit() -> None:
    box = ToolBox.from_spec(tool(lambda: "x" * (MAX_OUTPUT_CHARS + 5), name="big"))
    out = box.run("big", "{}")
    assert len(out) <= MAX_OUTPUT_CHARS
    assert "output truncated by the skyloop client" in out


def test_async_tools_run_in_both_worlds() -> None:
    async def later(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    box = ToolBox.from_spec(later)
    assert box._tools["later"].is_async
    assert box.run("later", '{"x": 2}') == "4"
    assert asyncio.run(box.arun("later", '{"x": 3}')) == "6"
    assert asyncio.run(box.arun("later", '{"x": "bad"}')).startswith("Error: invalid arguments for later")
    assert asyncio.run(ToolBox.from_spec(search).arun("search", '{"query": "q"}')) == '["q","q"]'


def test_tool_objects_pass_through() -> None:
    made = Tool(name="t", invoke=lambda args: "ok")
    assert ToolBox.from_spec([made]).run("t", None) == "ok"
