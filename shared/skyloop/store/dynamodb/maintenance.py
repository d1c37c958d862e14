"""What only the local stack needs: moto never deletes expired TTL items, so the stack sweeps them."""

from __future__ import annotations

import time
from typing import Any

from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase


class Maintenance(TableBase):
    def sweep_expired(self, now: int | None = None) -> int:
        """Delete items whose TTL has passed (DynamoDB's own TTL does this in the cloud)."""
        now = int(time.time()) if now is None else now
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "#ttl < :now",
            "ExpressionAttributeNames": {"#ttl": keys.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":now": codec.attr(now)},
            "ProjectionExpression": "pk, sk",
        }
        deleted = 0
        while True:
            r = self.client.scan(**kwargs)
            found = [{"pk": i["pk"], "sk": i["sk"]} for i in r.get("Items", [])]
            self._delete_keys(found)
            deleted += len(found)
            if "LastEvaluatedKey" not in r:
                return deleted
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]
