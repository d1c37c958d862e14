"""Scheduled tasks and their runs: one partition per task (the task row, then its runs, newest first)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from skyloop.models.schedule import ScheduledRun, ScheduledTask
from skyloop.store import codec, keys
from skyloop.store.dynamodb.base import TableBase, error_code

_TASK_KIND = "scheduled_task"
_RUN_KIND = "scheduled_run"


def _task_item(task: ScheduledTask) -> dict[str, Any]:
    item: dict[str, Any] = {
        **keys.scheduled_task_key(task.id),
        **task.model_dump(mode="json"),
        "kind": _TASK_KIND,
        keys.OWNER_KEY: keys.owner_index_value(_TASK_KIND, task.owner),
        keys.CREATED_KEY: keys.created_key(task.created_at * 1_000_000_000, task.id),
    }
    if task.state == "active" and task.next_run_at is not None:  # in the due index exactly while armed
        item[keys.DUE_KEY] = keys.due_index_value(task.id)
        item[keys.DUE_AT_KEY] = keys.due_at_value(task.next_run_at, task.id)
    return item


def _task_from(attrs: dict[str, Any]) -> ScheduledTask:
    return ScheduledTask.model_validate({k: v for k, v in attrs.items() if k in ScheduledTask.model_fields})


def _run_from(attrs: dict[str, Any]) -> ScheduledRun:
    return ScheduledRun.model_validate({k: v for k, v in attrs.items() if k in ScheduledRun.model_fields})


class ScheduleRecords(TableBase):
    def create_scheduled_task(self, task: ScheduledTask) -> None:
        if not self._put_new(_task_item(task)):
            from skyloop.errors import ConflictError

            raise ConflictError(f"a scheduled task with id {task.id!r} already exists")

    def get_scheduled_task(self, task_id: str) -> ScheduledTask | None:
        attrs = self._get(keys.scheduled_task_key(task_id))
        return _task_from(attrs) if attrs is not None else None

    def replace_scheduled_task(self, task: ScheduledTask, *, revision: int) -> bool:
        """Write ``task`` whole if its stored revision is still ``revision`` (it becomes ``revision + 1``)."""
        item = _task_item(task.model_copy(update={"revision": revision + 1}))
        try:
            self.client.put_item(
                TableName=self.table,
                Item=codec.to_item(item),
                ConditionExpression="attribute_exists(pk) AND revision = :r",
                ExpressionAttributeValues={":r": codec.attr(revision)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def list_scheduled_tasks(self, *, owner: str) -> list[ScheduledTask]:
        """The owner's tasks, newest first."""
        rows = self._query_all(
            {
                "TableName": self.table,
                "IndexName": keys.INDEX_BY_OWNER,
                "KeyConditionExpression": "#k = :v",
                "ExpressionAttributeNames": {"#k": keys.OWNER_KEY},
                "ExpressionAttributeValues": {":v": codec.attr(keys.owner_index_value(_TASK_KIND, owner))},
                "ScanIndexForward": False,
            }
        )
        return [_task_from(r) for r in rows]

    def count_scheduled_tasks(self, owner: str) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": keys.INDEX_BY_OWNER,
            "KeyConditionExpression": "#k = :v",
            "ExpressionAttributeNames": {"#k": keys.OWNER_KEY},
            "ExpressionAttributeValues": {":v": codec.attr(keys.owner_index_value(_TASK_KIND, owner))},
            "Select": "COUNT",
        }
        total = 0
        while True:
            r = self.client.query(**kwargs)
            total += int(r.get("Count", 0))
            if "LastEvaluatedKey" not in r:
                return total
            kwargs["ExclusiveStartKey"] = r["LastEvaluatedKey"]

    def list_due_scheduled_tasks(self, *, before: int) -> list[ScheduledTask]:
        """Active tasks whose next occurrence is at or before ``before`` (epoch seconds), soonest first.

        Reads the sparse ``due_schedules`` index (eventually consistent, as
        every GSI): a caller re-reads a task before acting on it.
        """
        found: list[ScheduledTask] = []
        bound = keys.due_at_value(before, "g")  # "g" sorts after every hex id: the whole second counts
        for shard in keys.RUNNING_SHARDS:
            rows = self._query_all(
                {
                    "TableName": self.table,
                    "IndexName": keys.INDEX_DUE,
                    "KeyConditionExpression": "#k = :v AND #at <= :bound",
                    "ExpressionAttributeNames": {"#k": keys.DUE_KEY, "#at": keys.DUE_AT_KEY},
                    "ExpressionAttributeValues": {
                        ":v": codec.attr(f"due#{shard}"),
                        ":bound": codec.attr(bound),
                    },
                }
            )
            found.extend(_task_from(r) for r in rows)
        return sorted(found, key=lambda t: (t.next_run_at or 0, t.id))

    def delete_scheduled_task(self, task_id: str) -> None:
        """The task row first (nothing fires it after that), then its runs."""
        self.client.delete_item(TableName=self.table, Key=codec.to_item(keys.scheduled_task_key(task_id)))
        rows = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": codec.attr(keys.scheduled_task_key(task_id)[keys.PK])},
            ProjectionExpression="pk, sk",
        )
        while True:
            self._delete_keys([{"pk": i["pk"], "sk": i["sk"]} for i in rows.get("Items", [])])
            if "LastEvaluatedKey" not in rows:
                return
            rows = self.client.query(
                TableName=self.table,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": codec.attr(keys.scheduled_task_key(task_id)[keys.PK])},
                ProjectionExpression="pk, sk",
                ExclusiveStartKey=rows["LastEvaluatedKey"],
            )

    # ------------------------------------------------------------------------------ runs
    def put_scheduled_run(self, run: ScheduledRun) -> bool:
        """Record a new run; False when a run of that id exists (a retried fire of the same occurrence)."""
        return self._put_new(
            {**keys.scheduled_run_key(run.task_id, run.id), **run.model_dump(), "kind": _RUN_KIND}
        )

    def get_scheduled_run(self, task_id: str, run_id: str) -> ScheduledRun | None:
        attrs = self._get(keys.scheduled_run_key(task_id, run_id))
        return _run_from(attrs) if attrs is not None else None

    def replace_scheduled_run(self, run: ScheduledRun, *, status: str) -> bool:
        """Write ``run`` whole if its stored status is still ``status`` (one writer moves a run on)."""
        item = {**keys.scheduled_run_key(run.task_id, run.id), **run.model_dump(), "kind": _RUN_KIND}
        try:
            self.client.put_item(
                TableName=self.table,
                Item=codec.to_item(item),
                ConditionExpression="attribute_exists(pk) AND #st = :s",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":s": codec.attr(status)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def list_scheduled_runs(
        self, task_id: str, *, limit: int = 100, after: str | None = None
    ) -> tuple[list[ScheduledRun], bool]:
        """A task's runs, newest first; ``after`` is the id of the last run of the previous page."""
        pk = keys.scheduled_task_key(task_id)[keys.PK]
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :r)",
            "ExpressionAttributeValues": {":p": codec.attr(pk), ":r": codec.attr(keys.RUN_PREFIX)},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if after:
            kwargs["ExclusiveStartKey"] = codec.to_item(keys.scheduled_run_key(task_id, after))
        rows = [codec.from_item(i) for i in self._query_page(kwargs, limit)]
        return [_run_from(r) for r in rows[:limit]], len(rows) > limit
