"""The cloud engine: Amazon Bedrock AgentCore Code Interpreter, one interpreter session per skyloop session.

The stack deploys two custom code interpreters (``infra/constructs/environments.py``):
network mode ``SANDBOX`` for ``network: none`` and ``PUBLIC`` for ``network: public``,
each with an execution role that can read nothing of the stack (not the table,
the secrets nor the blob bucket). A skyloop session's first hosted call starts an
interpreter session (``StartCodeInterpreterSession``, its timeout the idle time
``SKYLOOP_HOSTED_IDLE_S``: AgentCore stops it when nothing ran for that long) and
records it in the session's ``ENVIRONMENT`` row; later calls reuse it.

Tools go through ``InvokeCodeInterpreter``: ``executeCommand`` for commands and for
Glob/Grep (:mod:`skyloop.environments.search` run by ``python3``), ``readFiles`` and
``writeFiles`` for Read, Write and Edit. Its answer is an event stream whose
``result`` carries ``structuredContent`` (``stdout``, ``stderr``, ``exitCode``).

**The workspace outlives the interpreter session.** At the end of each turn
(:func:`snapshot`) the files that changed since the last snapshot (by SHA-256)
are read and put, content-addressed, under ``sessions/<id>/workspace/`` in the
blob bucket, with a manifest. When a session's interpreter session is gone
(stopped when idle, expired, the 8-hour limit) the next call starts a new one
and writes the manifest's files back before it runs: a session idle for a week
resumes with its files, and meanwhile it costs only its snapshot in S3. Fork copies
the snapshot; delete stops the interpreter session (the snapshot goes with the
session's prefix). The files API lists and downloads from the snapshot.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import shlex
import time
from typing import TYPE_CHECKING, Any

from skyloop.environments.port import CommandResult, SandboxError, WorkspaceEntry, WorkspaceFull
from skyloop.workspace import WORKSPACE

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = WORKSPACE
GONE = ("ResourceNotFoundException", "ValidationException", "ConflictException")  # a session no longer there
MANIFEST = "manifest.json"
WRITE_BATCH = 50  # files per writeFiles while restoring
SNAPSHOT_BATCH = 20  # files per readFiles while snapshotting


def _search_source() -> str:
    from skyloop.environments import search

    return inspect.getsource(search)


class AgentCoreSandbox:
    """One skyloop session's interpreter session (started, or started again and restored, on demand)."""

    def __init__(
        self, engine: AgentCoreEngine, session_id: str, network: str, *, restart: bool = True
    ) -> None:
        self.engine = engine
        self.session_id = session_id
        self.network = network
        self.restart = restart  # False: use the session's interpreter session or fail (a snapshot)
        self._interpreter_session: str | None = None
        self._marked = False

    # ---------------------------------------------------------------------------------- the data plane
    def _invoke(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call on the session's interpreter session (a new one, restored, if it is gone)."""
        for attempt in (0, 1):
            interpreter_session = self._session(fresh=attempt == 1)
            try:
                return self.engine.invoke(self.network, interpreter_session, name, arguments)
            except SandboxError as exc:
                if attempt == 1 or not self.restart or getattr(exc, "code", None) not in GONE:
                    raise
        raise SandboxError("the interpreter session could not be reached")  # pragma: no cover

    def _session(self, *, fresh: bool) -> str:
        if self._interpreter_session is not None and not fresh:
            return self._interpreter_session
        record = self.engine.record(self.session_id)
        current = record.get("interpreter_session")
        if current and not fresh and record.get("network") == self.network:
            self._interpreter_session = str(current)
            return self._interpreter_session
        if not self.restart:
            raise InterpreterError("ResourceNotFoundException", "the session has no interpreter session")
        started = self.engine.start(self.network, self.session_id)
        self.engine.restore(started, self.network, self.session_id)
        winner = self.engine.set_session(self.session_id, started, self.network, replacing=current)
        if winner != started:  # another call of the session started one meanwhile: use it, stop ours
            self.engine.stop(self.network, started)
        self._interpreter_session = winner
        return winner

    # ---------------------------------------------------------------------------------- the port
    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        env: dict[str, str],
        on_output: Callable[[str], None] | None = None,
    ) -> CommandResult:
        wrapped, seconds = self._wrapped(command, timeout_s, env)  # `timeout -s KILL` ends it at its limit
        started = time.monotonic()
        self._changing()
        result = self._invoke("executeCommand", {"command": wrapped})
        structured = result.get("structuredContent") or {}
        output = (structured.get("stdout") or "") + (structured.get("stderr") or "")
        if not structured:
            output = _text(result)
        if on_output is not None and output:
            on_output(output)
        code = structured.get("exitCode")
        timed_out = code == 137 and (time.monotonic() - started) >= seconds - 0.5
        duration_ms = int(float(structured.get("executionTime") or (time.monotonic() - started)) * 1000)
        return CommandResult(None if timed_out else code, output, duration_ms, timed_out)

    # ---------------------------------------------------------------------------------- long commands
    def _wrapped(self, command: str, timeout_s: float, env: dict[str, str]) -> tuple[str, int]:
        exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
        seconds = max(1, int(timeout_s + 0.999))
        return (
            f"mkdir -p {ROOT} && cd {ROOT} && env HOME={ROOT} {exports} "
            f"timeout -s KILL {seconds} /bin/sh -c {shlex.quote(command)}"
        ), seconds

    def start(self, task: str, command: str, *, timeout_s: float, env: dict[str, str]) -> None:
        """``startCommandExecution``: the interpreter runs it while the state machine waits and polls."""
        if self.engine.task_record(self.session_id, task):
            return  # started already (a retried invocation)
        wrapped, seconds = self._wrapped(command, timeout_s, env)
        self._changing()
        result = self._invoke("startCommandExecution", {"command": wrapped})
        task_id = (result.get("structuredContent") or {}).get("taskId")
        if not task_id:
            raise SandboxError(f"the interpreter started no task: {_text(result)[:300]}")
        self.engine.set_task(
            self.session_id, task, {"task_id": task_id, "command": command, "timeout_s": seconds}
        )

    def task(
        self, task: str, *, wait_s: float, on_output: Callable[[str], None] | None = None
    ) -> CommandResult | None:
        record = self.engine.task_record(self.session_id, task)
        if not record:
            raise SandboxError(f"no command {task} was started")
        deadline = time.monotonic() + wait_s
        while True:
            result = self._invoke("getTask", {"taskId": record["task_id"]})
            structured = result.get("structuredContent") or {}
            status = structured.get("taskStatus")
            if status in ("completed", "failed", "canceled"):
                output = (structured.get("stdout") or "") + (structured.get("stderr") or "")
                if on_output is not None and output:
                    on_output(output)
                code = structured.get("exitCode")
                elapsed = float(structured.get("executionTime") or 0)
                timed_out = code == 137 and elapsed >= record["timeout_s"] - 0.5
                return CommandResult(None if timed_out else code, output, int(elapsed * 1000), timed_out)
            if time.monotonic() >= deadline:
                return None
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))

    def command_of(self, task: str) -> str:
        return str(self.engine.task_record(self.session_id, task).get("command", ""))

    def stop(self, task: str) -> None:
        record = self.engine.task_record(self.session_id, task)
        if record:
            self._invoke("stopTask", {"taskId": record["task_id"]})

    def read(self, path: str) -> bytes:
        result = self._invoke("readFiles", {"paths": [f"{ROOT}/{path}"]})
        if result.get("isError"):
            raise FileNotFoundError(_text(result) or f"{ROOT}/{path}")
        for block in result.get("content") or []:
            resource = block.get("resource") or {}
            if resource.get("blob") is not None:
                return _bytes(resource["blob"])
            if resource.get("text") is not None:
                return str(resource["text"]).encode("utf-8")
            if block.get("data") is not None:
                return _bytes(block["data"])
            if block.get("text") is not None and block.get("type") != "resource_link":
                return str(block["text"]).encode("utf-8")
        raise FileNotFoundError(f"{ROOT}/{path}")

    def write(self, path: str, data: bytes) -> None:
        used = self._used_bytes()
        if used + len(data) > self.engine.max_bytes:
            raise WorkspaceFull(
                f"the workspace would hold more than its cap of {self.engine.max_bytes:,} bytes: remove files first"
            )
        self._changing()
        self.engine.write_files({path: data}, invoke=self._invoke)

    def _changing(self) -> None:
        """Count a change the next snapshot takes (once per call: commands and writes may change files)."""
        if not self._marked and self.restart:
            self.engine.count_change(self.session_id)
            self._marked = True

    def _used_bytes(self) -> int:
        result = self.run(f"du -sb {ROOT} 2>/dev/null | cut -f1", timeout_s=30, env={})
        try:
            return int(result.output.strip() or 0)
        except ValueError:
            return 0

    def search(self, request: dict[str, object]) -> str:
        command = f"python3 -c {shlex.quote(_search_source())} {ROOT} {shlex.quote(json.dumps(request))}"
        return self.run(command, timeout_s=60, env={}).output

    def entries(self) -> list[WorkspaceEntry]:
        return self.engine.entries(self.session_id)

    def manifest_now(self) -> dict[str, dict[str, Any]]:
        """Every file of the workspace with its SHA-256, size and modification time, as it is now."""
        script = (
            "import hashlib,json,os\n"
            f"r={ROOT!r}\nout={{}}\n"
            "for d,ds,fs in os.walk(r):\n"
            " for n in fs:\n"
            "  p=os.path.join(d,n)\n"
            "  if os.path.islink(p) or not os.path.isfile(p): continue\n"
            "  h=hashlib.sha256(open(p,'rb').read()).hexdigest()\n"
            "  s=os.stat(p)\n"
            "  out[os.path.relpath(p,r)]={'sha256':h,'bytes':s.st_size,'modified_at':s.st_mtime}\n"
            "print(json.dumps(out))\n"
        )
        result = self.run(f"python3 -c {shlex.quote(script)}", timeout_s=120, env={})
        try:
            found = json.loads(result.output.strip().splitlines()[-1]) if result.output.strip() else {}
        except (ValueError, IndexError):
            raise SandboxError(f"the workspace could not be listed: {result.output[-500:]}") from None
        return found if isinstance(found, dict) else {}


