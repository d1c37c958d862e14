"""What quotas read and count: a principal's sessions, and its turns per time window."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code


class QuotaRecords(TableBase):
    def count_sessions(self, owner: str, *, running_only: bool = False) -> int:
        """How many sessions ``owner`` holds (or has running), counted on the owner index."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": keys.INDEX_BY_OWNER,
            "KeyConditionExpression": "#k = :v",
            "ExpressionAttributeNames": {"#k": keys.OWNER_KEY},
            "ExpressionAttributeValues": {":v": codec.attr(keys.owner_index_value("session", owner))},
            "Select": "COUNT",
        }
        if running_only:
            kwargs["FilterExpression"] = "#st = :running"
            kwargs["ExpressionAttributeNames"]["#st"] = "status"
            kwargs["ExpressionAttributeValues"][":running"] = codec.attr("running")
        total = 0
        while True:
            r = self.client.query(**kwargs)
            total += int(r.get("Count", 0))
            if "LastEvaluatedKey" not in r:
                return total
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    def take_quota_slot(self, owner: str, window: str, limit: int, expires_at: int) -> bool:
        """Count one use in ``window`` unless ``limit`` are used already (one conditional ADD)."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.quota_key(owner, window)),
                UpdateExpression="ADD used :one SET #ttl = :exp",
                ConditionExpression="attribute_not_exists(used) OR used < :limit",
                ExpressionAttributeNames={"#ttl": keys.TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":one": codec.attr(1),
                    ":limit": codec.attr(limit),
                    ":exp": codec.attr(expires_at),
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True
