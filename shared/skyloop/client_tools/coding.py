"""The ``coding`` client tool set: Read, Write, Edit, Glob, Grep, Bash, LSP, get_current_time.

Matches omnigent's ``coding`` set so agents written for it behave the same
against skyloop. Everything runs locally on the client's machine, in the
client's current directory.

Unlike omnigent, :func:`execute_tool` never raises: a parked tool call blocks
the session until the client answers, so bad arguments or a failing tool must
still produce a string the model can read and react to.
"""

from __future__ import annotations

import contextlib
import glob as glob_mod
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["TOOLS", "execute_tool"]

# Cap on any tool result, so a huge file or noisy command cannot flood the
# model's context (or freeze a terminal UI rendering it).
MAX_OUTPUT_CHARS = 20_000
# Cap on Glob paths, applied before the character cap so the notice says how many matched.
MAX_GLOB_RESULTS = 200
# Bash's default timeout, in milliseconds like the ``timeout`` argument.
DEFAULT_BASH_TIMEOUT_MS = 120_000
# Grep's timeout, in seconds.
GREP_TIMEOUT_S = 30


# ── Argument models ──────────────────────────────────────
#
# One model per tool: its JSON schema is what the model sees, and the same
# model validates the arguments the model sends back. ``extra="forbid"``
# rejects misspelled arguments instead of silently ignoring them; the
# ``additionalProperties: false`` it implies is stripped from the published
# schema (see ``_parameters_schema``) to match omnigent's non-strict schemas.


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadArgs(_Args):
    file_path: str = Field(
        description="Absolute path to the file to read, e.g. '/home/user/project/main.py'."
    )
    offset: int | None = Field(
        default=None,
        description="Line number to start reading from (1-based). Only needed for large files.",
    )
    limit: int | None = Field(
        default=None,
        description="Maximum number of lines to read. Only needed for large files.",
    )


class WriteArgs(_Args):
    file_path: str = Field(description="Absolute path to the file to write. Parent directories are created.")
    content: str = Field(description="The full content to write to the file.")


class EditArgs(_Args):
    file_path: str = Field(description="Absolute path to the file to edit.")
    old_string: str = Field(description="The exact text to find and replace, including whitespace.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(
        default=False,
        description="If true, replace all occurrences of old_string. Defaults to false.",
    )


class GlobArgs(_Args):
    pattern: str = Field(description="Glob pattern to match, e.g. '**/*.py' or 'src/**/*.ts'.")
    path: str | None = Field(
        default=None,
        description="Absolute path of the directory to search in. Defaults to the current working directory.",
    )


class GrepArgs(_Args):
    pattern: str = Field(description="Regex pattern to search for, e.g. 'def main' or 'import\\s+asyncio'.")
    path: str | None = Field(
        default=None,
        description="Absolute path of the file or directory to search in. Defaults to the current working directory.",
    )
    glob: str | None = Field(
        default=None,
        description="Glob pattern to filter files, e.g. '*.py' or '*.{ts,tsx}'.",
    )
    output_mode: Literal["content", "files_with_matches", "count"] | None = Field(
        default=None,
        description=(
            "Output mode: 'content' shows matching lines, "
            "'files_with_matches' shows file paths (default), "
            "'count' shows match counts per file."
        ),
    )


class BashArgs(_Args):
    command: str = Field(description="The shell command to execute, e.g. 'pytest tests/ -x' or 'git status'.")
    timeout: int | None = Field(
        default=None,
        description="Timeout in milliseconds. Defaults to 120000 (2 minutes).",
    )


class LspArgs(_Args):
    action: Literal["definition", "references", "hover", "symbols", "implementations", "diagnostics"] = Field(
        description=(
            "The LSP operation: 'definition' jumps to a symbol's definition, "
            "'references' finds all usages, 'hover' gets type info, "
            "'symbols' lists symbols in a file, 'implementations' finds interface "
            "implementations, 'diagnostics' returns type errors and warnings."
        ),
    )
    file_path: str = Field(description="Absolute path to the file.")
    line: int | None = Field(
        default=None,
        description="1-based line number of the symbol. Required for definition, references, hover and implementations.",
    )
    character: int | None = Field(
        default=None,
        description="0-based character offset within the line. Required for definition, references, hover and implementations.",
    )


class GetCurrentTimeArgs(_Args):
    pass


# ── Tool bodies ──────────────────────────────────────────


