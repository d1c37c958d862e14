"""A session's hosted environment: its engine, its workspace made on first use, one call run in it.

The first hosted call of a session makes its workspace: the environment's
``files`` are written and its ``setup`` commands run, in order, before the call
runs; only then is the workspace marked ready, so a setup that failed (its
output is the call's output) is tried again by the next call. Later calls, turns
and restarts find it ready. In the cloud a new interpreter session (the old one
stopped when idle, or rotated) gets the workspace back from its snapshot and runs
the ``setup`` again; the ``files`` are not written again (the workspace has them
as they were left). The engine is the deployment's
(``SKYLOOP_HOSTED_ENGINE``: ``local`` on ``skyloop dev``, ``agentcore`` in the
cloud).
"""

from __future__ import annotations

import functools
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyloop.models.environment import HostedEnvironment, SecretValue
from skyloop.models.tools import environment_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.environments.port import Engine, Sandbox
    from skyloop.environments.tools import HostedRun
    from skyloop.models.agent import Agent
    from skyloop.models.session import Session
    from skyloop.secrets import SecretStore
    from skyloop.settings import Settings
    from skyloop.store import Store

SETUP_TIMEOUT_S = 300
_setup_lock = threading.Lock()


def workspaces_dir(settings: Settings) -> Path:
    if settings.workspaces_dir:
        return Path(settings.workspaces_dir)
    return Path(tempfile.gettempdir()) / "skyloop-workspaces"


@functools.cache
def _engine(kind: str, root: str, max_bytes: int, hidden: tuple[str, ...], config: tuple[Any, ...]) -> Engine:
    if kind == "agentcore":
        from skyloop.environments.agentcore import AgentCoreEngine

        return AgentCoreEngine(*config, max_bytes=max_bytes)
    from skyloop.environments.local import LocalEngine

    return LocalEngine(Path(root), max_bytes=max_bytes, hidden=hidden)


def engine(settings: Settings | None = None) -> Engine:
    """This deployment's engine (one per configuration in a process)."""
    from skyloop import deps

    settings = settings or deps.get_settings()
    hidden = tuple(p for p in (settings.data_dir,) if p)
    config: tuple[Any, ...] = ()
    if settings.hosted_engine == "agentcore":
        config = (
            (settings.code_interpreter_id or "", settings.code_interpreter_public_id or ""),
            settings.blob_bucket,
            settings.table_name,
            settings.hosted_idle_s,
        )
    return _engine(
        settings.hosted_engine, str(workspaces_dir(settings)), settings.workspace_max_bytes, hidden, config
    )


def environment_for(session: Session, agent: Agent) -> HostedEnvironment | None:
    return environment_of(agent.spec, session.environment)


def command_env(environment: HostedEnvironment, secrets: SecretStore | None) -> dict[str, str]:
    """The environment's ``env``, secrets read now (never stored, logged or shown)."""
    out: dict[str, str] = {}
    for name, value in environment.env.items():
        if isinstance(value, SecretValue):
            if secrets is None:
                from skyloop.environments.port import SandboxError

                raise SandboxError(f"env.{name} names a secret and this deployment has no secret store")
            try:
                out[name] = secrets.get(value.secret)
            except Exception:
                from skyloop.environments.port import SandboxError

                raise SandboxError(f"env.{name}: its secret could not be read") from None
        else:
            out[name] = value
    return out


def prepared(
    session: Session,
    environment: HostedEnvironment,
    env: dict[str, str],
    eng: Engine,
    report: Callable[[str, bool, str | None], None] | None = None,
) -> tuple[Sandbox, str | None]:
    """The session's sandbox, its workspace made if this is its first use; and the setup's failure, if any.

    ``report`` hears the making: ``pending`` before it, then ``ready`` or ``failed`` (with why), and
    whether a seeded workspace is being restored (the cloud's new interpreter session); the caller
    records them in the session's log (``session.environment``). A ready workspace reports nothing.
    """
    from skyloop import workspace as paths
    from skyloop.environments.port import SandboxError

    def tell(status: str, restored: bool, error: str | None = None) -> None:
        if report is not None:
            report(status, restored, error)

    sandbox = eng.sandbox(session.id, network=environment.network)
    if eng.is_ready(session.id):
        return sandbox, None
    with _setup_lock:  # two calls of one response may arrive at once in one environment
        if eng.is_ready(session.id):
            return sandbox, None
        seeded = getattr(
            eng, "is_seeded", None
        )  # the cloud's new interpreter session: setup again, not files
        restored = seeded is not None and bool(seeded(session.id))
        tell("pending", restored)
        try:
            if not restored:
                for item in environment.files:
                    sandbox.write(paths.relative(item.path), item.content.encode("utf-8"))
            for command in environment.setup:
                result = sandbox.run(command, timeout_s=SETUP_TIMEOUT_S, env=env)
                if result.timed_out or result.exit_code:
                    why = "timed out" if result.timed_out else f"exited {result.exit_code}"
                    tail = result.output.strip()[-4000:]
                    failed = f"the environment's setup command {command!r} {why}:\n{tail}".rstrip()
                    tell("failed", restored, failed)
                    return sandbox, failed
            eng.mark_ready(session.id)
        except (SandboxError, OSError) as exc:
            tell("failed", restored, f"the workspace could not be made: {exc}")
            raise
        tell("ready", restored)
    return sandbox, None


