"""The one way a route reads its request: raw bytes, JSON objects, forms, agent uploads, queries.

Every check that can refuse a request happens here, before a route does
anything: size (413), content type (415), JSON that does not parse, is not an
object or nests deeper than :data:`MAX_JSON_DEPTH` (400), and pydantic
validation of the model the route asked for (400 naming each bad field).
"""

from __future__ import annotations

import base64
import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from skyloop.bundles.limits import MAX_REQUEST_BYTES
from skyloop.errors import InvalidInputError, PayloadTooLargeError, UnsupportedMediaTypeError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

    from skyloop.models.agent import AgentSpec

MAX_BODY_BYTES = MAX_REQUEST_BYTES  # Lambda's synchronous payload limit
MAX_JSON_DEPTH = 64  # deeper documents are refused before anything recurses over them
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

M = TypeVar("M", bound=BaseModel)


def format_validation_error(exc: ValidationError, *, prefix: str = "") -> str:
    """A compact, secret-free summary: ``field.path: message; ...``."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
    return prefix + "; ".join(parts[:10])


def parse_model(model: type[M], data: Any, *, what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(format_validation_error(exc, prefix=f"invalid {what}: ")) from exc


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than ``limit`` (iterative: no recursion to overflow)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class RequestBody:
    """The request of one invocation, read on demand."""

    def __init__(self, event: APIGatewayProxyEventV2) -> None:
        self.event = event
        self.headers = {k.lower(): v for k, v in (event.headers or {}).items()}

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def media_type(self) -> str:
        return self.content_type.split(";")[0].strip().lower()

    def raw(self) -> bytes:
        body = self.event.body or ""
        data = base64.b64decode(body) if self.event.is_base64_encoded else body.encode("utf-8")
        if len(data) > MAX_BODY_BYTES:
            raise PayloadTooLargeError(f"request body over {MAX_BODY_BYTES} bytes")
        return data

    def json_object(self, *, required: bool = True) -> dict[str, Any]:
        raw = self.raw()
        if not raw.strip():
            if required:
                raise InvalidInputError("request body must be a JSON object")
            return {}
        ctype = self.media_type
        if ctype and ctype != "application/json" and not ctype.endswith("+json"):
            raise UnsupportedMediaTypeError(f"Content-Type must be application/json, got '{ctype}'")
        try:
            data = json.loads(raw)
        except RecursionError:
            raise InvalidInputError(f"request body nests deeper than {MAX_JSON_DEPTH} levels") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"request body is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise InvalidInputError("request body must be a JSON object")
        if json_depth_exceeds(data, MAX_JSON_DEPTH):
            raise InvalidInputError(f"request body nests deeper than {MAX_JSON_DEPTH} levels")
        return data

    def model(self, model: type[M], *, what: str, required: bool = True) -> tuple[M, dict[str, Any]]:
        """The body validated as ``model``, and the raw object (to see which fields were sent)."""
        data = self.json_object(required=required)
        return parse_model(model, data, what=what), data

    def is_multipart(self) -> bool:
        return self.media_type == "multipart/form-data"

    def agent_upload(self) -> tuple[AgentSpec, dict[str, str]]:
        """An agent bundle from a ``multipart/form-data`` upload: the spec, and the other form fields."""
        from skyloop import bundles

        form = bundles.parse_multipart_form(self.raw(), self.content_type)
        if "bundle" not in form.files:
            raise InvalidInputError("multipart field 'bundle' (a gzipped tar file) is required")
        return bundles.load_agent_bundle(form.files["bundle"].data), dict(form.fields)

    def idempotency_key(self) -> str | None:
        """``Idempotency-Key``: a client-chosen id that makes re-posting a message safe."""
        key = self.headers.get("idempotency-key")
        if key is None:
            return None
        if not IDEMPOTENCY_KEY.match(key):
            raise InvalidInputError(
                "Idempotency-Key must be 1-128 characters of letters, digits, '.', '_', ':' or '-'"
            )
        return key


def query(event: APIGatewayProxyEventV2, model: type[M]) -> M:
    return parse_model(model, dict(event.query_string_parameters or {}), what="query")
