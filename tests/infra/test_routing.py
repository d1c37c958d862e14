"""Every route of every contract through the synthesized distribution (``infra.checks.routing``).

The synthesized stack must route every request a client sends to a function
that answers it; each planted defect (a body reaching the signed function URL,
an API path falling through to the console, a method a behaviour refuses, a
viewer function that misroutes) must be reported.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra import constants as C
from infra.checks import check_template
from infra.checks.routing import (
    Route,
    check_routing,
    contract_routes,
    path_matches,
    prefix_routes,
    reached_origins,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def routes() -> list[Route]:
    return contract_routes()


def _distribution(template: dict[str, Any]) -> dict[str, Any]:
    (config,) = [
        r["Properties"]["DistributionConfig"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudFront::Distribution"
    ]
    return config  # type: ignore[no-any-return]


def _behavior(config: dict[str, Any], pattern: str) -> dict[str, Any]:
    (behavior,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == pattern]
    return behavior  # type: ignore[no-any-return]


def _rules(findings: list[Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for finding in findings:
        out.setdefault(finding.rule, set()).add(finding.resource.split(" ", 1)[1].split(" (")[0])
    return out


def test_the_routes_walked_are_every_contracts(routes: list[Route]) -> None:
    walked = {(r.method, r.template) for r in routes}
    # skyloop's and omnigent's /v1, the stream, OpenAI's /openai/v1 and its stream, the health checks
    assert ("POST", "/v1/sessions/<session_id>/events") in walked
    assert ("GET", "/v1/sessions/{session_id}/stream") in walked
    assert ("POST", "/openai/v1/agents/sessions") in walked
    assert ("POST", "/openai/v1/agents/sessions/<session_id>/events") in walked
    assert ("GET", "/openai/v1/agents/sessions/{session_id}/events") in walked
    assert ("GET", "/health") in walked
    assert len(routes) > 60
    by = {(r.method, r.template): r.function for r in routes}
    assert by[("GET", "/v1/sessions/{session_id}/stream")] == "stream"
    assert by[("POST", "/openai/v1/agents/sessions/<session_id>/events")] == "api"
    # Claude Managed Agents' /anthropic/v1: its REST paths are the API's, its events stream the stream's
    assert by[("POST", "/anthropic/v1/sessions")] == "api"
    assert by[("POST", "/anthropic/v1/sessions/<session_id>/events")] == "api"
    assert by[("GET", "/anthropic/v1/sessions/<session_id>/events")] == "api"
    assert by[("POST", "/anthropic/v1/agents")] == "api"
    assert by[("GET", "/anthropic/v1/sessions/{session_id}/events/stream")] == "stream"


def test_claudes_routes_reach_their_origins(template_json: dict[str, Any], routes: list[Route]) -> None:
    reached = reached_origins(template_json, routes)

    def origin(method: str, path: str) -> tuple[str, str | None]:
        found = reached[(method, path)]
        assert found is not None, f"{method} {path} leaves the edge for no origin"
        return found.kind, found.function

    # the posts (bodies) reach the HTTP API, never the signed function URL
    assert origin("POST", "/anthropic/v1/sessions") == ("http-api", "api")
    assert origin("POST", "/anthropic/v1/sessions/<session_id>/events") == ("http-api", "api")
    assert origin("GET", "/anthropic/v1/sessions/<session_id>/events") == ("http-api", "api")
    # the events stream reaches the stream function's URL
    assert origin("GET", "/anthropic/v1/sessions/{session_id}/events/stream") == ("function-url", "stream")


def test_the_edge_and_the_local_gateway_send_the_same_methods_to_the_stream_function() -> None:
    # the viewer-request function keeps these on the function URL; skyloop dev's gateway routes by the other
    from skyloop.stream.app import STREAM_METHODS

    assert tuple(C.STREAM_ORIGIN_METHODS) == tuple(STREAM_METHODS)


def test_the_stream_urls_cors_allows_every_method_whose_preflight_reaches_it(routes: list[Route]) -> None:
    # A preflight (OPTIONS) on a stream path stays on the function URL even when the request it asks
    # for goes on to the API (OpenAI's POST .../events): the URL's CORS must allow that method.
    patterns = (C.STREAM_PATH_PATTERN, *C.COMPAT_STREAM_PATH_PATTERNS)
    asked = {r.method for r in routes if any(path_matches(p, r.path) for p in patterns)} - {"HEAD", "OPTIONS"}
    assert "POST" in asked
    assert asked <= set(C.CORS_STREAM_METHODS)


def test_the_synthesized_stack_routes_every_request_to_a_function_that_answers_it(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    assert check_routing(template_json, routes) == []


def test_a_body_that_reaches_the_signed_function_url_is_found(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    # Given the stream behaviours without their viewer-request function (every method to the URL)
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    for pattern in (C.STREAM_PATH_PATTERN, *C.COMPAT_STREAM_PATH_PATTERNS):
        _behavior(config, pattern).pop("FunctionAssociations")
    found = _rules(check_routing(template, routes))
    # Then OpenAI's event post is refused by Lambda before the function runs: a finding
    assert found["routing/signed-body"] == {"POST /openai/v1/agents/sessions/<session_id>/events"}


def test_the_configuration_before_the_fix_is_found(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    # Given the session-create path sent whole to the stream function, as infra/ did before
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    stream = copy.deepcopy(_behavior(config, C.STREAM_PATH_PATTERN))
    stream.pop("FunctionAssociations")
    config["CacheBehaviors"].insert(0, {**stream, "PathPattern": "/openai/v1/agents/sessions"})
    found = _rules(check_routing(template, routes))
    # Then the create (with or without stream: true) cannot reach a function
    assert "POST /openai/v1/agents/sessions" in found["routing/signed-body"]


def test_an_api_path_that_falls_through_to_the_console_is_found(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    config["CacheBehaviors"].remove(_behavior(config, "/openai/*"))
    found = _rules(check_routing(template, routes))
    assert "GET /openai/v1/agents" in found["routing/console-fallthrough"]
    assert all(r.startswith(("GET /openai", "POST /openai", "DELETE /openai", "PATCH /openai", "PUT /openai"))
               for r in found["routing/console-fallthrough"])  # fmt: skip


def test_a_bare_api_prefix_that_falls_through_to_the_console_is_found(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    # Given the distribution as it was: only "/anthropic/*" and the like, which a bare "/anthropic" misses
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    for prefix in ("/v1", "/openai", "/anthropic", "/api"):
        config["CacheBehaviors"].remove(_behavior(config, prefix))
    found = _rules(check_routing(template, routes))
    # Then each bare prefix would get the console's index.html with 200: a finding each, and only those
    assert found == {"routing/console-fallthrough": {"GET /v1", "GET /openai", "GET /anthropic", "GET /api"}}


def test_every_contracts_bare_prefix_and_unknown_paths_are_walked(routes: list[Route]) -> None:
    from skyloop import console

    probes = {(r.method, r.path, r.function) for r in prefix_routes(routes)}
    for prefix in ("/v1", "/openai", "/anthropic", "/api"):
        assert ("GET", prefix, "api") in probes
        assert ("GET", f"{prefix}/no-such-route", "api") in probes
    # skyloop dev's gateway keeps the same paths off the console (skyloop.console.is_api_path)
    for prefix in C.API_PREFIXES:
        assert console.is_api_path(prefix), prefix
        assert console.is_api_path(f"{prefix}/no-such-route"), prefix


def test_a_method_a_behaviour_refuses_is_found(template_json: dict[str, Any], routes: list[Route]) -> None:
    template = copy.deepcopy(template_json)
    _behavior(_distribution(template), "/v1/*")["AllowedMethods"] = ["GET", "HEAD"]
    found = _rules(check_routing(template, routes))
    assert "POST /v1/sessions" in found["routing/method-not-allowed"]
    assert not any(r.startswith("GET ") for r in found["routing/method-not-allowed"])


def test_a_viewer_function_that_misroutes_is_found(
    template_json: dict[str, Any], routes: list[Route]
) -> None:
    # Given the stream behaviours' function selecting an origin the distribution does not have
    template = copy.deepcopy(template_json)
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::CloudFront::Function" and "selectRequestOriginById" in str(
            resource["Properties"]["FunctionCode"]
        ):
            code = resource["Properties"]["FunctionCode"]
            resource["Properties"]["FunctionCode"] = code.replace(
                f"selectRequestOriginById('{C.API_ORIGIN_ID}')", "selectRequestOriginById('nowhere')"
            )
    found = _rules(check_routing(template, routes))
    assert "POST /openai/v1/agents/sessions/<session_id>/events" in found["routing/edge-function"]


def test_a_stream_route_sent_to_the_api_is_found(template_json: dict[str, Any], routes: list[Route]) -> None:
    # Given the stream pattern removed: the stream path falls into /v1/* (the HTTP API), which has no stream
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    config["CacheBehaviors"].remove(_behavior(config, C.STREAM_PATH_PATTERN))
    found = _rules(check_routing(template, routes))
    assert found["routing/wrong-function"] == {
        "GET /v1/sessions/{session_id}/stream",
        "HEAD /v1/sessions/{session_id}/stream",
    }


def test_synth_stops_on_a_routing_finding(template_json: dict[str, Any]) -> None:
    # the check runs with every other one right after synth (infra/app.py): a defect stops the deploy
    template = copy.deepcopy(template_json)
    config = _distribution(template)
    config["CacheBehaviors"].remove(_behavior(config, "/openai/*"))
    assert any(f.rule == "routing/console-fallthrough" for f in check_template(template, {}))


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/v1/sessions/*/stream", "/v1/sessions/abc/stream", True),
        ("/v1/sessions/*/stream", "/v1/sessions/a/b/stream", True),  # * crosses "/"
        ("/v1/*", "/v1", False),
        ("/openai/v1/agents/sessions", "/openai/v1/agents/sessions", True),
        ("/openai/v1/agents/sessions", "/openai/v1/agents/sessions/x", False),
        ("/health", "/Health", False),  # case-sensitive
        ("/v?/x", "/v1/x", True),
        ("assets/*", "/assets/a.js", True),  # the leading slash is optional
        ("*", "/anything", True),
    ],
)
def test_path_patterns_match_as_cloudfront_matches_them(pattern: str, path: str, matches: bool) -> None:
    assert path_matches(pattern, path) is matches
