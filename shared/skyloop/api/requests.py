"""Request bodies and query strings of the REST API, validated at the boundary."""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skyloop.api.body import format_validation_error, parse_model
from skyloop.errors import InvalidInputError, PayloadTooLargeError
from skyloop.models.agent import AgentSpec
from skyloop.models.session import ClientTool, ItemType

__all__ = ["format_validation_error", "parse_model"]

AgentSpecBody = AgentSpec  # a JSON agent spec, as ``POST /v1/agents`` takes it

MAX_OUTPUT_CHARS = 200_000  # a tool output is stored in one DynamoDB item (400 KB cap)
MAX_TEXT_CHARS = 100_000
MAX_TOOLS = 128
EVENT_TYPES = ("message", "function_call_output", "approval", "interrupt")


MAX_IMPORT_ITEMS = 5_000


class InitialItem(BaseModel):
    """One ``initial_items`` entry: omnigent's ``SessionEventInput`` (``type`` + ``data``).

    skyloop seeds them as the new session's history (an import) and starts no
    turn; ``data`` is checked per ``type`` by :func:`imported_items`.
    """

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64)
    data: dict[str, Any] = Field(default_factory=dict)
    model_override: str | None = Field(default=None, max_length=256)  # accepted, unused: no turn starts
    tools: list[dict[str, Any]] | None = None  # likewise
    created_by: str | None = None


class CreateSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1, max_length=64)
    title: str | None = Field(default=None, max_length=512)
    labels: dict[str, str] = Field(default_factory=dict, max_length=50)
    initial_items: list[InitialItem] = Field(default_factory=list, max_length=MAX_IMPORT_ITEMS)
    host_type: Literal["external"] = "external"  # skyloop provisions no hosts


class ForkSessionRequest(BaseModel):
    """``POST /v1/sessions/{id}/fork`` (omnigent's ``SessionForkRequest``, the fields skyloop has)."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=512)
    up_to_response_id: str | None = Field(default=None, min_length=1, max_length=128)
    host_type: Literal["external"] = "external"


# ---------------------------------------------------------------- imported items, checked per type
class ImportedBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["input_text", "output_text"]
    text: str = Field(max_length=MAX_TEXT_CHARS)


class ImportedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    role: Literal["user", "assistant"]
    content: list[ImportedBlock] = Field(min_length=1, max_length=64)
    agent: str | None = Field(default=None, max_length=256, alias="model")  # omnigent sends either


class ImportedFunctionCall(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,256}$")
    arguments: str = Field(max_length=MAX_OUTPUT_CHARS)
    call_id: str = Field(min_length=1, max_length=256)
    agent: str | None = Field(default=None, max_length=256, alias="model")


class ImportedFunctionCallOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, max_length=256)
    output: str = Field(max_length=MAX_OUTPUT_CHARS)


IMPORT_TYPES: dict[str, type[BaseModel]] = {
    "message": ImportedMessage,
    "function_call": ImportedFunctionCall,
    "function_call_output": ImportedFunctionCallOutput,
}


def imported_items(entries: list[InitialItem], agent_name: str) -> list[tuple[ItemType, dict[str, Any]]]:
    """Each entry as ``(type, stored data)``, or a 400 naming the first bad entry's index.

    Beyond each shape: an output must answer a call made before it, and a call
    id is used once, so the model is never sent a history it would refuse.
    """
    out: list[tuple[ItemType, dict[str, Any]]] = []
    calls: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"initial_items[{index}]"
        model = IMPORT_TYPES.get(entry.type)
        if model is None:
            raise InvalidInputError(
                f"{where}: item type '{entry.type}' cannot be imported; allowed: {list(IMPORT_TYPES)}",
                param=where,
            )
        try:
            data = model.model_validate(entry.data)
        except ValidationError as exc:
            raise InvalidInputError(
                format_validation_error(exc, prefix=f"{where} ({entry.type}): "), param=where
            ) from exc
        if isinstance(data, ImportedMessage):
            stored: dict[str, Any] = {
                "role": data.role,
                "content": [b.model_dump() for b in data.content],
                "model": (data.agent or agent_name) if data.role == "assistant" else None,
            }
        elif isinstance(data, ImportedFunctionCall):
            if data.call_id in calls:
                raise InvalidInputError(f"{where}: call_id '{data.call_id}' is used twice", param=where)
            calls.add(data.call_id)
            stored = {
                "name": data.name,
                "arguments": data.arguments,
                "call_id": data.call_id,
                "model": data.agent or agent_name,
            }
        else:
            assert isinstance(data, ImportedFunctionCallOutput)
            if data.call_id not in calls:
                raise InvalidInputError(
                    f"{where}: function_call_output for call_id '{data.call_id}' has no function_call before it",
                    param=where,
                )
            stored = {"call_id": data.call_id, "output": data.output}
        out.append((cast("ItemType", entry.type), stored))
    return out


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


class MessageData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user"]
    content: list[InputTextBlock] = Field(min_length=1, max_length=64)


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
        return parse_model(MessageData, self.data, what="data payload for event type 'message'")

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


class ChildListQuery(ListQuery):
    pass


class FileListQuery(ListQuery):
    limit: int = Field(default=20, ge=1, le=1000)


class FileUploadQuery(BaseModel):
    """A raw (non-multipart) upload names its file in the query."""

    model_config = ConfigDict(extra="ignore")

    filename: str | None = Field(default=None, max_length=1024)


class ItemListQuery(ListQuery):
    limit: int = Field(default=100, ge=1, le=1000)
    order: Literal["asc", "desc"] = "asc"
