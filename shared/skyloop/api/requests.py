"""Request bodies and query strings of the REST API, validated at the boundary."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skyloop.api.body import format_validation_error, parse_model
from skyloop.errors import InvalidInputError, PayloadTooLargeError
from skyloop.models.agent import AgentSpec
from skyloop.models.environment import HostedEnvironment  # noqa: TC001  (pydantic needs it)
from skyloop.models.overrides import parse_effort, parse_model_override
from skyloop.models.session import ClientTool, ItemType

__all__ = ["format_validation_error", "parse_model"]

AgentSpecBody = AgentSpec  # a JSON agent spec, as ``POST /v1/agents`` takes it

MAX_OUTPUT_CHARS = 200_000  # a tool output is stored in one DynamoDB item (400 KB cap)
MAX_TEXT_CHARS = 100_000
MAX_IMAGE_CHARS = 300_000  # a message's images together: the message is one DynamoDB item (400 KB cap)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what every harness's provider takes
_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]+);base64,(?P<data>.*)$", re.DOTALL)
MAX_TOOLS = 128
# "heartbeat" is skyloop's: the client is still there while a turn waits for it (limits.client_heartbeat_s)
EVENT_TYPES = ("message", "function_call_output", "approval", "interrupt", "heartbeat")


MAX_IMPORT_ITEMS = 5_000  # history entries one import may carry
MAX_INITIAL_EVENTS = 16  # events one create may queue as turns


class InitialItem(BaseModel):
    """One ``initial_items`` entry: omnigent's ``SessionEventInput`` (``type`` + ``data``).

    As omnigent's server does, the request decides what they are. With
    ``host_type: "external"`` given explicitly (``omnigent session import``:
    "history-only, launch no runner") they are the new session's history,
    checked per ``type`` by :func:`imported_items`, and no turn starts.
    Otherwise (a sub-agent spawn, a create with a first message) they are queued
    events: user messages, validated like posted ones, that start the first turn.
    """

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64)
    data: dict[str, Any] = Field(default_factory=dict)
    model_override: str | None = Field(default=None, max_length=256)  # a queued message's; unused on import
    tools: list[dict[str, Any]] | None = None  # likewise
    created_by: str | None = None  # omnigent's attribution; not stored


class CreateSessionRequest(BaseModel):
    """omnigent's ``SessionCreateRequest``; what has no meaning serverless is accepted and ignored.

    Stored: ``agent_id``, ``title``, ``labels``, ``workspace`` (recorded for display, as omnigent
    does for CLI sessions), ``reasoning_effort``, ``model_override``, ``initial_items`` (history
    on an import, else the session's first events: see :class:`InitialItem`). Refused with 400: ``host_type: "managed"`` and ``git`` (skyloop
    provisions no hosts or worktrees), ``harness_override`` (the agent fixes the harness),
    ``parent_session_id`` (child sessions are their own route). Everything else omnigent defines
    is accepted and ignored (see ``IGNORED_CREATE_FIELDS``); unknown fields are a 400.
    """

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1, max_length=64)
    title: str | None = Field(default=None, max_length=512)
    labels: dict[str, str] = Field(default_factory=dict, max_length=50)
    workspace: str | None = Field(default=None, max_length=4096)
    reasoning_effort: str | None = None
    model_override: str | None = None
    initial_items: list[InitialItem] = Field(default_factory=list, max_length=MAX_IMPORT_ITEMS)
    # skyloop's: the session's hosted environment, replacing its agent's (skyloop.environments)
    environment: HostedEnvironment | None = None
    host_type: Literal["external", "managed"] = "external"
    git: dict[str, Any] | None = None
    harness_override: str | None = None
    parent_session_id: str | None = None
    # accepted and ignored: no meaning without hosts, projects, MCP registries or smart routing
    inference_configuration_revision: str | None = None
    project_id: str | None = None
    initial_input: dict[str, Any] | None = None
    mcp_registry_services: list[Any] = Field(default_factory=list, max_length=40)
    sub_agent_name: str | None = None
    host_id: str | None = None
    sandbox_provider: str | None = None
    workspaces: list[str] | None = None
    terminal_launch_args: list[str] | None = None
    cost_control_mode_override: str | None = None
    subagent_routing_override: str | None = None
    smart_routing_message: str | None = None

    @field_validator("reasoning_effort")
    @classmethod
    def _effort(cls, value: str | None) -> str | None:
        return parse_effort(value)

    @field_validator("model_override")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return parse_model_override(value)

    @model_validator(mode="after")
    def _serverless(self) -> CreateSessionRequest:
        if self.host_type == "managed":
            raise ValueError("host_type 'managed' is not supported: skyloop provisions no sandbox hosts")
        if self.git is not None:
            raise ValueError("git worktree options are not supported: skyloop sessions have no host")
        if self.harness_override is not None:
            raise ValueError("harness_override is not supported: the agent's executor fixes the harness")
        if self.parent_session_id is not None:
            raise ValueError("parent_session_id is not supported here: fork a session to make a child")
        return self


IGNORED_CREATE_FIELDS = (
    "inference_configuration_revision",
    "project_id",
    "initial_input",
    "mcp_registry_services",
    "sub_agent_name",
    "host_id",
    "sandbox_provider",
    "workspaces",
    "terminal_launch_args",
    "cost_control_mode_override",
    "subagent_routing_override",
    "smart_routing_message",
)


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


class ExportedItem(BaseModel):
    """What ``omnigent session export`` leaves on each item besides its data: ``created_at``.

    Its import strips the other envelope fields but not this one; omnigent's
    server drops it (an imported item is new), and so does skyloop.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    created_at: int | None = Field(default=None, ge=0)


