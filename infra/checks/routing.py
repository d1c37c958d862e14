"""Every route of every contract, with each of its methods, walked through the synthesized distribution.

CloudFront picks a behaviour by path alone, in the order the distribution lists
them (the first pattern that matches wins, else the default), refuses a method
the behaviour does not allow (403), runs the behaviour's viewer-request
function (which may select another origin: ``cf.selectRequestOriginById``), and
sends the request to the origin. Two things on that way fail only on AWS:

* **a body signed for a function URL** (``routing/signed-body``): Origin Access
  Control signs CloudFront's request to a Lambda function URL, and Lambda refuses
  a signed POST, PUT or PATCH whose body hash the viewer did not send
  (``x-amz-content-sha256``; CloudFront Developer Guide, "Restrict access to an AWS
  Lambda function URL origin": "Lambda doesn't support unsigned payloads"). No
  client of ours and no SDK sends it, so such a route answers 403 to everyone;
* **an API path that falls through to the console's bucket**
  (``routing/console-fallthrough``), answered with the console's ``index.html``:
  a route, or a contract's bare prefix (``/anthropic``) or an unknown path under
  it, which no route declares (``prefix_routes``).

Also reported: a method the behaviour does not allow (``routing/method-not-allowed``),
a route that reaches a function that has no such route (``routing/wrong-function``),
and a viewer-request function that fails or answers at the edge (``routing/edge-function``).

The routes are read from the code, so a new one is walked without a change here:
the API function's (``skyloop.api.openapi.OPERATIONS``: skyloop's and omnigent's
``/v1``, OpenAI's ``/openai/v1``, Claude Managed Agents' ``/anthropic/v1``,
``/api``, ``/health``) and the stream function's (its Starlette app:
``/v1/sessions/{id}/stream``, OpenAI's events stream, Claude's
``/anthropic/v1/sessions/{id}/events/stream``). The viewer-request functions are run for real, in ``node``, with
``cloudfront``'s origin helpers recorded.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from infra.checks.findings import Finding

METHODS = ("GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
SAMPLE_ID = "0123456789abcdef0123456789abcdef"  # a path parameter (ids are 32 hex characters)

# Runs a CloudFront Function's handler over a list of requests, as CloudFront's JavaScript runtime 2.0
# would: `import cf from 'cloudfront'` becomes a stub that records the origin the code selects.
_NODE_RUN = """
const vm = require('vm');
let input = '';
process.stdin.on('data', (d) => (input += d)).on('end', () => {
  const { code, requests } = JSON.parse(input);
  const out = [];
  for (const request of requests) {
    const selected = [];
    const cf = {
      selectRequestOriginById: (id) => selected.push({ id: id }),
      updateRequestOrigin: (params) => selected.push({ update: params }),
      createRequestOriginGroup: (params) => selected.push({ group: params }),
    };
    const source = code.replace(/^\\s*import\\s+(\\w+)\\s+from\\s+['"]cloudfront['"];?/m, 'var $1 = __cf;');
    try {
      const context = vm.createContext({ __cf: cf });
      new vm.Script(source, { filename: 'cloudfront-function.js' }).runInContext(context, { timeout: 1000 });
      const result = context.handler(JSON.parse(JSON.stringify({ request: request })));
      const answered = result && result.statusCode !== undefined;
      out.push({ selected: selected, answered: answered ? result.statusCode : null });
    } catch (e) {
      out.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  process.stdout.write(JSON.stringify(out));
});
"""


@dataclass(frozen=True)
class Route:
    """One request a contract defines: who must answer it (``api`` or ``stream``), and a path to send."""

    method: str
    path: str
    function: str
    template: str  # the path as declared, for messages


def _sample(template: str) -> str:
    return re.sub(r"<\w+>|\{\w+(:\w+)?\}", SAMPLE_ID, template)


def contract_routes() -> list[Route]:
    """Every route of every contract skyloop serves, with the function that answers it."""
    import skyloop.api.routes  # noqa: F401  (registers every operation)
    from skyloop.api.openapi import OPERATIONS
    from skyloop.stream.app import create_app

    out: list[Route] = []
    stream_app = create_app()
    streamed: set[tuple[str, str]] = set()
    for route in stream_app.routes:
        path = getattr(route, "path", "")
        if path in ("/healthz",):  # the Web Adapter's readiness check, never routed by CloudFront
            continue
        from skyloop.stream.app import STREAM_METHODS

        for method in sorted(
            (getattr(route, "methods", None) or {"GET"}) & set(STREAM_METHODS) - {"OPTIONS"}
        ):
            streamed.add((method, _sample(path)))
            out.append(Route(method, _sample(path), "stream", path))
    for op in OPERATIONS:
        path = _sample(op.path)
        if (op.method, path) in streamed:
            continue
        out.append(Route(op.method, path, "api", op.path))
    return out


UNKNOWN_SEGMENT = "no-such-route"


def prefix_routes(routes: list[Route]) -> list[Route]:
    """A GET on each contract's bare prefix (``/anthropic``) and on an unknown path under it: no route
    declares them, yet they must reach the API (its 404 in that contract's shape), never the console's
    ``index.html`` with 200, which an SDK or a person probing the base URL takes for an answer."""
    prefixes = sorted({"/" + r.path.split("/")[1] for r in routes if r.path.count("/") > 1})
    return [
        *(Route("GET", p, "api", p) for p in prefixes),
        *(Route("GET", f"{p}/{UNKNOWN_SEGMENT}", "api", f"{p}/<unknown>") for p in prefixes),
    ]


def stream_app_answers(method: str, path: str) -> bool:
    """Whether the stream function's app has a route for the request (it hands some on to the API)."""
    from starlette.routing import Match

    from skyloop.stream.app import create_app

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    return any(route.matches(scope)[0] == Match.FULL for route in create_app().routes)


# ------------------------------------------------------------------------------------ the distribution
def path_matches(pattern: str, path: str) -> bool:
    """CloudFront's path patterns: case-sensitive, ``*`` any run of characters (``/`` too), ``?`` one."""
    if not pattern.startswith("/"):
        pattern = "/" + pattern
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, path, re.DOTALL) is not None


@dataclass(frozen=True)
class Origin:
    id: str
    kind: str  # "http-api", "function-url", "s3", "other"
    # the manifest function behind it (an HTTP API's integration target, a function URL's function,
    # known by the manifest description; the stack's one HTTP API and one URL when not: the api and
    # stream functions, as tests/infra/test_stack.py holds)
    function: str | None
    signs_body: bool  # Origin Access Control signs every request to a Lambda function URL


def _function_names(resources: dict[str, Any]) -> dict[str, str]:
    from skyloop import manifest

    by_description = {spec.description: spec.name for spec in manifest.FUNCTIONS}
    out = {}
    for lid, resource in resources.items():
        if resource.get("Type") == "AWS::Lambda::Function":
            description = resource.get("Properties", {}).get("Description")
            if isinstance(description, str) and description in by_description:
                out[lid] = by_description[description]
    return out


def _referenced(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _referenced(item)
    elif isinstance(node, dict):
        if isinstance(node.get("Ref"), str):
            found.add(node["Ref"])
        if isinstance(node.get("Fn::GetAtt"), list):
            found.add(node["Fn::GetAtt"][0])
        for value in node.values():
            found |= _referenced(value)
    return found


def _api_function(resources: dict[str, Any], api_id: str, functions: dict[str, str]) -> str | None:
    """The function an HTTP API's integrations invoke (one, for this stack's ``$default`` route)."""
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::ApiGatewayV2::Integration" and props.get("ApiId") == {"Ref": api_id}:
            for lid in _referenced(props.get("IntegrationUri")):
                if lid in functions:
                    return functions[lid]
    return None


def _origins(template: dict[str, Any], config: dict[str, Any]) -> dict[str, Origin]:
    resources = template.get("Resources", {})
    functions = _function_names(resources)
    out = {}
    for origin in config.get("Origins", []):
        refs = _referenced(origin.get("DomainName"))
        kinds = {resources.get(r, {}).get("Type") for r in refs}
        oac: dict[str, Any] = {}
        for lid in _referenced(origin.get("OriginAccessControlId")):
            oac = resources.get(lid, {}).get("Properties", {}).get("OriginAccessControlConfig") or {}
        if "AWS::Lambda::Url" in kinds:
            (url,) = [r for r in refs if resources.get(r, {}).get("Type") == "AWS::Lambda::Url"]
            target = _referenced(resources[url]["Properties"].get("TargetFunctionArn"))
            function = next((functions[t] for t in target if t in functions), "stream")
            signs = oac.get("OriginAccessControlOriginType") == "lambda"
            signs = signs and oac.get("SigningBehavior") in ("always", "no-override")
            out[origin["Id"]] = Origin(origin["Id"], "function-url", function, signs)
        elif "AWS::ApiGatewayV2::Api" in kinds:
            (api,) = [r for r in refs if resources.get(r, {}).get("Type") == "AWS::ApiGatewayV2::Api"]
            function = _api_function(resources, api, functions) or "api"
            out[origin["Id"]] = Origin(origin["Id"], "http-api", function, False)
        elif "S3OriginConfig" in origin or "AWS::S3::Bucket" in kinds:
            out[origin["Id"]] = Origin(origin["Id"], "s3", None, False)
        else:
            out[origin["Id"]] = Origin(origin["Id"], "other", None, False)
    return out


def _function_code(template: dict[str, Any], association: dict[str, Any]) -> str | None:
    for lid in _referenced(association.get("FunctionARN")):
        resource = template.get("Resources", {}).get(lid, {})
        if resource.get("Type") == "AWS::CloudFront::Function":
            code = resource["Properties"].get("FunctionCode")
            return code if isinstance(code, str) else None
    return None


def run_viewer_function(code: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request's outcome under a CloudFront Function: ``selected`` origins, ``answered``, ``error``."""
    node = shutil.which("node")
    if node is None:
        return [
            {"error": "node is not installed (the CDK needs it anyway): the function could not be run"}
        ] * len(requests)
    proc = subprocess.run(
        [node, "-e", _NODE_RUN],
        input=json.dumps({"code": code, "requests": requests}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        return [{"error": proc.stderr.strip()[:500] or f"node exited {proc.returncode}"}] * len(requests)
    results: list[dict[str, Any]] = json.loads(proc.stdout)
    return results


def _viewer_request(method: str, path: str) -> dict[str, Any]:
    return {
        "method": method,
        "uri": path,
        "querystring": {},
        "headers": {
            "host": {"value": "d111111abcdef8.cloudfront.net"},
            "authorization": {"value": "Bearer sky_x"},
        },
        "cookies": {},
    }


def check_routing(template: dict[str, Any], routes: list[Route] | None = None) -> list[Finding]:
    """Every route x its method through the template's distribution(s); a finding per failure."""
    out: list[Finding] = []
    routes = contract_routes() if routes is None else routes
    routes = [*routes, *prefix_routes(routes)]
    for lid, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::CloudFront::Distribution":
            continue
        config = resource["Properties"]["DistributionConfig"]
        out += _check_distribution(template, lid, config, routes)
    return out


def _walk(
    template: dict[str, Any], config: dict[str, Any], routes: list[Route]
) -> list[tuple[Route, dict[str, Any], dict[str, Any]]]:
    """Each route's behaviour (CloudFront's first match) and its viewer-request function's outcome."""
    behaviors = [*config.get("CacheBehaviors", []), {**config["DefaultCacheBehavior"], "PathPattern": "*"}]
    chosen = [
        (route, next(b for b in behaviors if path_matches(b["PathPattern"], route.path))) for route in routes
    ]
    outcomes: dict[int, dict[str, Any]] = {}
    by_code: dict[str, list[int]] = {}
    for index, (_route, behavior) in enumerate(chosen):
        for association in behavior.get("FunctionAssociations", []):
            if association.get("EventType") == "viewer-request":
                code = _function_code(template, association)
                if code is not None:
                    by_code.setdefault(code, []).append(index)
    from infra.checks.template import javascript_error

    for code, indexes in by_code.items():
        if javascript_error(code) is not None:  # reported as cloudfront/function-parse; nothing to route
            outcomes.update((i, {"unreachable": True}) for i in indexes)
            continue
        results = run_viewer_function(
            code, [_viewer_request(chosen[i][0].method, chosen[i][0].path) for i in indexes]
        )
        outcomes.update(zip(indexes, results, strict=True))
    return [(route, behavior, outcomes.get(index, {})) for index, (route, behavior) in enumerate(chosen)]


def reached_origins(template: dict[str, Any], routes: list[Route]) -> dict[tuple[str, str], Origin | None]:
    """The origin each route (by method and declared path) leaves the edge for, in the template's one
    distribution; None where it leaves for none (refused, answered at the edge, or misrouted)."""
    (config,) = [
        r["Properties"]["DistributionConfig"]
        for r in template.get("Resources", {}).values()
        if r.get("Type") == "AWS::CloudFront::Distribution"
    ]
    origins = _origins(template, config)
    out: dict[tuple[str, str], Origin | None] = {}
    for route, behavior, outcome in _walk(template, config, routes):
        origin_id, failed = _edge_origin(behavior, outcome)
        allowed = route.method in behavior.get("AllowedMethods", ["GET", "HEAD"])
        reached = allowed and failed is None and not outcome.get("unreachable")
        out[(route.method, route.template)] = origins.get(str(origin_id)) if reached else None
    return out


def _check_distribution(
    template: dict[str, Any], lid: str, config: dict[str, Any], routes: list[Route]
) -> list[Finding]:
    origins = _origins(template, config)
    out = []
    for route, behavior, outcome in _walk(template, config, routes):
        where = f"{lid} {route.method} {route.template} (behaviour {behavior['PathPattern']!r})"
        finding = _route_finding(route, behavior, outcome, origins)
        if finding is not None:
            out.append(Finding(rule=finding[0], resource=where, message=finding[1]))
    return out


def _edge_origin(
    behavior: dict[str, Any], outcome: dict[str, Any]
) -> tuple[str | None, tuple[str, str] | None]:
    """The origin the request leaves the edge for (after the viewer-request function), or why none."""
    if "error" in outcome:
        return None, ("routing/edge-function", f"the viewer-request function failed: {outcome['error']}")
    if outcome.get("answered") is not None:
        return None, (
            "routing/edge-function",
            f"the viewer-request function answers {outcome['answered']} at the edge",
        )
    origin_id = behavior["TargetOriginId"]
    for selected in outcome.get("selected", []):
        if "id" not in selected:
            why = f"the viewer-request function changes the origin in a way not checked: {selected}"
            return None, ("routing/edge-function", why)
        origin_id = selected["id"]
    return origin_id, None


def _route_finding(
    route: Route, behavior: dict[str, Any], outcome: dict[str, Any], origins: dict[str, Origin]
) -> tuple[str, str] | None:
    if route.method not in behavior.get("AllowedMethods", ["GET", "HEAD"]):
        return (
            "routing/method-not-allowed",
            f"the behaviour allows {behavior.get('AllowedMethods')}: CloudFront answers 403",
        )
    if outcome.get("unreachable"):
        return None
    origin_id, failed = _edge_origin(behavior, outcome)
    if failed is not None:
        return failed
    origin = origins.get(str(origin_id))
    if origin is None:
        return "routing/edge-function", f"origin {origin_id!r} is not one of the distribution's"
    if origin.kind == "s3":
        return (
            "routing/console-fallthrough",
            f"reaches the console's bucket ({origin.id}), not the {route.function} function",
        )
    if origin.signs_body and route.method in BODY_METHODS:
        return (
            "routing/signed-body",
            f"a {route.method} with a body reaches the function URL origin {origin.id!r} through Origin Access "
            "Control: Lambda refuses a signed request whose body the viewer did not hash (x-amz-content-sha256)",
        )
    if origin.function == route.function:
        return None
    if origin.function == "stream" and stream_app_answers(route.method, route.path):
        return None  # the stream function hands it on to the API (skyloop.stream.proxy)
    return (
        "routing/wrong-function",
        f"reaches origin {origin.id!r} ({origin.kind}, function {origin.function}), which has no such route; "
        f"the {route.function} function answers it",
    )