def run_call(
    session: Session,
    agent: Agent,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout_s: int,
    secrets: SecretStore | None,
    on_output: Callable[[str], None] | None = None,
    settings: Settings | None = None,
    task: str | None = None,
    report: Callable[[str, bool, str | None], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> HostedRun:
    """One hosted call in the session's environment; every failure is the call's output. A command
    longer than this invocation may wait for runs as background ``task`` (``pending``: :func:`poll_call`).
    ``report`` hears the workspace being made (:func:`prepared`); ``on_start`` is called once it is
    ready, just before the call runs (so the call is announced after the environment, as OpenAI orders)."""
    from skyloop import deps

    settings = settings or deps.get_settings()
    from skyloop.environments.port import SandboxError
    from skyloop.environments.tools import HostedRun, run_tool

    environment = environment_for(session, agent)
    if environment is None:
        return HostedRun(f"Error: '{name}' is a hosted tool and this session has no hosted environment")
    try:
        env = command_env(environment, secrets)
        sandbox, failed = prepared(session, environment, env, engine(settings), report)
    except SandboxError as exc:
        return _not_run(name, arguments, f"Error: the hosted environment is not available: {exc}")
    except OSError as exc:
        return _not_run(name, arguments, f"Error: the hosted environment could not be made: {exc}")
    if failed is not None:
        return _not_run(name, arguments, f"Error: {failed}")
    if on_start is not None:
        on_start()
    return run_tool(
        name,
        arguments,
        sandbox,
        timeout_s=timeout_s,
        env=env,
        on_output=on_output,
        task=task,
        sync_s=settings.hosted_sync_s,
    )


def _not_run(name: str, arguments: dict[str, Any], output: str) -> HostedRun:
    """A call the environment could not run; a command's details say it did not run (no exit code),
    so it still ends as a (failed) command, not as a bare output."""
    from skyloop.environments.tools import HostedRun

    if name != "Bash":
        return HostedRun(output)
    command = str(arguments.get("command", ""))
    details = {"kind": "command", "command": command, "exit_code": None, "duration_ms": 0, "timed_out": False}
    return HostedRun(output, details)


def poll_call(
    session: Session,
    agent: Agent,
    task: str,
    *,
    timeout_s: int,
    on_output: Callable[[str], None] | None = None,
    wait_s: float = 5.0,
) -> HostedRun | None:
    """A background command's result once it ended (None while it runs); a failure is its output."""
    from skyloop.environments.port import SandboxError
    from skyloop.environments.tools import HostedRun, command_run

    environment = environment_for(session, agent)
    if environment is None:
        return HostedRun("Error: this session has no hosted environment any more")
    sandbox = engine().sandbox(session.id, network=environment.network)
    try:
        result = sandbox.task(task, wait_s=wait_s, on_output=on_output)
    except (SandboxError, OSError, ValueError) as exc:
        return HostedRun(f"Error: the command could not be followed: {exc}")
    if result is None:
        return None
    command = _command_of(sandbox, task)
    return command_run(command, result, timeout_s)


def _command_of(sandbox: Sandbox, task: str) -> str:
    name = getattr(sandbox, "command_of", None)
    return str(name(task)) if name is not None else ""


def stop_call(session: Session, agent: Agent, task: str) -> None:
    """End a background command whose turn stopped (best effort)."""
    environment = environment_for(session, agent)
    if environment is None:
        return
    sandbox = engine().sandbox(session.id, network=environment.network)
    try:
        sandbox.stop(task)
    except Exception:  # gone already
        return


def unavailable_reason(settings: Settings) -> str | None:
    """Why this deployment cannot run hosted tools (said at start), or None."""
    if settings.hosted_engine != "local":
        return None
    from skyloop.environments import local

    if local.isolation() == "none":
        return None
    problem = local.bwrap_problem()
    return None if problem is None else f"{local.NO_BWRAP} ({problem})"


def snapshot(session_id: str, settings: Settings | None = None) -> None:
    """Keep the workspace beyond its interpreter session (the cloud engine; the local one keeps it on disk)."""
    eng = engine(settings)
    keep = getattr(eng, "snapshot", None)
    if keep is not None:
        keep(session_id)


def stop_idle(
    settings: Settings | None = None, store: Store | None = None, *, now: int | None = None
) -> list[str] | None:
    """Stop the cloud's idle interpreter sessions (None where the engine keeps none: the local one);
    each stop is a ``session.environment`` ``suspended`` in its session's log."""
    eng = engine(settings)
    stop = getattr(eng, "stop_idle_sessions", None)
    if stop is None:
        return None
    stopped: list[tuple[str, str]] = list(stop(now))
    for session_id, interpreter_session in stopped:
        record_suspended(store, session_id, interpreter_session)
    return [session_id for session_id, _ in stopped]


def record_suspended(store: Store | None, session_id: str, interpreter_session: str) -> None:
    """The stop of an idle interpreter session, in the session's log (once per interpreter session; a
    session deleted meanwhile has no log to write to)."""
    from skyloop import deps
    from skyloop import events as ev
    from skyloop.errors import ConflictError, NotFoundError
    from skyloop.store import Append

    batch = Append(session_id, dedupe_key=f"environment:suspended:{interpreter_session}")
    batch.event(ev.SESSION_ENVIRONMENT, ev.environment_status("suspended"))
    try:
        (store or deps.store()).append(batch)
    except (NotFoundError, ConflictError):
        return


def deleter(session_id: str, settings: Settings | None = None) -> Callable[[], None]:
    """What removes the session's workspace, read now (before the session's records go)."""
    eng = engine(settings)
    prepare = getattr(eng, "deleter", None)
    if prepare is not None:
        return prepare(session_id)
    return lambda: eng.delete(session_id)


def copy(source_id: str, target_id: str, settings: Settings | None = None) -> None:
    engine(settings).copy(source_id, target_id)
