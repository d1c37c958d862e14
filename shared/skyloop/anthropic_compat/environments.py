"""Claude environments: a ``cloud`` one is skyloop's hosted environment, a ``self_hosted`` one the client.

* ``cloud``: a session opened in it gets its own sandboxed workspace (:mod:`skyloop.environments`):
  ``networking: unrestricted`` is ``network: public``; ``limited`` with no hosts is ``network: none``
  (skyloop cannot allow single hosts or only package registries: those are a 400 naming the field;
  MCP servers are called by skyloop, outside the sandbox, so ``allow_mcp_servers`` changes nothing);
  ``pip`` and ``npm`` packages are installed by setup commands when the workspace is made (they
  need ``unrestricted`` networking); ``apt``, ``cargo``, ``gem`` and ``go`` need a root or a
  toolchain the sandbox does not have: 400.
* ``self_hosted``: the agent toolset's built-ins are client tools answered with ``user.tool_result``
  (:mod:`.toolset`), by ``events.tool_runner`` or the SDK's environment worker.

Environments are rows of the table (:func:`skyloop.store.keys.claude_environment_key`), listed by owner;
an update is a conditional write on the row's revision, so two racing updates cannot lose one.
"""

from __future__ import annotations

import shlex
import time
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

from skyloop.anthropic_compat.errors import (
    EnvironmentArchivedError,
    EnvironmentNotFoundError,
    UnsupportedFeatureError,
)
from skyloop.errors import ConflictError, InvalidInputError
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code

if TYPE_CHECKING:
    from skyloop.anthropic_compat.requests import CloudConfig, EnvironmentBody
    from skyloop.models.environment import HostedEnvironment

KIND = "anthropic_environment"
UNSUPPORTED_PACKAGES = ("apt", "cargo", "gem", "go")
PACKAGE_INSTALL = {
    "pip": "python3 -m pip install --user --no-input --disable-pip-version-check",
    "npm": "npm install --no-fund --no-audit --prefix /workspace/.npm-global",
}


class Environment(BaseModel):
    """An environment as stored (``config`` as Claude's response shows it)."""

    id: str
    owner: str
    name: str
    description: str | None = None
    config: dict[str, Any]
    metadata: dict[str, str] = Field(default_factory=dict)
    scope: Literal["organization", "account"] | None = None
    created_at: float
    updated_at: float
    archived_at: float | None = None
    revision: int = 1

    @property
    def kind(self) -> str:
        return str(self.config.get("type"))

    def to_claude(self) -> dict[str, Any]:
        """A ``BetaEnvironment``."""
        from skyloop.anthropic_compat.agents import rfc3339

        return {
            "id": self.id,
            "type": "environment",
            "name": self.name,
            "description": self.description,
            "config": self.config,
            "metadata": dict(self.metadata),
            "scope": self.scope,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "archived_at": rfc3339(self.archived_at),
        }


# ---------------------------------------------------------------------------------- config
def _empty_packages() -> dict[str, Any]:
    return {"type": "packages", "apt": [], "cargo": [], "gem": [], "go": [], "npm": [], "pip": []}


def cloud_config(config: CloudConfig, old: dict[str, Any] | None) -> dict[str, Any]:
    """The stored (response) form of a cloud config; on update, omitted fields keep ``old``'s."""
    out: dict[str, Any] = dict(old) if old and old.get("type") == "cloud" else {"type": "cloud"}
    sent = config.model_fields_set
    if "networking" in sent or "networking" not in out:
        net = config.networking
        if net is None or net.type == "unrestricted":
            out["networking"] = {"type": "unrestricted"}
        else:
            out["networking"] = {
                "type": "limited",
                "allow_mcp_servers": bool(net.allow_mcp_servers),
                "allow_package_managers": bool(net.allow_package_managers),
                "allowed_hosts": list(net.allowed_hosts or []),
            }
    if "packages" in sent or "packages" not in out:
        packages = _empty_packages()
        if config.packages is not None:
            for manager in ("apt", "cargo", "gem", "go", "npm", "pip"):
                packages[manager] = list(getattr(config.packages, manager) or [])
        out["packages"] = packages
    check_cloud(out)
    return out


def check_cloud(config: dict[str, Any]) -> None:
    """What skyloop's hosted environment cannot honour: a 400 naming the field."""
    net = config["networking"]
    if net["type"] == "limited":
        if net["allowed_hosts"]:
            raise UnsupportedFeatureError(
                "networking.allowed_hosts",
                param="config.networking.allowed_hosts",
                detail="skyloop's sandbox has no network (limited) or the whole of it (unrestricted)",
            )
        if net["allow_package_managers"]:
            raise UnsupportedFeatureError(
                "networking.allow_package_managers",
                param="config.networking.allow_package_managers",
                detail="package registries alone cannot be allowed; use unrestricted networking",
            )
    packages = config["packages"]
    for manager in UNSUPPORTED_PACKAGES:
        if packages.get(manager):
            raise UnsupportedFeatureError(
                f"{manager} packages",
                param=f"config.packages.{manager}",
                detail="the sandbox has no root and no such toolchain; install pip or npm packages, or use setup",
            )
    wanted = [m for m in PACKAGE_INSTALL if packages.get(m)]
    if wanted and net["type"] != "unrestricted":
        raise InvalidInputError(
            f"config.packages.{wanted[0]}: installing packages needs networking: unrestricted",
            param=f"config.packages.{wanted[0]}",
        )
    for manager in wanted:
        for n, name in enumerate(packages[manager]):
            if not name or name.startswith("-") or any(c.isspace() for c in name):
                raise InvalidInputError(
                    f"config.packages.{manager}[{n}]: {name!r} is not a package name",
                    param=f"config.packages.{manager}[{n}]",
                )


