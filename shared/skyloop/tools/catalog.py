"""The server tools a turn offers the model, and what each one needs to run.

Lambda tools come straight from the spec. An MCP server's tools are listed
once per agent version: the first model step that needs them asks the server
and keeps the listing in the table; every later step (and turn) reads it
there, and a warm container keeps it in memory as well. Agent versions are
immutable, so the listing never goes stale for the version that made it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from skyloop.models.session import ClientTool
from skyloop.models.tools import TOOL_NAME, DeclaredTools, LambdaTool, McpServer, SecretRef, declared_tools

if TYPE_CHECKING:
    from skyloop.models.environment import HostedTool

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.secrets import SecretStore
    from skyloop.store import Store

TRUNCATED = "\n…[truncated: the output was {over} characters over this tool's limit of {limit}]"


class ToolSetupError(Exception):
    """The agent's server tools cannot be offered (a server unreachable, a name taken twice)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ServerTool:
    name: str
    kind: Literal["lambda", "mcp", "hosted"]
    description: str
    parameters: dict[str, Any]
    approval: Literal["never", "required"]
    timeout_s: int
    max_output_chars: int
    function: str | None = None  # Lambda tools
    server: str | None = None  # MCP tools: the server's name in the spec

    def definition(self) -> ClientTool:
        """The tool as the model sees it (the same shape a client tool has)."""
        return ClientTool(name=self.name, description=self.description, parameters=self.parameters)

    def bounded(self, output: str) -> str:
        """The output cut to this tool's limit, saying so (the model should know it saw a part)."""
        if len(output) <= self.max_output_chars:
            return output
        over = len(output) - self.max_output_chars
        return output[: self.max_output_chars] + TRUNCATED.format(over=over, limit=self.max_output_chars)


@dataclass
class Catalog:
    tools: dict[str, ServerTool] = field(default_factory=dict)
    declared: DeclaredTools = field(default_factory=DeclaredTools)

    def definitions(self) -> list[ClientTool]:
        return [t.definition() for t in self.tools.values()]

    def get(self, name: str) -> ServerTool | None:
        return self.tools.get(name)


_listings: dict[tuple[str, str], list[dict[str, Any]]] = {}
_listings_lock = threading.Lock()


def catalog_for(agent: Agent, store: Store, secrets: SecretStore | None) -> Catalog:
    """The agent version's server tools, MCP servers listed at most once per version."""
    declared = declared_tools(agent.spec.tools)
    catalog = Catalog(declared=declared)
    for name, tool in declared.lambdas.items():
        catalog.tools[name] = lambda_tool(name, tool)
    for name, hosted in declared.hosted.items():
        catalog.tools[name] = hosted_tool(name, hosted)
    for server_name, server in declared.mcp.items():
        for listed in _listing(agent, store, secrets, server_name, server):
            name = str(listed.get("name", ""))
            if not TOOL_NAME.match(name):
                continue  # a name no provider accepts cannot be offered
            if name in catalog.tools:
                raise ToolSetupError(
                    "tool_name_conflict",
                    f"MCP server '{server_name}' offers a tool named '{name}', "
                    "which another server tool of this agent already has",
                )
            catalog.tools[name] = ServerTool(
                name=name,
                kind="mcp",
                description=str(listed.get("description") or ""),
                parameters=listed.get("parameters") or {"type": "object", "properties": {}},
                approval=server.approval,
                timeout_s=server.timeout_s,
                max_output_chars=server.max_output_chars,
                server=server_name,
            )
    return catalog


def hosted_tool(name: str, tool: HostedTool) -> ServerTool:
    """A built-in run in the session's hosted environment, as the ``coding`` client tool set defines it."""
    from skyloop.client_tools.coding import TOOLS

    (definition,) = [t["function"] for t in TOOLS if t["function"]["name"] == name]
    description = tool.description or definition["description"]
    return ServerTool(
        name=name,
        kind="hosted",
        description=f"{description} Runs in the session's sandboxed workspace, /workspace.",
        parameters=definition["parameters"],
        approval=tool.approval,
        timeout_s=tool.timeout_s,
        max_output_chars=tool.max_output_chars,
    )


def lambda_tool(name: str, tool: LambdaTool) -> ServerTool:
    return ServerTool(
        name=name,
        kind="lambda",
        description=tool.description,
        parameters=tool.parameters or {"type": "object", "properties": {}},
        approval=tool.approval,
        timeout_s=tool.timeout_s,
        max_output_chars=tool.max_output_chars,
        function=tool.function,
    )


def _listing(
    agent: Agent, store: Store, secrets: SecretStore | None, server_name: str, server: McpServer
) -> list[dict[str, Any]]:
    key = (agent.id, server_name)
    with _listings_lock:
        if key in _listings:
            return _listings[key]
    listing = store.get_tool_listing(agent.id, server_name)
    if listing is None:
        from skyloop.tools import mcp_client

        try:
            listing = mcp_client.list_tools(server, headers_for(server, secrets))
        except mcp_client.McpError as exc:
            raise ToolSetupError(
                "tool_server_unavailable", f"listing the tools of '{server_name}': {exc}"
            ) from exc
        store.put_tool_listing(agent.id, server_name, listing)
        listing = store.get_tool_listing(agent.id, server_name) or listing  # a concurrent first lister won
    with _listings_lock:
        _listings[key] = listing
    return listing


def headers_for(server: McpServer, secrets: SecretStore | None) -> dict[str, str]:
    """The server's headers with secret references read (cached by the secret store)."""
    headers: dict[str, str] = {}
    for name, value in server.headers.items():
        if isinstance(value, SecretRef):
            if secrets is None:
                raise ToolSetupError(
                    "tool_secret_unavailable",
                    f"header '{name}' names a secret, but no secret store is configured",
                )
            headers[name] = secrets.get(value.secret)
        else:
            headers[name] = value
    return headers


def output_text(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