class ImportedMessage(ExportedItem):
    role: Literal["user", "assistant"]
    content: list[ImportedBlock] = Field(min_length=1, max_length=64)
    agent: str | None = Field(default=None, max_length=256, alias="model")  # omnigent sends either
    # omnigent's message flags, on its servers' exports; accepted, not stored (skyloop has no hidden
    # or partial messages: a meta or interrupted message is imported as a plain one)
    user_authored: bool = False
    is_meta: bool = False
    interrupted: bool = False
    stream_message_id: str | None = Field(default=None, max_length=256)
    subagent_return_id: str | None = Field(default=None, max_length=256)


class ImportedFunctionCall(ExportedItem):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,256}$")
    arguments: str = Field(max_length=MAX_OUTPUT_CHARS)
    call_id: str = Field(min_length=1, max_length=256)
    agent: str | None = Field(default=None, max_length=256, alias="model")
    namespace: str | None = Field(default=None, max_length=256)  # omnigent's; not stored


class ImportedFunctionCallOutput(ExportedItem):
    call_id: str = Field(min_length=1, max_length=256)
    output: str = Field(max_length=MAX_OUTPUT_CHARS)
    subagent_return_id: str | None = Field(default=None, max_length=256)  # omnigent's; not stored


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
    """omnigent's ``UpdateSessionRequest``: ``labels`` merge (an empty value removes a key), as there.

    Applied: ``runner_id``, ``title``, ``labels``, ``archived``, ``reasoning_effort`` and
    ``model_override`` (the next model calls use them; ``"default"`` clears), ``external_session_id``.
    Accepted and ignored (native-terminal, project and cost-control settings skyloop has no
    counterpart for): see ``IGNORED_UPDATE_FIELDS``.
    """

    model_config = ConfigDict(extra="forbid")

    runner_id: str | None = Field(default=None, max_length=256)
    title: str | None = Field(default=None, max_length=512)
    labels: dict[str, str] | None = Field(default=None, max_length=50)
    archived: bool | None = None
    reasoning_effort: str | None = None
    model_override: str | None = None
    external_session_id: str | None = Field(default=None, max_length=256)
    # accepted and ignored
    collaboration_mode: str | None = None
    permission_mode: str | None = None
    approval_mode: str | None = None
    cost_control_mode_override: str | None = None
    subagent_routing_override: str | None = None
    share_workspace_files: bool | None = None
    terminal_launch_args: list[str] | None = None
    delete_worktree: bool = False
    project_id: str | None = None
    silent: bool = False

    @field_validator("reasoning_effort")
    @classmethod
    def _effort(cls, value: str | None) -> str | None:
        return parse_effort(value)

    @field_validator("model_override")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return parse_model_override(value)


