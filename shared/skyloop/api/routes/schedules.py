"""``/v1/scheduled-tasks``: omnigent's scheduled tasks (an agent's prompt on an RRULE), on EventBridge Scheduler.

The routes and bodies are omnigent 0.19.1's (see :mod:`skyloop.schedules.requests`);
the work is :mod:`skyloop.schedules.service`. skyloop adds ``/occurrences``
(a preview of the rule) and ``run_id``/``conversation_id`` in run-now's answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps, principals
from skyloop.api import openapi
from skyloop.api.body import query
from skyloop.api.routes._common import current_event, json_response, request
from skyloop.schedules import engine as schedule_engine
from skyloop.schedules.requests import (
    CreateScheduledTaskRequest,
    OccurrencesQuery,
    RunListQuery,
    TaskListQuery,
    UpdateScheduledTaskRequest,
    parse,
)
from skyloop.turns import engine as turn_engine

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

router = Router()


def _service() -> Any:
    """The schedules' service, imported on first use (dateutil and zoneinfo load only for these routes)."""
    from skyloop.schedules import service

    return service


@openapi.operation(
    router,
    "POST",
    "/v1/scheduled-tasks",
    summary="Create a scheduled task: an agent runs a prompt on an RRULE in a time zone",
    body=CreateScheduledTaskRequest,
)
def create_scheduled_task() -> Response:
    service = _service()
    store = deps.store()
    body = parse(CreateScheduledTaskRequest, request(router).json_object(), what="scheduled task")
    task = service.create(store, schedule_engine.deployed(), body, deps.get_settings())
    return json_response(200, service.task_view(store, task))


@openapi.operation(
    router,
    "GET",
    "/v1/scheduled-tasks",
    summary="The caller's scheduled tasks, newest first",
    query=TaskListQuery,
)
def list_scheduled_tasks() -> Response:
    service = _service()
    store = deps.store()
    q = query(current_event(router), TaskListQuery)
    tasks = store.list_scheduled_tasks(owner=principals.list_owner(q.owner))
    return json_response(200, {"scheduled_tasks": [service.task_view(store, t) for t in tasks]})


@openapi.operation(router, "GET", "/v1/scheduled-tasks/<task_id>", summary="One scheduled task")
def get_scheduled_task(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    return json_response(200, service.task_view(store, service.get_task(store, task_id)))


@openapi.operation(
    router,
    "PATCH",
    "/v1/scheduled-tasks/<task_id>",
    summary="Edit a scheduled task (state: active | paused); a new rule or zone re-arms it",
    body=UpdateScheduledTaskRequest,
)
def update_scheduled_task(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    body = parse(UpdateScheduledTaskRequest, request(router).json_object(), what="scheduled task update")
    task = service.get_task(store, task_id)
    return json_response(
        200, service.task_view(store, service.update(store, schedule_engine.deployed(), task, body))
    )


@openapi.operation(
    router,
    "DELETE",
    "/v1/scheduled-tasks/<task_id>",
    summary="Delete a scheduled task (its runs' sessions stay)",
)
def delete_scheduled_task(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    task = service.get_task(store, task_id)
    return json_response(200, service.delete(store, schedule_engine.deployed(), task))


@openapi.operation(
    router,
    "POST",
    "/v1/scheduled-tasks/<task_id>/run",
    summary="Run a scheduled task now (a paused one too); 409 while a run of it is running",
    status=202,
)
def run_scheduled_task_now(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    task = service.get_task(store, task_id)
    run = service.run_now(store, turn_engine.deployed(), task, deps.get_settings())
    return json_response(
        202,
        {
            "triggered": True,
            "id": task.id,
            "run_id": run.id,
            "status": run.status,
            "conversation_id": run.conversation_id,
        },
    )


@openapi.operation(
    router,
    "GET",
    "/v1/scheduled-tasks/<task_id>/runs",
    summary="A scheduled task's runs, newest first: status, session, cost",
    query=RunListQuery,
)
def list_scheduled_task_runs(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    q = query(current_event(router), RunListQuery)
    task = service.get_task(store, task_id)
    return json_response(200, service.list_runs(store, task, limit=q.limit, after=q.after))


@openapi.operation(
    router,
    "GET",
    "/v1/scheduled-tasks/<task_id>/occurrences",
    summary="The task's next occurrences after a time (default now), in its time zone: a preview of its rule",
    query=OccurrencesQuery,
)
def list_scheduled_task_occurrences(task_id: str) -> Response:
    service = _service()
    store = deps.store()
    q = query(current_event(router), OccurrencesQuery)
    task = service.get_task(store, task_id)
    return json_response(200, service.occurrences(task, after=q.after, limit=q.limit))
