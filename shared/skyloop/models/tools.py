"""Server-side tools an agent spec declares: Lambda functions and remote MCP servers.

In the spec's ``tools`` map (omnigent's form: tool name -> definition)::

    tools:
      word_count:                      # a Lambda tool: the key is the tool's name
        type: lambda
        function: word-count           # a function name or ARN
        description: Count the words of a text
        parameters: {type: object, properties: {text: {type: string}}, required: [text]}
        timeout_s: 30                  # default 60, at most 900
        max_output_chars: 20000        # default 100000, at most 200000
        approval: required             # default never
      docs:                            # an MCP server: the key names the server
        type: mcp
        url: https://mcp.example.com/mcp
        headers: {Authorization: {secret: skyloop/mcp/docs-token}}   # or a plain string
        tools: [search, fetch]         # optional allow-list of the server's tools
        timeout_s: 60
        approval: never
      Bash: {type: hosted}             # a built-in run in the session's hosted environment
                                       # (skyloop.models.environment: Bash, Read, Write, Edit, Glob, Grep)

Entries marked ``runtime: client`` (omnigent's client tools, ``type: function``)
are not server tools: :func:`declared_client_tools` reads them, and every turn
of the agent offers them to the model beside the message's own ``tools``; a
call to one parks the turn like any client call. Other entries are left to
their own readers. Every field is validated when
the agent is registered, so a bad spec is a 400 then, never a failed turn.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from skyloop.errors import InvalidInputError
from skyloop.models.environment import HOSTED_TOOLS, HostedEnvironment, HostedTool
from skyloop.models.session import ClientTool

SERVER_TOOL_TYPES = ("lambda", "mcp", "hosted")
# Every tool type an entry of the map may name: the server tools, and client tools (omnigent's form);
# another is a 400 at registration (it would never be offered, and the model's calls would fail).
KNOWN_TOOL_TYPES = ("function", *SERVER_TOOL_TYPES)
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every provider accepts as a function name
# A function name, a partial ARN (account:function:name) or a full ARN, with an optional version/alias.
LAMBDA_FUNCTION = re.compile(
    r"^(arn:aws[a-zA-Z-]*:lambda:[a-z]{2}(-[a-z]+)+-\d:\d{12}:function:)?[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]{1,128})?$"
)
MAX_SERVER_TOOLS = 64
MAX_OUTPUT_CHARS = 200_000  # what one tool output may hold (the same cap as a client output)


def _object_schema(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None and value.get("type", "object") != "object":
        raise ValueError("must be a JSON Schema of type object")
    return value


ObjectSchema = Annotated[dict[str, Any] | None, AfterValidator(_object_schema)]  # a tool's parameters
Approval = Literal["never", "required"]


class SecretRef(BaseModel):
    """A header value read from Secrets Manager at call time, never stored in the spec."""

    model_config = ConfigDict(extra="forbid")

    secret: str = Field(min_length=1, max_length=2048)


class LambdaTool(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["lambda"]
    function: str
    description: str = Field(default="", max_length=10_000)
    parameters: ObjectSchema = None
    timeout_s: int = Field(default=60, ge=1, le=900)
    max_output_chars: int = Field(default=100_000, ge=1, le=MAX_OUTPUT_CHARS)
    approval: Approval = "never"

    @field_validator("function")
    @classmethod
    def _function(cls, value: str) -> str:
        if not LAMBDA_FUNCTION.match(value):
            raise ValueError("must be a Lambda function name or ARN (optionally with :version or :alias)")
        return value


class McpServer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["mcp"]
    url: str = Field(max_length=2048)
    description: str = Field(default="", max_length=10_000)
    headers: dict[str, str | SecretRef] = Field(default_factory=dict, max_length=32)
    tools: list[str] | None = Field(default=None, max_length=MAX_SERVER_TOOLS)
    timeout_s: int = Field(default=60, ge=1, le=300)
    max_output_chars: int = Field(default=100_000, ge=1, le=MAX_OUTPUT_CHARS)
    approval: Approval = "never"

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL (MCP's streamable HTTP transport)")
        return value

    @field_validator("headers")
    @classmethod
    def _header_names(cls, value: dict[str, str | SecretRef]) -> dict[str, str | SecretRef]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}", name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
        return value

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not TOOL_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid tool name")
        return value


class DeclaredTools(BaseModel):
    """The agent's server tools: Lambda tools by tool name, MCP servers by server name, the hosted
    built-ins (run in the session's hosted environment, :mod:`skyloop.environments`) by tool name."""

    lambdas: dict[str, LambdaTool] = Field(default_factory=dict)
    mcp: dict[str, McpServer] = Field(default_factory=dict)
    hosted: dict[str, HostedTool] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.lambdas and not self.mcp and not self.hosted


def _server_entry(name: Any, definition: Any) -> bool:
    """Whether an entry of the map is a server tool; a 400 for an unknown type or a bad name."""
    if isinstance(definition, dict) and "type" in definition and definition["type"] not in KNOWN_TOOL_TYPES:
        raise InvalidInputError(
            f"tools.{name}.type: unknown tool type {definition['type']!r} (known: {', '.join(KNOWN_TOOL_TYPES)})",
            param=f"tools.{name}.type",
        )
    if not isinstance(definition, dict) or definition.get("type") not in SERVER_TOOL_TYPES:
        return False
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise InvalidInputError(f"tools.{name}: a tool name is 1-64 letters, digits, '_' or '-'")
    if definition["type"] == "hosted" and name not in HOSTED_TOOLS:
        raise InvalidInputError(
            f"tools.{name}: a hosted tool is one of {', '.join(HOSTED_TOOLS)} (the coding tool set's names)",
            param=f"tools.{name}",
        )
    return True


def declared_tools(tools: Any) -> DeclaredTools:
    """The server tools of a spec's ``tools`` value; raises InvalidInputError naming the bad field."""
    if not isinstance(tools, dict):
        return DeclaredTools()  # a list or nothing: no server tools in this form
    out = DeclaredTools()
    for name, definition in tools.items():
        if not _server_entry(name, definition):
            continue
        try:
            if definition["type"] == "lambda":
                out.lambdas[name] = LambdaTool.model_validate(definition)
            elif definition["type"] == "hosted":
                out.hosted[name] = HostedTool.model_validate(definition)
            else:
                out.mcp[name] = McpServer.model_validate(definition)
        except ValidationError as exc:
            problems = "; ".join(
                f"tools.{name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidInputError(f"invalid server tool: {problems}") from None
    if len(out.lambdas) + len(out.mcp) + len(out.hosted) > MAX_SERVER_TOOLS:
        raise InvalidInputError(f"an agent declares at most {MAX_SERVER_TOOLS} server tools")
    return out


class ClientToolDecl(BaseModel):
    """An agent-declared client tool: the client runs it, as if the message had sent it."""

    model_config = ConfigDict(extra="ignore")  # omnigent may carry keys skyloop has no use for

    type: Literal["function"] = "function"
    runtime: Literal["client"]
    description: str = Field(default="", max_length=10_000)
    parameters: ObjectSchema = None


def _entries(tools: Any) -> list[tuple[str, Any]]:
    """``(name, definition)`` pairs of the map form, or of a list of ``{name, ...}`` entries."""
    if isinstance(tools, dict):
        return [(str(k), v) for k, v in tools.items()]
    if isinstance(tools, list):
        return [(str(t.get("name")), t) for t in tools if isinstance(t, dict) and t.get("name")]
    return []


def declared_client_tools(tools: Any) -> list[ClientTool]:
    """The spec's ``runtime: client`` tools; raises InvalidInputError naming a bad one."""
    out: list[ClientTool] = []
    for name, definition in _entries(tools):
        if not isinstance(definition, dict) or definition.get("runtime") != "client":
            continue
        if not TOOL_NAME.match(name):
            raise InvalidInputError(f"tools.{name}: a tool name is 1-64 letters, digits, '_' or '-'")
        try:
            decl = ClientToolDecl.model_validate(definition)
        except ValidationError as exc:
            problems = "; ".join(
                f"tools.{name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidInputError(f"invalid client tool: {problems}") from None
        out.append(ClientTool(name=name, description=decl.description or None, parameters=decl.parameters))
    return out


def merge_client_tools(declared: list[ClientTool], message: list[ClientTool] | None) -> list[ClientTool]:
    """The agent's client tools and the message's, the message's winning a name clash."""
    sent = {t.name for t in message or []}
    return [t for t in declared if t.name not in sent] + list(message or [])


def tool_entries(tools: Any) -> list[dict[str, Any]]:
    """The spec's tools as the list omnigent's SDK reads: ``{name, runtime, type, description, parameters}``.

    ``runtime`` is ``client`` for the tools the client must run, ``server`` for the rest.
    """
    out: list[dict[str, Any]] = []
    for name, definition in _entries(tools):
        d = definition if isinstance(definition, dict) else {}
        runtime = "client" if d.get("runtime") == "client" else "server"
        out.append(
            {
                "name": name,
                "runtime": runtime,
                "type": d.get("type", "function" if runtime == "client" else None),
                "description": d.get("description") or "",
                "parameters": d.get("parameters"),
            }
        )
    return out


def environment_of(spec: Any, override: HostedEnvironment | None = None) -> HostedEnvironment | None:
    """The environment a session of ``spec`` runs hosted tools in: the session's, the agent's, or the
    default one when the agent declares hosted tools and no environment; None when it has none."""
    if override is not None:
        return override
    declared = getattr(spec, "environment", None)
    if declared is not None:
        return declared
    return HostedEnvironment() if declared_tools(getattr(spec, "tools", None)).hosted else None
