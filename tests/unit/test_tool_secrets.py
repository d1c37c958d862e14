"""MCP header secrets: in a deployment with a tool-secrets prefix, each principal may name only its own."""

from __future__ import annotations

from typing import Any

import pytest

from skyloop import principals, sessions
from skyloop.errors import SecretNotAllowedError
from skyloop.models.tools import declared_tools
from skyloop.principals import Principal

PREFIX = "prod-stack/tools"
ALICE = Principal(name="alice")
ADMIN = Principal(name="ops", scopes=frozenset({"read", "write", "admin"}))


def mcp(secret: str | None = None, plain: str | None = None) -> Any:
    headers: dict[str, Any] = {}
    if secret is not None:
        headers["Authorization"] = {"secret": secret}
    if plain is not None:
        headers["X-Plain"] = plain
    return declared_tools({"docs": {"type": "mcp", "url": "https://mcp.example.com/mcp", "headers": headers}})


@pytest.mark.parametrize(
    "secret",
    [
        "prod-stack/tools/bob/token",  # another principal's
        "prod-stack/tools/alice",  # not under alice's folder
        "prod-stack/tools/aliceX/token",  # a prefix of a name is not the name
        "prod-stack/agents/abc/api_key",  # an agent's model key
        "other/tools/alice/token",
    ],
)
def test_a_secret_outside_the_callers_own_folder_is_refused(secret: str) -> None:
    with principals.acting_as(ALICE), pytest.raises(SecretNotAllowedError) as caught:
        sessions.check_tool_secrets(mcp(secret), PREFIX)
    assert caught.value.status == 400
    assert "prod-stack/tools/alice/" in caught.value.message


def test_the_callers_own_secrets_and_plain_headers_pass() -> None:
    with principals.acting_as(ALICE):
        sessions.check_tool_secrets(mcp("prod-stack/tools/alice/token", plain="not a secret"), PREFIX)
        sessions.check_tool_secrets(mcp(None, plain="x"), PREFIX)


def test_an_admin_may_name_any_secret_under_the_prefix_but_not_beyond() -> None:
    with principals.acting_as(ADMIN):
        sessions.check_tool_secrets(mcp("prod-stack/tools/shared/token"), PREFIX)
        with pytest.raises(SecretNotAllowedError):
            sessions.check_tool_secrets(mcp("prod-stack/agents/x/api_key"), PREFIX)


def test_a_principal_with_a_slash_in_its_name_may_name_no_secret() -> None:
    """Its folder would lie inside another principal's ("a/b" inside "a")."""
    with principals.acting_as(Principal(name="a/b")), pytest.raises(SecretNotAllowedError):
        sessions.check_tool_secrets(mcp("prod-stack/tools/a/b/token"), PREFIX)
