"""Request bodies and query strings of the REST API, validated at the boundary."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skyloop.api.body import format_validation_error, parse_model
from skyloop.errors import PayloadTooLargeError
from skyloop.models.agent import AgentSpec
from skyloop.models.session import ClientTool

__all__ = ["format_validation_error", "parse_model"]

AgentSpecBody = AgentSpec  # a JSON agent spec, as ``POST /v1/agents`` takes it

MAX_OUTPUT_CHARS = 200_000  # a tool output is stored in one DynamoDB item (400 KB cap)
MAX_TEXT_CHARS = 100_000
MAX_IMAGE_CHARS = 300_000  # a message's images together: the message is one DynamoDB item (400 KB cap)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what every harness's provider takes
_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]+);base64,(?P<data>.*)$", re.DOTALL)
MAX_TOOLS = 128
EVENT_TYPES = ("message", "function_call_output", "approval", "interrupt")


class CreateSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1, max_length=64)
    title: str | None = Field(default=None, max_length=512)
    labels: dict[str, str] = Field(default_factory=dict, max_length=50)


class UpdateSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runner_id: str | None = Field(default=None, max_length=256)
    title: str | None = Field(default=None, max_length=512)
    labels: dict[str, str] | None = Field(default=None, max_length=50)
    archived: bool | None = None


class InputTextBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["input_text"]
    text: str = Field(max_length=MAX_TEXT_CHARS)


class InputImageBlock(BaseModel):
    """An image, as the Responses API sends one: an inline ``data:`` URL (base64) or an ``https`` URL.

    Whether the agent's model may take it is checked against the agent when the
    turn starts (:func:`skyloop.harnesses.image_refusal`, 400 ``image_not_supported``).
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["input_image"]
    image_url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] = "auto"

    @field_validator("image_url")
    @classmethod
    def _image_url(cls, value: str) -> str:
        if value.startswith("https://"):
            return value
        match = _DATA_URL.match(value)
        if match is None:
            raise ValueError("image_url must be a data:image/...;base64, URL or an https URL")
        if match["mime"].lower() not in IMAGE_TYPES:
            raise ValueError(
                f"image type {match['mime']!r} is not supported (supported: {', '.join(IMAGE_TYPES)})"
            )
        try:
            base64.b64decode(match["data"], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("image_url's data is not valid base64") from None
        return value


ContentBlock = Annotated[InputTextBlock | InputImageBlock, Field(discriminator="type")]


class MessageData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user"]
    content: list[ContentBlock] = Field(min_length=1, max_length=64)


class FunctionCallOutputData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, max_length=256)
    output: str


class ApprovalData(BaseModel):
    """The answer to a ``response.elicitation_request`` (omnigent's approval event shape)."""

    model_config = ConfigDict(extra="forbid")

    elicitation_id: str = Field(min_length=1, max_length=512)
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None  # omnigent forms may carry answers; an approval needs none


class NestedFunction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,256}$")
    description: str | None = Field(default=None, max_length=10_000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(BaseModel):
    """``{"type": "function", "function": {...}}``, the nested Chat-Completions form."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["function"]
    function: NestedFunction

    def to_client_tool(self) -> ClientTool:
        f = self.function
        return ClientTool(name=f.name, description=f.description, parameters=f.parameters)


class SessionEventRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64)
    data: dict[str, Any] = Field(default_factory=dict)
    tools: list[FunctionTool] | None = Field(default=None, max_length=MAX_TOOLS)
    model_override: str | None = Field(default=None, max_length=256)
    created_by: str | None = None

    @field_validator("type")
    @classmethod
    def _allowed(cls, value: str) -> str:
        if value not in EVENT_TYPES:
            raise ValueError(f"Unknown event type: '{value}'. Allowed types: {list(EVENT_TYPES)}")
        return value

    @model_validator(mode="after")
    def _unique_tools(self) -> SessionEventRequest:
        names = [t.function.name for t in self.tools or []]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate tool names: {', '.join(dupes)}")
        return self

    def message(self) -> MessageData:
        data = parse_model(MessageData, self.data, what="data payload for event type 'message'")
        images = sum(len(b.image_url) for b in data.content if isinstance(b, InputImageBlock))
        if images > MAX_IMAGE_CHARS:
            raise PayloadTooLargeError(
                f"the message's images are {images} chars of image_url; the limit is {MAX_IMAGE_CHARS}"
            )
        return data

    def approval(self) -> ApprovalData:
        return parse_model(ApprovalData, self.data, what="data payload for event type 'approval'")

    def function_call_output(self) -> FunctionCallOutputData:
        out = parse_model(
            FunctionCallOutputData, self.data, what="data payload for event type 'function_call_output'"
        )
        if len(out.output) > MAX_OUTPUT_CHARS:
            raise PayloadTooLargeError(
                f"function_call_output.output is {len(out.output)} chars; the limit is {MAX_OUTPUT_CHARS}"
            )
        return out


class ListQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: int = Field(default=20, ge=1, le=1000)
    after: str | None = Field(default=None, max_length=64)
    order: Literal["asc", "desc"] = "desc"


class AgentListQuery(ListQuery):
    name: str | None = Field(default=None, max_length=128)
    owner: str | None = Field(default=None, max_length=256, description="an admin token may list another's")


class SessionListQuery(ListQuery):
    agent_name: str | None = Field(default=None, max_length=128)
    agent_id: str | None = Field(default=None, max_length=64)
    include_archived: bool = False
    owner: str | None = Field(default=None, max_length=256, description="an admin token may list another's")


class ItemListQuery(ListQuery):
    limit: int = Field(default=100, ge=1, le=1000)
    order: Literal["asc", "desc"] = "asc"
