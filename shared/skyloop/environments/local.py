"""The local engine: each session's workspace is a directory; commands run in bubblewrap.

``skyloop dev`` keeps workspaces under its data directory (``workspaces/<session id>``),
so they outlive a restart; ``--ephemeral`` keeps them in a temporary directory
removed at stop. A command runs as Linux sandboxes of coding agents run it
(Debian's ``bubblewrap``, ``bwrap``): a new mount namespace whose root holds
the host's top-level directories read-only, the data directory and the other
workspaces hidden (an empty tmpfs over them), credentials (``~/.aws``,
``~/.ssh``) hidden, a private ``/tmp``, the session's workspace bound read-write
at ``/workspace`` (the working directory and ``HOME``), no capabilities, its
own PID namespace (``--die-with-parent``: it dies with the Lambda environment
that started it), and with ``network: none`` its own network namespace, where
nothing (loopback included) answers. At its timeout the whole process tree
is killed. The environment is cleared: a command sees ``PATH``, ``HOME``,
``LANG`` and the environment's own ``env``, never the stack's keys.

Without bubblewrap, hosted tools are refused with a clear error unless the stack
was started with ``--hosted-unisolated`` (``SKYLOOP_HOSTED_ISOLATION=none``),
which runs commands as plain processes in the workspace (file tools still
refuse paths outside it; a command can reach anything the stack's user can).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from skyloop.environments import search
from skyloop.environments.port import CommandResult, SandboxError, WorkspaceEntry, WorkspaceFull
from skyloop.workspace import WORKSPACE, PathOutsideWorkspace

if TYPE_CHECKING:
    from collections.abc import Callable

ISOLATION_ENV = "SKYLOOP_HOSTED_ISOLATION"  # "bwrap" (the default) or "none" (explicitly unisolated)
MAX_CAPTURE_BYTES = 8_000_000  # what a command's output may hold in memory (the rest is dropped, said)
HIDDEN_HOME = (".aws", ".ssh", ".config/skyloop", ".netrc", ".docker")
META = ".meta"  # beside the workspaces: per-session state the agent cannot touch
NO_BWRAP = (
    "hosted tools need bubblewrap (bwrap) on the stack's machine, and it is not installed or cannot "
    "create namespaces here: install it (Debian/Ubuntu: apt-get install bubblewrap) and restart, or "
    "restart with --hosted-unisolated to run them without isolation"
)


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap runs here (it is installed and may create its namespaces), else why not."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "true"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not run: {exc}"
    return None if proc.returncode == 0 else f"bubblewrap could not run: {proc.stderr.strip()[:300]}"


def _root_binds() -> list[str]:
    """The host's top-level directories, read-only (links as links); /proc, /dev, /tmp, /run made anew."""
    out: list[str] = []
    for entry in sorted(os.listdir("/")):
        path = f"/{entry}"
        if entry in ("proc", "dev", "tmp", "sys", "workspace", "run"):
            continue
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    return out


