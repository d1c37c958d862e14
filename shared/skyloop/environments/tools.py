"""The hosted built-ins (Bash, Read, Write, Edit, Glob, Grep) on a sandbox: the ``coding`` set's
names, argument schemas and answers, with paths inside ``/workspace``.

Every failure the model can act on (a bad argument, a path outside the
workspace, a file that is not there, a command past its timeout, a full
workspace, an environment that cannot run commands) is the tool's output, so
the turn goes on. A command's result keeps its exit code and duration
(:class:`HostedRun`), which the call's output item carries as ``details``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from skyloop import workspace as paths
from skyloop.environments.port import CommandResult, SandboxError

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.environments.port import Sandbox


@dataclass
class HostedRun:
    output: str
    details: dict[str, Any] = field(default_factory=dict)  # kind, exit_code, duration_ms, command...
    pending: bool = False  # a command still running past the invocation's time (polled later)


def _numbered(text: str, offset: int | None, limit: int | None) -> str:
    lines = text.splitlines()
    start = max(0, (offset if offset is not None else 1) - 1)
    count = max(0, limit) if limit is not None else len(lines)
    return "\n".join(f"{start + i + 1}\t{line}" for i, line in enumerate(lines[start : start + count]))


def _read_text(sandbox: Sandbox, path: str) -> str:
    return sandbox.read(paths.relative(path)).decode("utf-8")


def run_tool(
    name: str,
    arguments: dict[str, Any],
    sandbox: Sandbox,
    *,
    timeout_s: int,
    env: dict[str, str],
    on_output: Callable[[str], None] | None = None,
    task: str | None = None,
    sync_s: float | None = None,
) -> HostedRun:
    """Run one hosted call; never raises for what the model did (its output says what went wrong).

    A command whose limit is longer than ``sync_s`` (what the invocation may wait) runs as a
    background task named ``task``: waited for up to ``sync_s``, then ``pending`` (:func:`task_result`).
    """
    body = _TOOLS.get(name)
    if body is None:
        return HostedRun(f"Error: '{name}' is not a hosted tool")
    try:
        if name == "Bash":
            return _bash(arguments, sandbox, timeout_s, env, on_output, task=task, sync_s=sync_s)
        return body(arguments, sandbox, timeout_s, env, on_output)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return HostedRun(f"Error: invalid arguments for {name}: {problems}")
    except paths.PathOutsideWorkspace as exc:
        return HostedRun(f"Error: {exc}; every path must be inside {paths.WORKSPACE}")
    except SandboxError as exc:
        return HostedRun(f"Error: {exc}")


def _read(arguments: dict[str, Any], sandbox: Sandbox, *_: Any) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.ReadArgs.model_validate(arguments)
    shown = paths.absolute(args.file_path)
    try:
        text = _read_text(sandbox, args.file_path)
    except (OSError, UnicodeDecodeError) as exc:
        return HostedRun(f"Error reading {shown}: {_reason(exc)}", {"kind": "file", "path": shown})
    return HostedRun(_numbered(text, args.offset, args.limit), {"kind": "file", "path": shown})


def _write(arguments: dict[str, Any], sandbox: Sandbox, *_: Any) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.WriteArgs.model_validate(arguments)
    shown = paths.absolute(args.file_path)
    try:
        sandbox.write(paths.relative(args.file_path), args.content.encode("utf-8"))
    except OSError as exc:
        return HostedRun(f"Error writing {shown}: {_reason(exc)}", {"kind": "file", "path": shown})
    return HostedRun(f"Successfully wrote {shown}", {"kind": "file", "path": shown})


def _glob(arguments: dict[str, Any], sandbox: Sandbox, *_: Any) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.GlobArgs.model_validate(arguments)
    base = paths.relative(args.path) if args.path else ""
    return HostedRun(
        sandbox.search({"op": "glob", "pattern": args.pattern, "base": base}), {"kind": "search"}
    )


def _grep(arguments: dict[str, Any], sandbox: Sandbox, *_: Any) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.GrepArgs.model_validate(arguments)
    base = paths.relative(args.path) if args.path else ""
    request: dict[str, object] = {
        "op": "grep",
        "pattern": args.pattern,
        "base": base,
        "include": args.glob,
        "mode": args.output_mode,
    }
    return HostedRun(sandbox.search(request), {"kind": "search"})


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text (a binary file?)"
    return getattr(exc, "strerror", None) or str(exc)


def _edit(arguments: dict[str, Any], sandbox: Sandbox, *_: Any) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.EditArgs.model_validate(arguments)
    shown = paths.absolute(args.file_path)
    details = {"kind": "file", "path": shown}
    try:
        text = _read_text(sandbox, args.file_path)
    except (OSError, UnicodeDecodeError) as exc:
        return HostedRun(f"Error reading {shown}: {_reason(exc)}", details)
    count = text.count(args.old_string)
    if count == 0:
        return HostedRun(f"Error: old_string not found in {shown}", details)
    if count > 1 and not args.replace_all:
        return HostedRun(
            f"Error: old_string appears {count} times (expected 1). Use replace_all=true or provide more context.",
            details,
        )
    replaced = count if args.replace_all else 1
    result = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
    try:
        sandbox.write(paths.relative(args.file_path), result.encode("utf-8"))
    except OSError as exc:
        return HostedRun(f"Error writing {shown}: {_reason(exc)}", details)
    return HostedRun(f"Replaced {replaced} occurrence(s) in {shown}", details)


def _bash(
    arguments: dict[str, Any],
    sandbox: Sandbox,
    timeout_s: int,
    env: dict[str, str],
    on_output: Callable[[str], None] | None,
    *,
    task: str | None = None,
    sync_s: float | None = None,
) -> HostedRun:
    from skyloop.client_tools import coding

    args = coding.BashArgs.model_validate(arguments)
    # the call's own timeout (ms, as the coding set takes it), within the tool's declared maximum
    asked = args.timeout / 1000 if args.timeout is not None else timeout_s
    limit = max(0.001, min(asked, timeout_s))
    if task is not None and sync_s is not None and limit > sync_s:
        sandbox.start(task, args.command, timeout_s=limit, env=env)
        found = sandbox.task(task, wait_s=sync_s, on_output=on_output)
        if found is None:
            return HostedRun("", {"kind": "command", "command": args.command}, pending=True)
        return command_run(args.command, found, limit)
    return command_run(
        args.command, sandbox.run(args.command, timeout_s=limit, env=env, on_output=on_output), limit
    )


def command_run(command: str, result: CommandResult, limit: float) -> HostedRun:
    """A finished command as the call's output and details."""
    details = {
        "kind": "command",
        "command": command,
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "timed_out": result.timed_out,
    }
    output = result.output.strip()
    if result.timed_out:
        shown = f"{limit:g}"
        text = f"Command timed out after {shown}s and was killed with every process it started"
        return HostedRun(f"{output}\n\n{text}" if output else text, details)
    if result.exit_code:
        return HostedRun(
            f"{output}\n\n[exit code {result.exit_code}]" if output else f"[exit code {result.exit_code}]",
            details,
        )
    return HostedRun(output or "(no output)", details)


_TOOLS: dict[str, Callable[..., HostedRun]] = {
    "Bash": _bash,
    "Read": _read,
    "Write": _write,
    "Edit": _edit,
    "Glob": _glob,
    "Grep": _grep,
}


def arguments_of(raw: str) -> dict[str, Any] | str:
    """The call's arguments as an object, or why not (said to the model)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return "Error: the arguments are not valid JSON"
    return value if isinstance(value, dict) else "Error: the arguments must be a JSON object"
