"""Route metadata and the OpenAPI document built from it (served at ``/openapi.json``).

Each route is declared with :func:`operation`, which registers it on its
Powertools router and records its summary, request models and status; the
document is generated from those same pydantic models, so it cannot drift
from what the routes accept (a test checks every route is described).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler.api_gateway import Router
    from pydantic import BaseModel

TITLE = "skyloop"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "param": {"type": "string", "description": "the request field at fault, when one is"},
            },
        }
    },
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # Powertools form: /v1/sessions/<session_id>
    summary: str
    status: int
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    multipart: bool = False
    errors: tuple[int, ...] = ()
    response: type[BaseModel] | None = None  # the success body's model, when one is declared
    upload: bool = False  # takes a file: multipart field ``file`` or the raw body
    binary: bool = False  # answers raw bytes, not JSON

    @property
    def openapi_path(self) -> str:
        return re.sub(r"<(\w+)>", r"{\1}", self.path)

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"<(\w+)>", self.path)


OPERATIONS: list[Operation] = []


def operation(
    router: Router,
    method: str,
    path: str,
    *,
    summary: str,
    status: int = 200,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    multipart: bool = False,
    errors: tuple[int, ...] = (),
    response: type[BaseModel] | None = None,
    upload: bool = False,
    binary: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a route on ``router`` and describe it for the OpenAPI document."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        OPERATIONS.append(
            Operation(method, path, summary, status, body, query, multipart, errors, response, upload, binary)
        )
        return getattr(router, method.lower())(path)(fn)

    return register


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _success_content(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    if op.binary:
        return {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    schema = _schema(op.response, components) if op.response is not None else {"type": "object"}
    return {"application/json": {"schema": schema}}


def document(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every registered operation."""
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for op in OPERATIONS:
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in op.path_params
        ]
        if op.query is not None:
            query_schema = op.query.model_json_schema()
            required = set(query_schema.get("required", []))
            for name, prop in query_schema.get("properties", {}).items():
                parameters.append({"name": name, "in": "query", "required": name in required, "schema": prop})
        entry: dict[str, Any] = {
            "summary": op.summary,
            "operationId": f"{op.method.lower()}_{re.sub(r'[^a-z0-9]+', '_', op.path.lower()).strip('_')}",
            "parameters": parameters,
            "responses": {
                str(op.status): {
                    "description": "success",
                    "content": _success_content(op, components),
                },
                "default": {
                    "description": "error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        }
        content: dict[str, Any] = {}
        if op.body is not None:
            content["application/json"] = {"schema": _schema(op.body, components)}
        if op.upload:
            content["multipart/form-data"] = {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            }
            content["application/octet-stream"] = {
                "schema": {"type": "string", "format": "binary", "description": "with ?filename="}
            }
        if op.multipart:
            content["multipart/form-data"] = {
                "schema": {
                    "type": "object",
                    "required": ["bundle"],
                    "properties": {
                        "bundle": {
                            "type": "string",
                            "format": "binary",
                            "description": "a gzipped tar agent bundle",
                        },
                        "metadata": {"type": "string", "description": "JSON: {title?, labels?}"},
                    },
                }
            }
        if content:
            entry["requestBody"] = {"required": True, "content": content}
        paths.setdefault(op.openapi_path, {})[op.method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": version},
        "paths": paths,
        "webhooks": webhooks(components),
        "components": {"schemas": components},
    }


WEBHOOK_HEADERS = {
    "webhook-id": "The event's id: the same on every attempt (dedupe on it).",
    "webhook-timestamp": "Unix seconds of this attempt.",
    "webhook-signature": "`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the endpoint's secret; "
    "two, space-separated, during a rotation's grace period.",
}


def webhooks(components: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.1's ``webhooks``: every lifecycle event an endpoint receives, as the POST it is."""
    from skyloop.lifecycle_events.models import EVENT_MODELS

    out: dict[str, Any] = {}
    for type_, model in EVENT_MODELS.items():
        out[type_] = {
            "post": {
                "summary": (model.__doc__ or type_).strip().splitlines()[0],
                "operationId": f"webhook_{type_.replace('.', '_')}",
                "parameters": [
                    {
                        "name": name,
                        "in": "header",
                        "required": True,
                        "description": text,
                        "schema": {"type": "string"},
                    }
                    for name, text in WEBHOOK_HEADERS.items()
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _schema(model, components)}},
                },
                "responses": {
                    "2XX": {"description": "received; any other answer, or none in 10 s, is retried"}
                },
            }
        }
    return out
