"""Client-side tools: the schemas a message declares, and the code that answers parked calls.

A turn parks until every client-side call is answered, so :meth:`ToolBox.run`
never raises: bad arguments, a failing tool, an unknown name or a declined
confirmation all become an ``Error: ...`` output the model can read.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

__all__ = ["Tool", "ToolBox", "ToolsSpec", "tool"]

MAX_OUTPUT_CHARS = 200_000  # the server answers 413 above this; a clipped answer beats a stuck turn
_TRUNCATED = "\n\n... (output truncated by the skyloop client: {total} chars, showing the first {shown})"

ToolsSpec = Any
"""A tool-set name (``"coding"``), a tool-set module (``TOOLS`` + ``execute_tool``), a callable,
a :class:`Tool`, a function-tool schema dict, or a sequence mixing them."""


@dataclass
class Tool:
    """One client-side tool: the schema the model sees and how to run a call.

    ``invoke`` receives the decoded arguments dict; it may return any value
    (strings pass through, anything else is JSON-encoded) or an awaitable.
    A tool without ``invoke`` is declared to the model but answered with an
    error, since this client cannot run it.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    invoke: Callable[[dict[str, Any]], Any] | None = None
    is_async: bool = False
    """``invoke`` returns an awaitable: the async client awaits it on its loop instead of a thread."""

    def schema(self) -> dict[str, Any]:
        """The nested function-tool form the message carries."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> Any:
    """Make a :class:`Tool` from a function; usable as ``@tool`` or ``@tool(name=...)``.

    The schema comes from the signature (types through pydantic) and the
    docstring (first paragraph = description, ``Args:`` lines = parameter
    descriptions) unless ``parameters``/``description`` are given. Arguments
    are validated against the signature before the call when derived.
    """

    def wrap(func: Callable[..., Any]) -> Tool:
        return _from_callable(func, name=name, description=description, parameters=parameters)

    return wrap(fn) if fn is not None else wrap


def _from_callable(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> Tool:
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _parse_docstring(doc)
    if parameters is not None:
        schema = parameters

        def invoke(args: dict[str, Any]) -> Any:
            return fn(**args)

    else:
        model = _arguments_model(fn, tool_name, arg_docs)
        schema = _published_schema(model)
        field_names = list(model.model_fields)

        def invoke(args: dict[str, Any]) -> Any:
            try:
                validated = model.model_validate(args)
            except ValidationError as exc:
                raise _ArgumentsError(_format_validation_error(exc)) from exc
            return fn(**{k: getattr(validated, k) for k in field_names})

    return Tool(
        name=tool_name,
        description=description or summary,
        parameters=schema,
        invoke=invoke,
        is_async=inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__),
    )


def _arguments_model(fn: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]) -> type[BaseModel]:
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        doc = arg_docs.get(param.name)
        fields[param.name] = (annotation, Field(default, description=doc) if doc else default)
    model_name = re.sub(r"\W", "_", tool_name) + "Arguments"
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)


def _published_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Non-strict JSON schema with ``required`` always present (what the coding set publishes)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("additionalProperties", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and Google-style ``Args:`` descriptions by parameter name."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if _SECTION.match(stripped):
            in_args = stripped.rstrip(":") in ("Args", "Arguments", "Parameters")
            current = None
            continue
        if not in_args:
            continue
        match = _ARG_LINE.match(line)
        if match and len(line) - len(line.lstrip()) <= 4:
            current = match.group(1).lstrip("*")
            args[current] = match.group(2).strip()
        elif current and stripped:
            args[current] = (args[current] + " " + stripped).strip()
    return " ".join(summary), args


# ---------------------------------------------------------------------------- the box
class ToolBox:
    """The tools of one turn, by name."""

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"two client tools are named {t.name!r}")
            self._tools[t.name] = t

    @classmethod
    def from_spec(cls, spec: ToolsSpec) -> ToolBox:
        if spec is None:
            return cls()
        if isinstance(spec, ToolBox):
            return spec
        return cls(_collect(spec))

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def without(self, names: set[str]) -> ToolBox:
        """The box less the tools of these names (those the agent runs on the server itself)."""
        return ToolBox([t for name, t in self._tools.items() if name not in names])

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    def run(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Answer one call synchronously (an async tool runs on its own event loop)."""
        found = self._lookup(name, arguments)
        if isinstance(found, str):
            return found
        invoke, args = found
        try:
            value = invoke(args)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
        except Exception as exc:
            return _failure(name, exc)
        return _render(value)

    async def arun(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Answer one call without blocking the loop: sync tools run in a worker thread."""
        found = self._lookup(name, arguments)
        if isinstance(found, str):
            return found
        invoke, args = found
        try:
            if self._tools[name].is_async:
                value = invoke(args)
            else:
                value = await asyncio.to_thread(invoke, args)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return _failure(name, exc)
        return _render(value)

    def _lookup(
        self, name: str, arguments: str | Mapping[str, Any] | None
    ) -> str | tuple[Callable[[dict[str, Any]], Any], dict[str, Any]]:
        target = self._tools.get(name)
        if target is None:
            offered = ", ".join(self._tools) or "none"
            return f"Error: unknown tool {name!r} (this client offers: {offered})"
        if target.invoke is None:
            return f"Error: tool {name!r} has no implementation in this client"
        args = _decode_arguments(arguments)
        if isinstance(args, str):
            return f"Error: invalid arguments for {name}: {args}"
        return target.invoke, args


class _ArgumentsError(Exception):
    """Arguments that do not fit the tool's signature; reported as such, not as a tool failure."""


async def _await(value: Any) -> Any:
    return await value


def _decode_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return "arguments are not valid JSON"
    if not isinstance(value, dict):
        return "arguments must be a JSON object"
    return value


def _failure(name: str, exc: Exception) -> str:
    if isinstance(exc, _ArgumentsError):
        return _clip(f"Error: invalid arguments for {name}: {exc}")
    return _clip(f"Error: {name} failed: {type(exc).__name__}: {exc}")


def _format_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in error["loc"])
        parts.append(f"{loc}: {error['msg']}" if loc else error["msg"])
    return "; ".join(parts)


