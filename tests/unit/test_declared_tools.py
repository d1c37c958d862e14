"""Server tools in an agent spec: every field checked when the agent is registered."""

from __future__ import annotations

from typing import Any

import pytest

from skyloop.errors import InvalidInputError
from skyloop.models.agent import AgentSpec
from skyloop.models.tools import SecretRef, declared_tools
from skyloop.sessions import register_agent
from skyloop.store import MemoryStore
from skyloop.tools.catalog import lambda_tool


def test_lambda_and_mcp_tools_are_read_and_other_entries_left_alone() -> None:
    declared = declared_tools(
        {
            "count": {
                "type": "lambda",
                "function": "arn:aws:lambda:eu-west-1:123456789012:function:count:live",
            },
            "docs": {
                "type": "mcp",
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": {"secret": "s"}},
            },
            "Read": {"type": "function", "runtime": "client", "parameters": {"type": "object"}},
            "plain": "a description-only tool",
        }
    )
    assert list(declared.lambdas) == ["count"]
    assert declared.lambdas["count"].timeout_s == 60
    assert declared.mcp["docs"].headers["Authorization"] == SecretRef(secret="s")
    assert declared_tools(None).empty
    assert declared_tools([{"name": "x"}]).empty


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        ({"t": {"type": "lambda"}}, "tools.t.function: Field required"),
        ({"t": {"type": "lambda", "function": "has space"}}, "tools.t.function"),
        ({"t": {"type": "lambda", "function": "f", "timeout_s": 901}}, "tools.t.timeout_s"),
        ({"t": {"type": "lambda", "function": "f", "max_output_chars": 0}}, "tools.t.max_output_chars"),
        ({"t": {"type": "lambda", "function": "f", "approval": "maybe"}}, "tools.t.approval"),
        ({"t": {"type": "lambda", "function": "f", "parameters": {"type": "string"}}}, "tools.t.parameters"),
        ({"t": {"type": "lambda", "function": "f", "colour": "red"}}, "tools.t.colour"),
        ({"t": {"type": "mcp", "url": "ftp://x"}}, "tools.t.url"),
        ({"t": {"type": "mcp", "url": "https://x", "headers": {"bad header": "v"}}}, "tools.t.headers"),
        ({"t": {"type": "mcp", "url": "https://x", "tools": ["no spaces please"]}}, "tools.t.tools"),
        ({"bad name!": {"type": "lambda", "function": "f"}}, "tools.bad name!"),
    ],
)
def test_a_bad_server_tool_is_refused_naming_the_field(tools: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match="tools") as caught:
        declared_tools(tools)
    assert problem in caught.value.message


def test_registration_refuses_a_bad_server_tool_and_stores_nothing() -> None:
    store = MemoryStore()
    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "executor": {"model": "m"},
            "tools": {"t": {"type": "lambda", "function": "f", "timeout_s": 0}},
        }
    )
    with pytest.raises(InvalidInputError):
        register_agent(store, spec)
    assert store.list_agents()[0] == []


def test_outputs_are_cut_to_the_tools_limit_saying_so() -> None:
    tool = lambda_tool(
        "t", declared_tools({"t": {"type": "lambda", "function": "f", "max_output_chars": 5}}).lambdas["t"]
    )
    assert tool.bounded("12345") == "12345"
    assert tool.bounded("1234567").startswith("12345\n…[truncated: the output was 2 characters over")


@pytest.mark.parametrize("runtime", ["lambda", "client"])
def test_a_tools_parameters_must_be_an_object_schema(runtime: str) -> None:
    from skyloop.models.tools import declared_client_tools

    tool: dict[str, Any] = {"description": "x", "parameters": {"type": "string"}}
    if runtime == "lambda":
        tools = {"shout": {"type": "lambda", "function": "shout", **tool}}
        check = declared_tools
    else:
        tools = {"Read": {"type": "function", "runtime": "client", **tool}}
        check = declared_client_tools  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="JSON Schema of type object"):
        check(tools)
    check({name: {**spec, "parameters": {"type": "object"}} for name, spec in tools.items()})