def isolation() -> str:
    return os.environ.get(ISOLATION_ENV, "bwrap")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class LocalSandbox:
    """One session's workspace directory, and commands run in it."""

    def __init__(
        self,
        workspace: Path,
        *,
        network: str,
        hidden: tuple[str, ...],
        max_bytes: int,
        tasks: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.root = os.path.realpath(workspace)
        self.network = network
        self.hidden = hidden
        self.max_bytes = max_bytes
        self.tasks = tasks  # where long commands keep their output and exit status (outside the workspace)

    # ---------------------------------------------------------------------------------- commands
    def _argv(self, command: str, env: dict[str, str]) -> list[str]:
        if isolation() == "none":
            return ["/bin/sh", "-c", command]
        problem = bwrap_problem()
        if problem is not None:
            raise SandboxError(NO_BWRAP + f" ({problem})")
        argv = [shutil.which("bwrap") or "bwrap", *_root_binds()]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        for path in self.hidden:
            if os.path.isdir(path):
                argv += ["--tmpfs", path]
        argv += ["--dir", WORKSPACE, "--bind", self.root, WORKSPACE, "--chdir", WORKSPACE]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if self.network != "public":
            argv.append("--unshare-net")
        argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for name, value in env.items():
            argv += ["--setenv", name, value]
        return [*argv, "/bin/sh", "-c", command]

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        env: dict[str, str],
        on_output: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run ``command`` (``sh -c``) in the workspace; its output streams to ``on_output`` as it comes."""
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": WORKSPACE,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            **env,
        }
        argv = self._argv(command, full_env)
        plain = isolation() == "none"
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own: killed whole at its timeout
                cwd=self.root if plain else None,
                env={**full_env, "HOME": self.root} if plain else {"PATH": full_env["PATH"]},
            )
        except OSError as exc:
            raise SandboxError(f"the command could not start: {exc}") from None
        chunks: list[bytes] = []
        dropped = [0]

        def read() -> None:
            assert proc.stdout is not None
            held = 0
            while True:
                data = os.read(proc.stdout.fileno(), 65536)
                if not data:
                    return
                if held + len(data) <= MAX_CAPTURE_BYTES:
                    chunks.append(data)
                    held += len(data)
                else:
                    dropped[0] += len(data)
                if on_output is not None:
                    with contextlib.suppress(Exception):  # the stream's loss is not the command's
                        on_output(data.decode("utf-8", errors="replace"))

        reader = threading.Thread(target=read, name="hosted-command-output", daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)  # bwrap and, through its PID namespace, every process the command started
            proc.wait()
        except BaseException:
            _kill(proc)
            raise
        reader.join(timeout=5)
        with contextlib.suppress(OSError):
            assert proc.stdout is not None
            proc.stdout.close()
        output = b"".join(chunks).decode("utf-8", errors="replace")
        if dropped[0]:
            output += f"\n…[{dropped[0]:,} more bytes of output were dropped]"
        duration_ms = int((time.monotonic() - started) * 1000)
        return CommandResult(None if timed_out else proc.returncode, output, duration_ms, timed_out)

    # ---------------------------------------------------------------------------------- long commands
    def _task_dir(self, task: str) -> Path:
        if self.tasks is None or not task or "/" in task or task.startswith("."):
            raise SandboxError("long commands need the engine's task directory")
        return self.tasks / task

    def start(self, task: str, command: str, *, timeout_s: float, env: dict[str, str]) -> None:
        """Run ``command`` in the background (it outlives this invocation): its output goes to a file,
        its exit status to another when it ends; ``timeout -s KILL`` ends it at its limit."""
        folder = self._task_dir(task)
        if (folder / "meta.json").exists():
            return  # started already (a retried invocation)
        folder.mkdir(parents=True, exist_ok=True)
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": WORKSPACE,
            "LANG": "C.UTF-8",
            **env,
        }
        argv = self._argv(command, full_env)
        seconds = max(1, int(timeout_s + 0.999))
        out, status = folder / "output", folder / "exit"
        script = f'timeout -s KILL {seconds} "$@" > "{out}" 2>&1; echo $? > "{status}.tmp"; mv "{status}.tmp" "{status}"'
        meta = {"started_at": time.time(), "timeout_s": seconds, "command": command}
        (folder / "meta.json").write_text(json.dumps(meta))
        plain = isolation() == "none"
        proc = subprocess.Popen(
            ["/bin/sh", "-c", script, "sh", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.root if plain else None,
            env={**full_env, "HOME": self.root} if plain else {"PATH": full_env["PATH"]},
        )
        (folder / "pid").write_text(str(proc.pid))

    def task(
        self, task: str, *, wait_s: float, on_output: Callable[[str], None] | None = None
    ) -> CommandResult | None:
        """The command's result once it ended (waiting up to ``wait_s``), else None; new output streams."""
        folder = self._task_dir(task)
        meta = json.loads((folder / "meta.json").read_text())
        deadline = time.monotonic() + wait_s
        sent = int(meta.get("streamed", 0))
        while True:
            done = (folder / "exit").exists()
            if on_output is not None:
                sent = self._stream(folder / "output", sent, on_output)
            if done:
                code = int((folder / "exit").read_text().strip() or 1)
                output = (folder / "output").read_text(encoding="utf-8", errors="replace")
                elapsed = time.time() - float(meta["started_at"])
                timed_out = code == 137 and elapsed >= float(meta["timeout_s"]) - 0.5
                return CommandResult(None if timed_out else code, output, int(elapsed * 1000), timed_out)
            if time.monotonic() >= deadline:
                meta["streamed"] = sent
                (folder / "meta.json").write_text(json.dumps(meta))
                return None
            time.sleep(0.2)

    @staticmethod
    def _stream(path: Path, sent: int, on_output: Callable[[str], None]) -> int:
        with contextlib.suppress(FileNotFoundError), path.open("rb") as handle:
            handle.seek(sent)
            data = handle.read(MAX_CAPTURE_BYTES)
            if data:
                with contextlib.suppress(Exception):
                    on_output(data.decode("utf-8", errors="replace"))
                return sent + len(data)
        return sent

    def command_of(self, task: str) -> str:
        return str(json.loads((self._task_dir(task) / "meta.json").read_text()).get("command", ""))

    def stop(self, task: str) -> None:
        """End a background command (its turn stopped): kill its process group."""
        folder = self._task_dir(task)
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            pid = int((folder / "pid").read_text())
            os.killpg(pid, signal.SIGKILL)

    # ---------------------------------------------------------------------------------- files
    def _host(self, path: str) -> str:
        """The host path of a workspace path, refused when a link takes it out of the workspace."""
        full = os.path.join(self.root, path) if path else self.root
        real = os.path.realpath(full)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise PathOutsideWorkspace(f"{WORKSPACE}/{path} leads out of the workspace (a symbolic link)")
        return real

    def read(self, path: str) -> bytes:
        with open(self._host(path), "rb") as handle:
            return handle.read()

    def write(self, path: str, data: bytes) -> None:
        target = self._host(path)
        current = os.path.getsize(target) if os.path.isfile(target) else 0
        if self.size() - current + len(data) > self.max_bytes:
            raise WorkspaceFull(
                f"the workspace would hold more than its cap of {self.max_bytes:,} bytes: remove files first"
            )
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self._host(os.path.relpath(os.path.dirname(target), self.root))  # a link made meanwhile
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def search(self, request: dict[str, object]) -> str:
        return search.run(self.root, request)

    def size(self) -> int:
        total = 0
        for directory, _dirs, files in os.walk(self.root, followlinks=False):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(directory, name)).st_size
        return total

    def entries(self) -> list[WorkspaceEntry]:
        return _entries(self.root)