IGNORED_UPDATE_FIELDS = (
    "collaboration_mode",
    "permission_mode",
    "approval_mode",
    "cost_control_mode_override",
    "subagent_routing_override",
    "share_workspace_files",
    "terminal_launch_args",
    "delete_worktree",
    "project_id",
    "silent",
)


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
    model_override: str | None = None  # the turn this message starts uses it ("default": the session's)
    created_by: str | None = None

    @field_validator("model_override")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return parse_model_override(value)

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


class SessionGetQuery(BaseModel):
    """omnigent's snapshot switches: ``include_items=false`` (its ``session export`` reads items by
    page) returns ``items: []``; ``include_liveness=false`` returns ``runner_online: null``.
    Its other switches (``include_usage``, ``include_live_status``, ``refresh_state``) are ignored."""

    model_config = ConfigDict(extra="ignore")

    include_items: bool = True
    include_liveness: bool = True


class AgentListQuery(ListQuery):
    """``scope=user`` (omnigent's ``agent list``) lists one row per name, its newest version."""

    name: str | None = Field(default=None, max_length=128)
    scope: Literal["user", "all"] | None = None
    owner: str | None = Field(default=None, max_length=256, description="an admin token may list another's")


class AgentDeleteQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    force: bool = False


class SessionListQuery(ListQuery):
    """omnigent's list parameters: ``visibility`` and ``sort_by`` with omnigent's meaning.

    ``visibility``: ``all`` (the default) lists live sessions, and archived ones too with
    ``include_archived``; ``archived`` only archived ones; ``mine`` is ``all`` (a principal
    only ever sees its own); ``shared`` is empty (skyloop shares nothing); ``active`` [skyloop]
    only live ones, whatever ``include_archived`` says. ``kind``, ``project`` and ``pinned``
    are accepted; ``kind=sub_agent`` and ``pinned=true`` list nothing. [skyloop] ``search_query``
    (title words), ``status``, ``label`` and ``waiting`` filter the owner's sessions (the web
    console's filters and inbox).
    """

    agent_name: str | None = Field(default=None, max_length=128)
    agent_id: str | None = Field(default=None, max_length=64)
    include_archived: bool = False
    visibility: Literal["all", "mine", "shared", "archived", "active"] = "all"
    sort_by: Literal["created_at", "updated_at"] = "created_at"
    kind: Literal["default", "sub_agent", "any"] = "default"
    pinned: bool = False
    project: str | None = Field(default=None, max_length=256)
    search_query: str | None = Field(default=None, max_length=512, description="words the title contains")
    owner: str | None = Field(default=None, max_length=256, description="an admin token may list another's")
    status: Literal["idle", "running", "failed"] | None = None
    label: str | None = Field(default=None, max_length=512, description="`key=value`, or `key` for any value")
    waiting: bool = Field(
        default=False, description="only sessions whose turn waits on a client call or approval"
    )

    def filters(self) -> bool:
        """Whether a filter the store's index cannot answer is set (then the owner's sessions are read)."""
        return bool(self.status or self.label or (self.search_query or "").strip() or self.waiting)

    def archived_filter(self) -> bool | None:
        """The store's ``archived`` argument: False live only, True archived only, None both."""
        if self.visibility == "archived":
            return True
        if self.visibility == "active":
            return False
        return None if self.include_archived else False

    def lists_nothing(self) -> bool:
        return self.visibility == "shared" or self.kind == "sub_agent" or self.pinned


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


class WorkspaceListQuery(BaseModel):
    """``GET /v1/sessions/{id}/workspace``: the files under ``path`` (default: the whole workspace)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(default="/workspace", min_length=1, max_length=4096)


class WorkspaceFileQuery(BaseModel):
    """``GET /v1/sessions/{id}/workspace/content``: one file of the workspace, by its path."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=4096)