def _read(args: ReadArgs) -> str:
    path = args.file_path
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"Error reading {path}: {exc}"
    lines = text.splitlines()
    start = max(0, (args.offset if args.offset is not None else 1) - 1)
    count = max(0, args.limit) if args.limit is not None else len(lines)
    selected = lines[start : start + count]
    # Real (1-based) line numbers, so an Edit can be aimed at what was read.
    return "\n".join(f"{start + i + 1}\t{line}" for i, line in enumerate(selected))


def _write(args: WriteArgs) -> str:
    target = Path(args.file_path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args.content, encoding="utf-8")
    except OSError as exc:
        return f"Error writing {target}: {exc}"
    return f"Successfully wrote {target}"


def _edit(args: EditArgs) -> str:
    target = Path(args.file_path)
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"Error reading {target}: {exc}"
    count = text.count(args.old_string)
    if count == 0:
        return f"Error: old_string not found in {target}"
    if count > 1 and not args.replace_all:
        # Refuse rather than guess which occurrence the model meant.
        return (
            f"Error: old_string appears {count} times (expected 1). "
            "Use replace_all=true or provide more context."
        )
    if args.replace_all:
        result, replaced = text.replace(args.old_string, args.new_string), count
    else:
        result, replaced = text.replace(args.old_string, args.new_string, 1), 1
    try:
        target.write_text(result, encoding="utf-8")
    except OSError as exc:
        return f"Error writing {target}: {exc}"
    return f"Replaced {replaced} occurrence(s) in {target}"


def _glob(args: GlobArgs) -> str:
    base = args.path if args.path is not None else "."
    matches = sorted(glob_mod.glob(os.path.join(base, args.pattern), recursive=True))
    if not matches:
        return "No files matched."
    total = len(matches)
    if total > MAX_GLOB_RESULTS:
        shown = "\n".join(matches[:MAX_GLOB_RESULTS])
        return f"{shown}\n\n... ({total} total matches, showing first {MAX_GLOB_RESULTS})"
    return "\n".join(matches)


def _grep_command(args: GrepArgs) -> list[str] | None:
    """The argv for ripgrep, else ``grep -r``, else None; never a shell string, so patterns need no quoting."""
    search_path = args.path if args.path is not None else "."
    mode = args.output_mode if args.output_mode is not None else "files_with_matches"
    rg = shutil.which("rg")
    if rg is not None:
        cmd = [rg, "-e", args.pattern, search_path, "--no-heading"]
        if args.glob is not None:
            cmd.extend(["--glob", args.glob])
        if mode == "files_with_matches":
            cmd.append("--files-with-matches")
        elif mode == "count":
            cmd.append("--count")
        return cmd
    grep = shutil.which("grep")
    if grep is None:
        return None
    cmd = [grep, "-r"]
    if mode == "files_with_matches":
        cmd.append("-l")
    elif mode == "count":
        cmd.append("-c")
    if args.glob is not None:
        cmd.append(f"--include={args.glob}")
    cmd.extend(["-e", args.pattern, search_path])
    return cmd


def _grep(args: GrepArgs) -> str:
    cmd = _grep_command(args)
    if cmd is None:
        return "Search failed: neither ripgrep nor grep is available."
    try:
        result = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GREP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"Search timed out after {GREP_TIMEOUT_S}s"
    # Exit 1 only means "no matches"; 2 and up are real failures.
    if result.returncode > 1:
        return f"Search failed (exit {result.returncode}): {result.stderr.strip()}"
    return result.stdout.strip() or "No matches found."


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill the whole process group, so children the shell spawned die too and release our pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups of this kind
            proc.kill()