def _entries(root: str) -> list[WorkspaceEntry]:
    out: list[WorkspaceEntry] = []
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        rel = os.path.relpath(directory, root)
        rel = "" if rel == "." else rel
        if not files and not dirs and rel:
            stat = os.lstat(directory)
            out.append(WorkspaceEntry(rel, 0, stat.st_mtime, "directory"))
        for name in sorted(files):
            full = os.path.join(directory, name)
            stat = os.lstat(full)
            kind = "symlink" if os.path.islink(full) else "file"
            out.append(WorkspaceEntry(f"{rel}/{name}" if rel else name, stat.st_size, stat.st_mtime, kind))
    return out


class LocalEngine:
    """Workspaces as directories under ``root`` (one per session), commands in bubblewrap."""

    name = "local"

    def __init__(self, root: Path, *, max_bytes: int, hidden: tuple[str, ...] = ()) -> None:
        self.root = root
        self.max_bytes = max_bytes
        home = Path.home()
        self.hidden = (
            *hidden,
            str(root),
            *(str(home / entry) for entry in HIDDEN_HOME),
        )

    def path(self, session_id: str) -> Path:
        if not session_id or "/" in session_id or session_id.startswith("."):
            raise ValueError(f"not a session id: {session_id!r}")
        return self.root / session_id

    def _meta(self, session_id: str) -> Path:
        return self.root / META / f"{session_id}.json"

    def sandbox(self, session_id: str, *, network: str) -> LocalSandbox:
        workspace = self.path(session_id)
        workspace.mkdir(parents=True, exist_ok=True)
        tasks = self.root / META / "tasks" / session_id
        return LocalSandbox(
            workspace, network=network, hidden=self.hidden, max_bytes=self.max_bytes, tasks=tasks
        )

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_dir()

    def is_ready(self, session_id: str) -> bool:
        return self._meta(session_id).is_file() and self.exists(session_id)

    def mark_ready(self, session_id: str) -> None:
        meta = self._meta(session_id)
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"ready_at": time.time()}))

    def copy(self, source_id: str, target_id: str) -> None:
        if not self.exists(source_id):
            return
        shutil.copytree(self.path(source_id), self.path(target_id), symlinks=True, dirs_exist_ok=True)
        if self.is_ready(source_id):
            self.mark_ready(target_id)

    def delete(self, session_id: str) -> None:
        shutil.rmtree(self.path(session_id), ignore_errors=True)
        shutil.rmtree(self.root / META / "tasks" / session_id, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self._meta(session_id).unlink()

    def entries(self, session_id: str) -> list[WorkspaceEntry]:
        return _entries(os.path.realpath(self.path(session_id))) if self.exists(session_id) else []

    def read(self, session_id: str, path: str) -> bytes:
        sandbox = LocalSandbox(self.path(session_id), network="none", hidden=(), max_bytes=self.max_bytes)
        return sandbox.read(path)