def hosted(config: dict[str, Any]) -> HostedEnvironment:
    """skyloop's hosted environment for a session opened in a cloud environment."""
    from skyloop.models.environment import HostedEnvironment

    packages = config.get("packages") or {}
    setup = [
        f"{PACKAGE_INSTALL[manager]} {' '.join(shlex.quote(p) for p in packages[manager])}"
        for manager in PACKAGE_INSTALL
        if packages.get(manager)
    ]
    network = "public" if (config.get("networking") or {}).get("type") == "unrestricted" else "none"
    return HostedEnvironment.model_validate({"network": network, "setup": setup})


# --------------------------------------------------------------------------------- records
def _attrs(env: Environment) -> dict[str, Any]:
    return {
        **keys.claude_environment_key(env.id),
        "kind": KIND,
        keys.OWNER_KEY: keys.owner_index_value("environment", env.owner),
        keys.CREATED_KEY: keys.created_key(int(env.created_at * 10**9), env.id),
        "doc": codec.dumps(env.model_dump(mode="json")),
        "revision": env.revision,
    }


class EnvironmentRecords(TableBase):
    def create(self, env: Environment) -> None:
        try:
            self.client.put_item(
                TableName=self.table,
                Item=codec.to_item(_attrs(env)),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise ConflictError(f"an environment with id {env.id!r} already exists") from None
            raise

    def get(self, environment_id: str) -> Environment | None:
        attrs = self._get(keys.claude_environment_key(environment_id))
        if attrs is None or attrs.get("kind") != KIND:
            return None
        return Environment.model_validate(codec.loads(attrs["doc"], {}))

    def replace(self, env: Environment, *, revision: int) -> bool:
        """Write ``env`` (its revision one more) only if the row still has ``revision``."""
        try:
            self.client.put_item(
                TableName=self.table,
                Item=codec.to_item(_attrs(env.model_copy(update={"revision": revision + 1}))),
                ConditionExpression="revision = :r",
                ExpressionAttributeValues={":r": codec.attr(revision)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def delete(self, environment_id: str) -> None:
        """The environment row first (nothing new is queued in it after), then its work and worker rows."""
        self.client.delete_item(
            TableName=self.table, Key=codec.to_item(keys.claude_environment_key(environment_id))
        )
        rows = self._query_all(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": codec.attr(keys.claude_environment_pk(environment_id))},
                "ProjectionExpression": "pk, sk",
            }
        )
        for row in rows:
            self.client.delete_item(
                TableName=self.table, Key=codec.to_item({"pk": row["pk"], "sk": row["sk"]})
            )

    def list(self, owner: str) -> list[Environment]:
        """``owner``'s environments, oldest first."""
        rows = self._query_all(
            {
                "TableName": self.table,
                "IndexName": keys.INDEX_BY_OWNER,
                "KeyConditionExpression": "#o = :o",
                "ExpressionAttributeNames": {"#o": keys.OWNER_KEY},
                "ExpressionAttributeValues": {":o": codec.attr(keys.owner_index_value("environment", owner))},
            }
        )
        return [Environment.model_validate(codec.loads(r["doc"], {})) for r in rows if r.get("kind") == KIND]


def records() -> EnvironmentRecords:
    from skyloop import deps

    return EnvironmentRecords(deps.get_settings().table_name, deps.client("dynamodb"))


def get_owned(environment_id: str, *, for_session: bool = False) -> Environment:
    """The caller's environment (404 for an unknown one or another principal's)."""
    from skyloop import principals

    env = records().get(environment_id) if environment_id.startswith("env_") else None
    if env is None or not principals.current().owns(env.owner):
        raise EnvironmentNotFoundError(f"Environment not found: '{environment_id}'")
    if for_session and env.archived_at is not None:
        raise EnvironmentArchivedError(
            f"environment '{environment_id}' is archived: sessions cannot be opened in it",
            param="environment_id",
        )
    return env


def new(body: EnvironmentBody, owner: str) -> Environment:
    from skyloop.anthropic_compat.requests import CloudConfig
    from skyloop.ids import new_id

    if not body.name:
        raise InvalidInputError("name is required", param="name")
    config = body.config if body.config is not None else CloudConfig(type="cloud")
    stored = cloud_config(config, None) if isinstance(config, CloudConfig) else {"type": "self_hosted"}
    now = time.time()
    return Environment(
        id=f"env_{new_id()[:24]}",
        owner=owner,
        name=body.name,
        description=body.description,
        config=stored,
        metadata={k: v for k, v in (body.metadata or {}).items() if v},
        scope=body.scope,
        created_at=now,
        updated_at=now,
    )


def updated(env: Environment, body: EnvironmentBody) -> Environment:
    """``env`` with an update applied: omitted fields kept, metadata patched (null or "" deletes)."""
    from skyloop.anthropic_compat.requests import CloudConfig

    sent = body.model_fields_set
    changes: dict[str, Any] = {"updated_at": time.time()}
    if "name" in sent and body.name is not None:
        changes["name"] = body.name
    if "description" in sent:
        changes["description"] = body.description
    if "scope" in sent:
        changes["scope"] = body.scope
    if "metadata" in sent:
        from skyloop.anthropic_compat.common import patch_metadata

        changes["metadata"] = patch_metadata(env.metadata, body.metadata)
    if "config" in sent and body.config is not None:
        if body.config.type != env.kind:
            raise InvalidInputError(
                f"config.type: an environment's type cannot change (this one is {env.kind})",
                param="config.type",
            )
        if isinstance(body.config, CloudConfig):
            changes["config"] = cloud_config(body.config, env.config)
    return env.model_copy(update=changes)
