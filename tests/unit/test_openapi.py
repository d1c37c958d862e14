"""The OpenAPI document describes exactly the routes the API serves, from the models they validate with."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from skyloop import __version__
from skyloop.api import openapi
from skyloop.api.app import app, handle
from skyloop.api.requests import CreateSessionRequest, SessionEventRequest


def _served_routes() -> set[tuple[str, str]]:
    return {(r.method, r.path) for r in app._static_routes + app._dynamic_routes}


def test_every_served_route_is_described_and_every_description_is_served() -> None:
    described = {(op.method, op.path) for op in openapi.OPERATIONS}
    assert described == _served_routes()
    assert len(openapi.OPERATIONS) == len(described), "a route is described twice"


def test_the_document_is_openapi_31_with_the_request_models_schemas() -> None:
    doc = openapi.document(__version__)
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == __version__
    assert set(doc["paths"]) >= {
        "/v1/sessions",
        "/v1/sessions/{session_id}/events",
        "/health",
        "/openapi.json",
    }
    events = doc["paths"]["/v1/sessions/{session_id}/events"]["post"]
    assert events["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SessionEventRequest"
    }
    assert doc["components"]["schemas"]["SessionEventRequest"]["properties"].keys() == (
        SessionEventRequest.model_json_schema()["properties"].keys()
    )
    assert [p["name"] for p in events["parameters"]] == ["session_id"]
    create = doc["paths"]["/v1/sessions"]["post"]["requestBody"]["content"]
    assert set(create) == {"application/json", "multipart/form-data"}
    assert (
        doc["components"]["schemas"]["CreateSessionRequest"]["required"]
        == (CreateSessionRequest.model_json_schema()["required"])
    )
    listing = {p["name"] for p in doc["paths"]["/v1/sessions"]["get"]["parameters"]}
    assert {"limit", "after", "order", "agent_name"} <= listing
    # every $ref resolves
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in doc["components"]["schemas"], ref


def test_the_api_serves_the_document(monkeypatch: Any) -> None:
    monkeypatch.setenv("SKYLOOP_REQUIRE_TOKEN", "false")
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/openapi.json",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "http": {"method": "GET", "path": "/openapi.json", "protocol": "HTTP/1.1", "sourceIp": "1.1.1.1"},
            "requestId": uuid.uuid4().hex,
            "stage": "$default",
            "timeEpoch": int(time.time() * 1000),
        },
        "isBase64Encoded": False,
    }
    out = handle(event, None)
    assert out["statusCode"] == 200
    assert json.loads(out["body"]) == openapi.document(__version__)


def test_fork_import_and_file_routes_declare_their_bodies() -> None:
    doc = openapi.document(__version__)
    paths, schemas = doc["paths"], doc["components"]["schemas"]

    def success(method: str, path: str, status: str) -> dict[str, Any]:
        return dict(paths[path][method]["responses"][status]["content"])

    fork = paths["/v1/sessions/{session_id}/fork"]["post"]
    assert fork["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ForkSessionRequest"
    }
    assert "up_to_response_id" in schemas["ForkSessionRequest"]["properties"]
    assert "initial_items" in schemas["CreateSessionRequest"]["properties"]
    children = success("get", "/v1/sessions/{session_id}/child_sessions", "200")
    assert children["application/json"]["schema"] == {"$ref": "#/components/schemas/ChildSessionList"}
    files = "/v1/sessions/{session_id}/resources/files"
    upload = paths[files]["post"]["requestBody"]["content"]
    assert set(upload) == {"multipart/form-data", "application/octet-stream"}
    assert success("post", files, "201")["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SessionFileResource"
    }
    assert set(success("get", files + "/{file_id}/content", "200")) == {"application/octet-stream"}
    assert [p["name"] for p in paths[files + "/{file_id}"]["delete"]["parameters"]] == [
        "session_id",
        "file_id",
    ]
    assert "param" in schemas["Error"]["properties"]["error"]["properties"]