def _bash(args: BashArgs) -> str:
    timeout_ms = args.timeout if args.timeout is not None else DEFAULT_BASH_TIMEOUT_MS
    # Popen rather than subprocess.run: on timeout run() kills only the shell,
    # and a grandchild still holding stdout would keep us blocked. A new
    # session makes the shell a group leader whose group we can kill whole.
    # stdin is closed so a command that waits for input cannot hang the client.
    with subprocess.Popen(
        args.command,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            # Drain what is left; bounded, in case something escaped the group and holds the pipes.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=5)
            return f"Command timed out after {timeout_ms}ms"
        except BaseException:
            _kill_group(proc)
            raise
    output = stdout
    if stderr:
        output += "\nSTDERR:\n" + stderr
    return output.strip() or "(no output)"


def _lsp(args: LspArgs) -> str:
    # A stub, as in omnigent: this client manages no language servers.
    return f"LSP not implemented in this client. Action: {args.action}, file: {args.file_path}"


def _get_current_time(_args: GetCurrentTimeArgs) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


# ── Registry and schemas ─────────────────────────────────


@dataclass(frozen=True, slots=True)
class _Tool:
    """One tool: the name the model calls, what it is told, how arguments are checked, what runs."""

    name: str
    description: str
    args_model: type[_Args]
    run: Callable[[Any], str]


_REGISTRY: dict[str, _Tool] = {
    tool.name: tool
    for tool in (
        _Tool(
            "Read",
            "Read a text file. Returns its lines prefixed with 1-based line numbers and a tab. "
            "file_path must be absolute. Use offset and limit to page through large files; "
            f"output is truncated at {MAX_OUTPUT_CHARS} characters.",
            ReadArgs,
            _read,
        ),
        _Tool(
            "Write",
            "Create a new file or overwrite an existing file with the given content, creating parent "
            "directories as needed. file_path must be absolute. Prefer Edit for changing existing files.",
            WriteArgs,
            _write,
        ),
        _Tool(
            "Edit",
            "Make a targeted string replacement in an existing file (file_path must be absolute). "
            "old_string must match the file exactly, whitespace included, and appear exactly once "
            "unless replace_all is true; Read the file first to copy it precisely.",
            EditArgs,
            _edit,
        ),
        _Tool(
            "Glob",
            "Find files matching a glob pattern ('**' matches any number of directories). Returns the "
            f"matching paths sorted by name, at most {MAX_GLOB_RESULTS}. Pass an absolute path to "
            "search somewhere other than the current working directory.",
            GlobArgs,
            _glob,
        ),
        _Tool(
            "Grep",
            "Search file contents with a regular expression, using ripgrep (falls back to grep -r). "
            "Returns matching file paths by default, matching lines with output_mode='content', or "
            "per-file counts with output_mode='count'. Pass an absolute path to narrow the search.",
            GrepArgs,
            _grep,
        ),
        _Tool(
            "Bash",
            "Execute a shell command in the current working directory and return its stdout and "
            "stderr (the exit code is not reported). Use for running tests, git, builds, etc. "
            "Prefer absolute paths; stdin is closed, so commands must not wait for input.",
            BashArgs,
            _bash,
        ),
        _Tool(
            "LSP",
            "Code intelligence via language servers: jump to definitions, find references, get type "
            "info, list symbols, find implementations, get diagnostics. file_path must be absolute. "
            "Not implemented by this client yet; use Grep and Read instead.",
            LspArgs,
            _lsp,
        ),
        _Tool(
            "get_current_time",
            "Get the current local date and time as an ISO timestamp (YYYY-MM-DDTHH:MM:SS).",
            GetCurrentTimeArgs,
            _get_current_time,
        ),
    )
}


def _parameters_schema(model: type[_Args]) -> dict[str, Any]:
    """The model's JSON schema as published to the model: non-strict, always with ``required``."""
    if not model.model_fields:
        return {"type": "object", "properties": {}, "required": []}
    schema = model.model_json_schema()
    schema.pop("additionalProperties", None)
    schema.setdefault("required", [])
    return schema


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": _parameters_schema(tool.args_model),
        },
    }
    for tool in _REGISTRY.values()
]


# ── Dispatch ─────────────────────────────────────────────


def _truncate(output: str) -> str:
    """Cap the result, telling the model it was cut so it can narrow its request."""
    if len(output) <= MAX_OUTPUT_CHARS:
        return output
    return (
        output[:MAX_OUTPUT_CHARS]
        + f"\n\n... (truncated — {len(output)} chars total, showing first {MAX_OUTPUT_CHARS})"
    )


def _format_validation_error(exc: ValidationError) -> str:
    """One short line per problem, without echoing the (possibly huge) input back."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in error["loc"])
        parts.append(f"{loc}: {error['msg']}" if loc else error["msg"])
    return "; ".join(parts)


def execute_tool(name: str, arguments: dict[str, Any] | None) -> str:
    """Run tool ``name`` locally and return its result; never raises, so every call gets an answer.

    ``arguments`` may be None (no arguments) or, leniently, the raw JSON string
    a Chat Completions tool call carries.
    """
    tool = _REGISTRY.get(name)
    if tool is None:
        return f"Unknown tool: {name}"
    raw: Any = {} if arguments is None else arguments
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return f"Error: invalid arguments for {name}: arguments are not valid JSON"
    try:
        args = tool.args_model.model_validate(raw)
    except ValidationError as exc:
        return _truncate(f"Error: invalid arguments for {name}: {_format_validation_error(exc)}")
    try:
        return _truncate(tool.run(args))
    except Exception as exc:
        return _truncate(f"Error executing {name}: {exc}")
