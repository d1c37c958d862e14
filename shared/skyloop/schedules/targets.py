"""What a scheduled run starts: a turn in a new session of an agent, or a message to an existing session.

A task of ``/v1/scheduled-tasks`` has no ``target``: each run opens a new
session of ``agent_id`` whose first message is the prompt. An OpenAI
automation's target (``openai.types.beta.agents.AutomationTarget``) is one of

* ``new_session``: a new session per run, of the saved agent (``agent_id``,
  its newest version at each run, as ``sessions.create(agent_id=...)`` does) or
  of the inline agent registered when the automation was saved; the target's
  ``metadata`` become the session's labels, a ``self_hosted`` environment's
  ``workspace_directory`` its workspace, and the ``input`` messages one user
  message (their content blocks in order);
* ``existing_session``: the ``instructions`` posted to that session as a user
  message: a turn starts, or the message joins the running one.

Both start through :func:`skyloop.turns.lifecycle.start_or_join` with an
idempotency key derived from the run, so a retried fire posts once.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from skyloop import principals
from skyloop.errors import ConflictError, NotFoundError
from skyloop.ids import derived_id

if TYPE_CHECKING:
    from skyloop.models.agent import Agent
    from skyloop.models.schedule import ScheduledRun, ScheduledTask
    from skyloop.settings import Settings
    from skyloop.store import Store
    from skyloop.turns.engine import TurnEngine

SCHEDULE_LABEL = "skyloop.scheduled_task"
RUN_LABEL = "skyloop.scheduled_run"
NEW_SESSION = "new_session"
EXISTING_SESSION = "existing_session"


def kind(task: ScheduledTask) -> str:
    return str((task.target or {}).get("type") or NEW_SESSION)


def existing_session_id(task: ScheduledTask) -> str | None:
    return str(task.target["session_id"]) if kind(task) == EXISTING_SESSION and task.target else None


def message_of(task: ScheduledTask) -> dict[str, Any]:
    """The user message a run posts: the prompt, the instructions, or the input messages' blocks."""
    target = task.target or {}
    if kind(task) == NEW_SESSION and target.get("input"):
        blocks = [dict(b) for m in target["input"] for b in (m.get("content") or [])]
        return {"role": "user", "content": blocks}
    text = str(target.get("instructions") or task.prompt)
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


class TargetGone(NotFoundError):
    """What the run would start in no longer exists: its agent, or its session."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.run_code = code


def agent_for(store: Store, task: ScheduledTask) -> Agent:
    """The agent a run talks to now (TargetGone when it, or the target session, is gone)."""
    session_id = existing_session_id(task)
    if session_id is not None:
        try:
            session = store.get_session(session_id)
        except NotFoundError:
            raise TargetGone("session_not_found", f"session {session_id} no longer exists") from None
        agent_id = session.agent_id
    else:
        agent_id = task.agent_id
    try:
        agent = store.get_agent(agent_id)
    except NotFoundError:
        raise TargetGone("agent_not_found", f"agent {agent_id} no longer exists") from None
    saved = (task.target or {}).get("agent_id")
    if session_id is None and saved:  # an OpenAI agent: its newest version (an update is a new version)
        from skyloop import agent_versions

        with principals.acting_as(principals.Principal(name=task.owner, via="system")):
            try:
                agent = agent_versions.resolve(store, str(saved))
            except NotFoundError:
                raise TargetGone("agent_not_found", f"agent {saved} no longer exists") from None
    return agent


def pause_for_lost_session(store: Store, task: ScheduledTask, now: int) -> None:
    """An automation whose target session is gone pauses (OpenAI's ``pause_reason: target_session_failed``)
    rather than failing every occurrence; a fire of a paused task runs nothing, resuming re-arms it."""
    for _ in range(5):
        current = store.get_scheduled_task(task.id)
        if current is None or current.state == "paused":
            return
        automation = {**(current.automation or {}), "pause_reason": "target_session_failed"}
        paused = current.model_copy(
            update={"state": "paused", "next_run_at": None, "automation": automation, "updated_at": now}
        )
        if store.replace_scheduled_task(paused, revision=current.revision):
            return


def open_and_post(
    store: Store, turns: TurnEngine, task: ScheduledTask, agent: Agent, run: ScheduledRun, settings: Settings
) -> ScheduledRun:
    """Start the run's turn as the task's owner; the run with its session and turn ids."""
    from skyloop.turns import lifecycle

    owner = principals.Principal(name=task.owner, via="system")
    key = f"scheduled-run-{run.id}"
    with principals.acting_as(owner):
        session_id = existing_session_id(task) or _open_session(store, task, agent, run, settings)
        before = store.get_session(session_id)
        lifecycle.start_or_join(
            store,
            turns,
            agent,
            session_id,
            message_of(task),
            None,
            idempotency_key=key,
            max_cost_usd=task.max_cost_usd,
        )
    response_id = lifecycle.response_id_for(session_id, key)
    if before.status == "running" and before.active_response_id:
        response_id = before.active_response_id  # the message joined the running turn
    return run.model_copy(update={"conversation_id": session_id, "response_id": response_id})


def _open_session(
    store: Store, task: ScheduledTask, agent: Agent, run: ScheduledRun, settings: Settings
) -> str:
    """The run's new session (its id derived from the run's, so a retried start opens the same one)."""
    from skyloop import quotas, sessions

    session_id = derived_id("scheduled-run", run.id)
    try:
        store.get_session(session_id)
    except NotFoundError:
        quotas.before_scheduled_run(store, settings, task.owner)
        quotas.before_session(store, settings, task.owner)
        target = task.target or {}
        environment = target.get("environment") or {}
        workspace = (
            environment.get("workspace_directory") if environment.get("type") == "self_hosted" else None
        )
        labels = {**(target.get("metadata") or {}), SCHEDULE_LABEL: task.id, RUN_LABEL: run.id}
        with contextlib.suppress(ConflictError):  # a concurrent attempt opened it
            sessions.create_session(
                store,
                agent,
                sessions.Runners(settings.default_runner_id),
                session_id=session_id,
                title=task.name,
                labels=labels,
                workspace=workspace or task.workspace,
                reasoning_effort=task.reasoning_effort,
                model_override=task.model_override,
            )
    return session_id