def _render(value: Any) -> str:
    """Strings pass through; anything else (models and dataclasses included) becomes JSON."""
    if isinstance(value, str):
        return _clip(value)
    if value is None:
        return ""
    from pydantic_core import to_json

    try:
        return _clip(to_json(value, fallback=str).decode())
    except (TypeError, ValueError):
        return _clip(str(value))


def _clip(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    notice = _TRUNCATED.format(total=len(text), shown="{shown}")
    shown = MAX_OUTPUT_CHARS - len(notice) - 10
    return text[:shown] + notice.format(shown=shown)


def _collect(spec: ToolsSpec) -> list[Tool]:
    if isinstance(spec, Tool):
        return [spec]
    if isinstance(spec, str):
        from skyloop.client_tools import get_tool_set  # only the chosen set is imported

        return _from_module(get_tool_set(spec))
    if isinstance(spec, types.ModuleType):
        return _from_module(spec)
    if isinstance(spec, Mapping):
        return [_from_schema(spec)]
    if callable(spec):
        return [_from_callable(spec)]
    if isinstance(spec, Sequence):
        out: list[Tool] = []
        for part in spec:
            out.extend(_collect(part))
        return out
    raise TypeError(f"cannot use {spec!r} as client tools")


def _from_module(module: types.ModuleType) -> list[Tool]:
    schemas = getattr(module, "TOOLS", None)
    execute = getattr(module, "execute_tool", None)
    if not isinstance(schemas, list) or not callable(execute):
        raise TypeError(
            f"{module.__name__} is not a tool set: it needs TOOLS and execute_tool(name, arguments)"
        )
    tools = []
    for schema in schemas:
        declared = _from_schema(schema)
        declared.invoke = _dispatcher(execute, declared.name)
        tools.append(declared)
    return tools


def _dispatcher(execute: Callable[[str, dict[str, Any]], Any], name: str) -> Callable[[dict[str, Any]], Any]:
    def invoke(args: dict[str, Any]) -> Any:
        return execute(name, args)

    return invoke


def _from_schema(schema: Mapping[str, Any]) -> Tool:
    """A declared-only tool from the nested (or flat Responses) function-tool form."""
    nested = schema.get("function")
    fn: Mapping[str, Any] = nested if isinstance(nested, Mapping) else schema
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool schema without a name: {schema!r}")
    return Tool(
        name=name,
        description=str(fn.get("description") or ""),
        parameters=dict(fn.get("parameters") or {"type": "object", "properties": {}}),
    )