def _text(result: dict[str, Any]) -> str:
    return "".join(str(b.get("text") or "") for b in result.get("content") or [] if b.get("type") == "text")


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return base64.b64decode(value)


class AgentCoreEngine:
    """Workspaces in AgentCore Code Interpreter sessions, snapshotted to the blob bucket."""

    name = "agentcore"

    def __init__(
        self,
        interpreters: tuple[str, str],
        bucket: str | None,
        table: str,
        idle_s: int,
        *,
        max_bytes: int,
    ) -> None:
        self.interpreters = {"none": interpreters[0], "public": interpreters[1] or interpreters[0]}
        self.bucket = bucket
        self.table = table
        self.idle_s = idle_s
        self.max_bytes = max_bytes

    # ---------------------------------------------------------------------------------- clients
    @staticmethod
    def _client(service: str) -> Any:
        from skyloop import deps

        return deps.client(service)

    def _interpreter(self, network: str) -> str:
        identifier = self.interpreters.get(network)
        if not identifier:
            raise SandboxError(
                "this deployment has no code interpreter (SKYLOOP_CODE_INTERPRETER_ID is not set)"
            )
        return identifier

    def invoke(
        self, network: str, interpreter_session: str, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """``InvokeCodeInterpreter``; the stream's ``result``, or a SandboxError with the error's code."""
        from botocore.exceptions import ClientError

        try:
            answer = self._client("bedrock-agentcore").invoke_code_interpreter(
                codeInterpreterIdentifier=self._interpreter(network),
                sessionId=interpreter_session,
                name=name,
                arguments=arguments,
            )
        except ClientError as exc:
            raise _error(exc.response.get("Error", {}).get("Code", ""), str(exc)) from None
        result: dict[str, Any] = {}
        for event in answer["stream"]:
            if "result" in event:
                result = event["result"]
                continue
            ((kind, body),) = event.items()
            code = kind[0].upper() + kind[1:]
            raise _error(code, str((body or {}).get("message") or kind))
        return result

    def start(self, network: str, session_id: str) -> str:
        from botocore.exceptions import ClientError

        try:
            answer = self._client("bedrock-agentcore").start_code_interpreter_session(
                codeInterpreterIdentifier=self._interpreter(network),
                name=f"skyloop-{session_id}"[:100],
                sessionTimeoutSeconds=self.idle_s,
            )
        except ClientError as exc:
            raise _error(exc.response.get("Error", {}).get("Code", ""), str(exc)) from None
        return str(answer["sessionId"])

    # ---------------------------------------------------------------------------------- the record
    def record(self, session_id: str) -> dict[str, Any]:
        from skyloop.store import codec, keys

        got = self._client("dynamodb").get_item(
            TableName=self.table, Key=codec.to_item(keys.environment_key(session_id)), ConsistentRead=True
        )
        return codec.from_item(got["Item"]) if "Item" in got else {}

    def set_session(self, session_id: str, interpreter_session: str, network: str, *, replacing: Any) -> str:
        """Record the interpreter session in use, unless another call replaced ``replacing`` first
        (conditional); the one in use. The row is under the session: deleted with it."""
        from skyloop.store import codec, keys

        client = self._client("dynamodb")
        values = {
            ":s": codec.attr(interpreter_session),
            ":n": codec.attr(network),
            ":t": codec.attr(int(time.time())),
        }
        if replacing:
            condition, values[":old"] = "interpreter_session = :old", codec.attr(str(replacing))
        else:
            condition = "attribute_not_exists(interpreter_session)"
        try:
            client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.environment_key(session_id)),
                UpdateExpression="SET interpreter_session = :s, network = :n, started_at = :t",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
        except client.exceptions.ConditionalCheckFailedException:
            return str(self.record(session_id).get("interpreter_session") or interpreter_session)
        return interpreter_session

    def stop(self, network: str, interpreter_session: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._client("bedrock-agentcore").stop_code_interpreter_session(
                codeInterpreterIdentifier=self._interpreter(network), sessionId=interpreter_session
            )
        except ClientError:
            return  # already stopped or expired

    def sandbox(self, session_id: str, *, network: str) -> AgentCoreSandbox:
        return AgentCoreSandbox(self, session_id, network)

    def exists(self, session_id: str) -> bool:
        return bool(self.record(session_id))

    def is_ready(self, session_id: str) -> bool:
        return bool(self.record(session_id).get("ready"))

    def task_record(self, session_id: str, task: str) -> dict[str, Any]:
        raw = self.record(session_id).get(f"task_{task}")
        return json.loads(raw) if isinstance(raw, str) else {}

    def set_task(self, session_id: str, task: str, value: dict[str, Any]) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="SET #t = :v",
            ExpressionAttributeNames={"#t": f"task_{task}"},
            ExpressionAttributeValues={":v": codec.attr(json.dumps(value))},
        )

    def count_change(self, session_id: str) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="ADD changes :one",
            ExpressionAttributeValues={":one": codec.attr(1)},
        )

    def _snapshotted(self, session_id: str, changes: int) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="SET snapshotted = :c",
            ExpressionAttributeValues={":c": codec.attr(changes)},
        )

    def mark_ready(self, session_id: str) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="SET ready = :t",
            ExpressionAttributeValues={":t": codec.attr(True)},
        )

    # ---------------------------------------------------------------------------------- snapshots
    def _manifest(self, session_id: str) -> dict[str, dict[str, Any]]:
        from skyloop.store import keys

        if not self.bucket:
            return {}
        try:
            got = self._client("s3").get_object(
                Bucket=self.bucket, Key=keys.workspace_blob_prefix(session_id) + MANIFEST
            )
        except self._client("s3").exceptions.NoSuchKey:
            return {}
        found = json.loads(got["Body"].read())
        return found if isinstance(found, dict) else {}

    def snapshot(self, session_id: str) -> int:
        """Put what changed since the last snapshot; the number of files put."""
        from skyloop.store import keys

        record = self.record(session_id)
        changes = int(record.get("changes") or 0)
        if (
            not self.bucket
            or not record.get("interpreter_session")
            or changes <= int(record.get("snapshotted") or 0)
        ):
            return 0  # nothing ran since the last snapshot
        network = str(record.get("network") or "none")
        sandbox = AgentCoreSandbox(self, session_id, network, restart=False)
        try:
            now = sandbox.manifest_now()
        except InterpreterError as exc:
            if exc.code in GONE:  # stopped meanwhile: what it held since the last snapshot is gone with it
                return 0
            raise
        before = self._manifest(session_id)
        changed = [p for p, meta in now.items() if before.get(p, {}).get("sha256") != meta["sha256"]]
        prefix = keys.workspace_blob_prefix(session_id)
        s3 = self._client("s3")
        for start in range(0, len(changed), SNAPSHOT_BATCH):
            for path in changed[start : start + SNAPSHOT_BATCH]:
                data = sandbox.read(path)
                digest = hashlib.sha256(data).hexdigest()
                s3.put_object(Bucket=self.bucket, Key=f"{prefix}blobs/{digest}", Body=data)
        if changed or set(before) != set(now):
            s3.put_object(Bucket=self.bucket, Key=prefix + MANIFEST, Body=json.dumps(now).encode())
        self._snapshotted(session_id, changes)  # a change counted meanwhile stays for the next one
        return len(changed)

    def restore(self, interpreter_session: str, network: str, session_id: str) -> None:
        """Write the last snapshot's files into a new interpreter session."""
        from skyloop.store import keys

        manifest = self._manifest(session_id)
        if not manifest:
            return
        prefix = keys.workspace_blob_prefix(session_id)
        s3 = self._client("s3")
        paths = sorted(manifest)
        for start in range(0, len(paths), WRITE_BATCH):
            files = {
                p: s3.get_object(Bucket=self.bucket, Key=f"{prefix}blobs/{manifest[p]['sha256']}")[
                    "Body"
                ].read()
                for p in paths[start : start + WRITE_BATCH]
            }
            self.write_files(
                files,
                invoke=lambda name, arguments: self.invoke(network, interpreter_session, name, arguments),
            )

    def write_files(
        self, files: dict[str, bytes], *, invoke: Callable[[str, dict[str, Any]], dict[str, Any]]
    ) -> None:
        content: list[dict[str, Any]] = []
        for path, data in files.items():
            try:
                content.append({"path": f"{ROOT}/{path}", "text": data.decode("utf-8")})
            except UnicodeDecodeError:
                content.append({"path": f"{ROOT}/{path}", "blob": data})
        result = invoke("writeFiles", {"content": content})
        if result.get("isError"):
            raise SandboxError(f"the files could not be written: {_text(result)[:500]}")

    # ---------------------------------------------------------------------------------- lifecycle
    def copy(self, source_id: str, target_id: str) -> None:
        """Fork: the source's snapshot becomes the target's (its files come back on its first call)."""
        from skyloop.store import keys

        if not self.bucket:
            return
        self.snapshot(source_id)
        manifest = self._manifest(source_id)
        if not manifest:
            return
        s3 = self._client("s3")
        source, target = keys.workspace_blob_prefix(source_id), keys.workspace_blob_prefix(target_id)
        for digest in sorted({meta["sha256"] for meta in manifest.values()}):
            s3.copy_object(
                Bucket=self.bucket,
                Key=f"{target}blobs/{digest}",
                CopySource={"Bucket": self.bucket, "Key": f"{source}blobs/{digest}"},
            )
        s3.put_object(Bucket=self.bucket, Key=target + MANIFEST, Body=json.dumps(manifest).encode())
        if self.is_ready(source_id):
            self.mark_ready(target_id)

    def delete(self, session_id: str) -> None:
        """Stop the interpreter session (the snapshot and the row go with the session)."""
        self.deleter(session_id)()

    def deleter(self, session_id: str) -> Callable[[], None]:
        """Stopping the session's interpreter session, its record read now (it goes with the session)."""
        record = self.record(session_id)
        current = record.get("interpreter_session")
        network = str(record.get("network") or "none")

        def stop() -> None:
            if current:
                self.stop(network, str(current))

        return stop

    def entries(self, session_id: str) -> list[WorkspaceEntry]:
        manifest = self._manifest(session_id)
        return [
            WorkspaceEntry(path, int(meta.get("bytes", 0)), float(meta.get("modified_at", 0)))
            for path, meta in sorted(manifest.items())
        ]

    def read(self, session_id: str, path: str) -> bytes:
        from skyloop.store import keys

        meta = self._manifest(session_id).get(path)
        if meta is None or not self.bucket:
            raise FileNotFoundError(path)
        key = f"{keys.workspace_blob_prefix(session_id)}blobs/{meta['sha256']}"
        return bytes(self._client("s3").get_object(Bucket=self.bucket, Key=key)["Body"].read())


class InterpreterError(SandboxError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(code: str, message: str) -> InterpreterError:
    return InterpreterError(code, f"the code interpreter answered {code or 'an error'}: {message}")
