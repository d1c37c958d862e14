"""What an agent or a session declares about its hosted environment, and its hosted tools.

::

    environment:
      type: hosted
      network: none                 # or public: none cannot open a connection, loopback included
      files:                        # written into the workspace when it is made
        - {path: README.md, content: "# notes"}
      env:                          # the commands' environment
        LANG: C.UTF-8
        GITHUB_TOKEN: {secret: skyloop/tools/me/github}   # read at run time, never stored or logged
      setup: ["git config --global user.name agent"]      # run once, when the workspace is made
    tools:
      Bash: {type: hosted, timeout_s: 120, approval: required}
      Read: {type: hosted}

The hosted tools are the ``coding`` client tool set's, by name and argument
schema (:mod:`skyloop.client_tools.coding`), so an agent moves a tool from the
client to the hosted environment by configuration alone. An agent that declares
a hosted tool and no environment gets the default one (``network: none``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

HOSTED_TOOLS = ("Bash", "Read", "Write", "Edit", "Glob", "Grep")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
RESERVED_ENV = frozenset({"HOME", "PWD", "PATH_WORKSPACE"})
MAX_FILES = 100
MAX_FILE_CHARS = 1_000_000
MAX_SETUP = 20
DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 900
DEFAULT_OUTPUT_CHARS = 30_000
MAX_OUTPUT_CHARS = 200_000


class SecretValue(BaseModel):
    """An environment variable read from Secrets Manager when a command runs."""

    model_config = ConfigDict(extra="forbid")

    secret: str = Field(min_length=1, max_length=2048)


class EnvironmentFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=1024)
    content: str = Field(max_length=MAX_FILE_CHARS)

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        from skyloop.workspace import PathOutsideWorkspace, relative

        try:
            relative(value)
        except PathOutsideWorkspace as exc:
            raise ValueError(str(exc)) from None
        return value


class HostedEnvironment(BaseModel):
    """A session's sandboxed workspace (``/workspace``) and what its commands see."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["hosted"] = "hosted"
    network: Literal["none", "public"] = "none"
    files: list[EnvironmentFile] = Field(default_factory=list, max_length=MAX_FILES)
    env: dict[str, str | SecretValue] = Field(default_factory=dict, max_length=64)
    setup: list[str] = Field(default_factory=list, max_length=MAX_SETUP)

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str | SecretValue]) -> dict[str, str | SecretValue]:
        for name in value:
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in RESERVED_ENV:
                raise ValueError(f"{name} is set by the environment itself")
        return value

    @field_validator("setup")
    @classmethod
    def _commands(cls, value: list[str]) -> list[str]:
        for command in value:
            if not command.strip() or len(command) > 10_000:
                raise ValueError("a setup command is 1-10,000 characters")
        return value

    def secrets(self) -> list[str]:
        return [v.secret for v in self.env.values() if isinstance(v, SecretValue)]


Approval = Literal["never", "required"]


class HostedTool(BaseModel):
    """A built-in tool run in the session's hosted environment (the key is its name)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["hosted"]
    description: str | None = Field(default=None, max_length=10_000)  # the coding set's, unless given
    approval: Approval = "never"
    timeout_s: int = Field(default=DEFAULT_TIMEOUT_S, ge=1, le=MAX_TIMEOUT_S)  # a command's, at most
    max_output_chars: int = Field(default=DEFAULT_OUTPUT_CHARS, ge=1, le=MAX_OUTPUT_CHARS)
