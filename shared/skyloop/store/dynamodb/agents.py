"""Agent versions: immutable; every upload of a name is a new version, found first by name."""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from skyloop.errors import ConflictError, NotFoundError
from skyloop.models.agent import Agent, AgentSpec
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code


class AgentRecords(TableBase):
    def put_agent(self, agent: Agent) -> None:
        ts = time.time_ns()
        created = keys.created_key(ts, agent.id)
        if agent.spec.executor.auth and agent.spec.executor.auth.api_key is not None:
            raise ValueError("agent keys go to the secret store, not the table (see skyloop.secrets)")
        item = {
            **keys.agent_key(agent.id),
            "kind": "agent",
            "id": agent.id,
            "name": agent.name,
            "owner": agent.owner,
            "created_at": agent.created_at,
            "version": agent.version,
            # api_key dumps masked; it is kept in its own attribute
            **self._text_out("spec", agent.spec.model_dump_json(), keys.agent_blob_prefix(agent.id)),
            "api_key_secret": agent.api_key_secret,
            keys.OWNER_KEY: keys.owner_index_value("agent", agent.owner),
            keys.NAME_KEY: keys.agent_name_index_value("agent", agent.owner, agent.name),
            keys.CREATED_KEY: created,
        }
        if not self._put_new(item):
            raise ConflictError(f"an agent with id {agent.id!r} already exists")

    def _agent_from(self, attrs: dict[str, Any]) -> Agent:
        spec = codec.loads(self._text_in(attrs, "spec"), {})
        return Agent(
            id=attrs["id"],
            name=attrs["name"],
            created_at=int(attrs["created_at"]),
            version=int(attrs.get("version") or 1),
            owner=attrs.get("owner") or keys.DEFAULT_OWNER,
            api_key_secret=attrs.get("api_key_secret"),
            spec=AgentSpec.model_validate(spec),
            archived_at=int(attrs["archived_at"]) if attrs.get("archived_at") is not None else None,
        )

    def archive_agent(self, agent_id: str, at: int) -> Agent:
        """Mark a version archived (once: an archived one keeps its first time); the version after."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.agent_key(agent_id)),
                UpdateExpression="SET archived_at = if_not_exists(archived_at, :a)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":a": codec.attr(at)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"Agent not found: '{agent_id}'") from None
            raise
        return self.get_agent(agent_id)

    def delete_agent(self, agent_id: str) -> None:
        """The version's row and its MCP listings (its blobs are content-addressed and left)."""
        r = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": codec.attr(keys.agent_key(agent_id)[keys.PK])},
            ProjectionExpression="pk, sk",
        )
        self._delete_keys(list(r.get("Items", [])))

    def get_tool_listing(self, agent_id: str, server: str) -> list[dict[str, Any]] | None:
        attrs = self._get(keys.tool_listing_key(agent_id, server))
        return codec.loads(self._text_in(attrs, "tools"), []) if attrs is not None else None

    def put_tool_listing(self, agent_id: str, server: str, tools: list[dict[str, Any]]) -> None:
        """The first listing of an agent version wins; later ones are the same server's same answer."""
        item = {
            **keys.tool_listing_key(agent_id, server),
            **self._text_out("tools", codec.dumps(tools), keys.agent_blob_prefix(agent_id)),
            "listed_at": int(time.time()),
        }
        self._put_new(item)

    def get_agent(self, agent_id: str) -> Agent:
        attrs = self._get(keys.agent_key(agent_id))
        if attrs is None:
            raise NotFoundError(f"Agent not found: '{agent_id}'")
        return self._agent_from(attrs)

    def find_agent_by_name(self, name: str, *, owner: str = keys.DEFAULT_OWNER) -> Agent | None:
        r = self.client.query(
            TableName=self.table,
            IndexName=keys.INDEX_BY_AGENT_NAME,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": keys.NAME_KEY},
            ExpressionAttributeValues={":v": codec.attr(keys.agent_name_index_value("agent", owner, name))},
            ScanIndexForward=False,
            Limit=1,
        )
        items = r.get("Items", [])
        return self._agent_from(codec.from_item(items[0])) if items else None

    def list_agents(
        self,
        *,
        owner: str = keys.DEFAULT_OWNER,
        limit: int = 20,
        descending: bool = True,
        after: str | None = None,
    ) -> tuple[list[Agent], bool]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": keys.INDEX_BY_OWNER,
            "KeyConditionExpression": "#k = :v",
            "ExpressionAttributeNames": {"#k": keys.OWNER_KEY},
            "ExpressionAttributeValues": {":v": codec.attr(keys.owner_index_value("agent", owner))},
            "ScanIndexForward": not descending,
        }
        if after:
            cursor = self._get(keys.agent_key(after))
            if cursor is None or cursor.get("owner", keys.DEFAULT_OWNER) != owner:
                raise NotFoundError(f"Agent not found: '{after}'")
            kwargs["ExclusiveStartKey"] = codec.to_item(
                {
                    **keys.agent_key(after),
                    keys.OWNER_KEY: cursor[keys.OWNER_KEY],
                    keys.CREATED_KEY: cursor[keys.CREATED_KEY],
                }
            )
        raw = self._query_page(kwargs, limit)
        return [self._agent_from(codec.from_item(i)) for i in raw[:limit]], len(raw) > limit
