"""The cloud engine: Amazon Bedrock AgentCore Code Interpreter, one interpreter session per skyloop session.

The stack deploys two custom code interpreters (``infra/constructs/environments.py``):
network mode ``SANDBOX`` for ``network: none`` and ``PUBLIC`` for ``network: public``,
each with an execution role that can read nothing of the stack (not the table,
the secrets nor the blob bucket). A skyloop session's first hosted call starts an
interpreter session (``StartCodeInterpreterSession``) and records it in the
session's ``ENVIRONMENT`` row; later calls reuse it. AgentCore's
``sessionTimeoutSeconds`` is a lifetime ("regardless of ongoing activity"), not
an idle time: sessions are started for the longest one (8 hours), a call past
:data:`ROTATE_AFTER_S` moves the workspace to a new session first (so no call
meets the end), and skyloop stops a session itself once it has been idle for
``SKYLOOP_HOSTED_IDLE_S`` (:meth:`AgentCoreEngine.stop_idle`, on the reconciler's
schedule; each command or write moves the row's entry in the ``due_schedules``
index on).

Tools go through ``InvokeCodeInterpreter``: ``executeCommand`` for commands and for
Glob/Grep (:mod:`skyloop.environments.search` run by ``python3``), ``readFiles`` and
``writeFiles`` for Read, Write and Edit. Its answer is an event stream whose
``result`` carries ``structuredContent`` (``stdout``, ``stderr``, ``exitCode``).

**The workspace outlives the interpreter session.** At the end of each turn
(:func:`snapshot`) the files that changed since the last snapshot (by SHA-256)
are read and put, content-addressed, under ``sessions/<id>/workspace/`` in the
blob bucket, with a manifest (each file's mode, symbolic links and empty
directories included). When a session's interpreter session is gone (stopped
when idle, rotated, expired) the next call starts a new one, writes the
manifest's files back and runs the environment's ``setup`` again (what it
installed outside ``/workspace`` went with the old session; the ``files`` are
written once, at the first call): a session idle for a week resumes with its
files, and meanwhile it costs only its snapshot in S3. Stopping a session
(idle, rotation) snapshots it first, so a failed or cancelled turn's changes are
kept too, and it goes ahead only if no call counted a change since that snapshot
(a call counts its change on the row, conditionally on the session it uses,
before it runs). Fork copies the snapshot; delete stops the interpreter session
(the snapshot goes with the session's prefix). The files API lists and downloads
from the snapshot.
"""

from __future__ import annotations

import base64
import contextlib
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
LIFETIME_S = 28_800  # AgentCore's longest interpreter session (its sessionTimeoutSeconds is a lifetime)
ROTATE_AFTER_S = (
    LIFETIME_S - 7_200
)  # older than this, a call moves to a new session first: no call outlives it
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
            aged = time.time() - float(record.get("started_at") or 0) > ROTATE_AFTER_S
            if not (aged and self.restart and self._retired(record)):
                self._interpreter_session = str(current)
                return self._interpreter_session
            current = None  # retired: its files are in the snapshot the new one starts from
        if not self.restart:
            raise InterpreterError("ResourceNotFoundException", "the session has no interpreter session")
        started = self.engine.start(self.network, self.session_id)
        self.engine.restore(started, self.network, self.session_id)
        winner = self.engine.set_session(self.session_id, started, self.network, replacing=current)
        if winner != started:  # another call of the session started one meanwhile: use it, stop ours
            self.engine.stop(self.network, started)
        self._interpreter_session = winner
        return winner

    def _retired(self, record: dict[str, Any]) -> bool:
        """Move off an interpreter session near its end; one that cannot be moved now is used as it is."""
        try:
            return self.engine.retire(self.session_id, record)
        except Exception:  # the next call tries again; this one runs where the workspace is
            from skyloop.observability import logger

            logger.exception(
                "an aged interpreter session could not be moved", extra={"session": self.session_id}
            )
            return False

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
        """Count a change the next snapshot takes (once per call: commands and writes may change files),
        on the interpreter session the call runs in: one stopped or replaced meanwhile is not used."""
        if self._marked or not self.restart:
            return
        for _ in (0, 1):
            if self.engine.count_change(self.session_id, self._session(fresh=False)):
                self._marked = True
                return
            self._interpreter_session = None  # stopped (idle) or replaced since it was read: read again
        raise SandboxError("the interpreter session changed twice while a call started; try again")

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
            "import hashlib,json,os,stat\n"
            f"r={ROOT!r}\nout={{}}\n"
            "for d,ds,fs in os.walk(r):\n"
            " rel=os.path.relpath(d,r)\n"
            " if rel!='.' and not ds and not fs: out[rel]={'dir':True,'mode':stat.S_IMODE(os.stat(d).st_mode)}\n"
            " for n in ds+fs:\n"
            "  p=os.path.join(d,n)\n"
            "  if os.path.islink(p):\n"
            "   out[os.path.relpath(p,r)]={'link':os.readlink(p)}; continue\n"
            "  if n in ds or not os.path.isfile(p): continue\n"
            "  h=hashlib.sha256(open(p,'rb').read()).hexdigest()\n"
            "  s=os.stat(p)\n"
            "  out[os.path.relpath(p,r)]={'sha256':h,'bytes':s.st_size,'modified_at':s.st_mtime,"
            "'mode':stat.S_IMODE(s.st_mode)}\n"
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
                sessionTimeoutSeconds=LIFETIME_S,
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
        now = int(time.time())
        values = {
            ":s": codec.attr(interpreter_session),
            ":n": codec.attr(network),
            ":t": codec.attr(now),
            **self._idle_values(session_id, now),
        }
        if replacing:
            condition, values[":old"] = "interpreter_session = :old", codec.attr(str(replacing))
        else:
            condition = "attribute_not_exists(interpreter_session)"
        try:
            client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.environment_key(session_id)),
                UpdateExpression=(
                    "SET interpreter_session = :s, network = :n, started_at = :t, #dk = :dk, #da = :da"
                ),
                ExpressionAttributeNames=self._idle_names(),
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
        """The setup ran in the session's current interpreter session (a new one runs it again), and
        that session is not due to be rotated (the setup then runs in the one that replaces it)."""
        record = self.record(session_id)
        current = record.get("interpreter_session")
        young = time.time() - float(record.get("started_at") or 0) <= ROTATE_AFTER_S
        return bool(current) and record.get("ready_in") == current and young

    def is_seeded(self, session_id: str) -> bool:
        """The environment's files were written once (a restored workspace has them, as they were left)."""
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

    def count_change(self, session_id: str, interpreter_session: str) -> bool:
        """Count a change on ``interpreter_session`` and move its idle time on; False if the session's
        interpreter session is another one now (stopped or replaced since it was read)."""
        from skyloop.store import codec, keys

        client = self._client("dynamodb")
        try:
            client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.environment_key(session_id)),
                UpdateExpression="ADD changes :one SET #dk = :dk, #da = :da",
                ConditionExpression="interpreter_session = :s",
                ExpressionAttributeNames=self._idle_names(),
                ExpressionAttributeValues={
                    ":one": codec.attr(1),
                    ":s": codec.attr(interpreter_session),
                    **self._idle_values(session_id, int(time.time())),
                },
            )
        except client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    @staticmethod
    def _idle_names() -> dict[str, str]:
        from skyloop.store import keys

        return {"#dk": keys.DUE_KEY, "#da": keys.DUE_AT_KEY}

    def _idle_values(self, session_id: str, now: int) -> dict[str, Any]:
        """The ``due_schedules`` entry of an interpreter session used at ``now``: due once idle that long."""
        from skyloop.store import codec, keys

        return {
            ":dk": codec.attr(keys.idle_index_value(session_id)),
            ":da": codec.attr(keys.due_at_value(now + self.idle_s, session_id)),
        }

    def _snapshotted(self, session_id: str, changes: int) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="SET snapshotted = :c",
            ExpressionAttributeValues={":c": codec.attr(changes)},
        )

    def mark_ready(self, session_id: str) -> None:
        """The files are written and the setup ran, in the interpreter session the row names now."""
        from skyloop.store import codec, keys

        client = self._client("dynamodb")
        key = codec.to_item(keys.environment_key(session_id))
        current = self.record(session_id).get("interpreter_session")
        if not current:  # nothing ran yet (no files, no setup): the first call's session runs the setup
            self._seed(session_id)
            return
        with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):  # replaced: not ready
            client.update_item(
                TableName=self.table,
                Key=key,
                UpdateExpression="SET ready = :t, ready_in = :s",
                ConditionExpression="interpreter_session = :s",
                ExpressionAttributeValues={":t": codec.attr(True), ":s": codec.attr(str(current))},
            )

    def _seed(self, session_id: str) -> None:
        from skyloop.store import codec, keys

        self._client("dynamodb").update_item(
            TableName=self.table,
            Key=codec.to_item(keys.environment_key(session_id)),
            UpdateExpression="SET ready = :t",
            ExpressionAttributeValues={":t": codec.attr(True)},
        )

    # ---------------------------------------------------------------------------------- idle sessions
    def retire(self, session_id: str, record: dict[str, Any]) -> bool:
        """Snapshot the session's interpreter session and stop it, unless a call counted a change since
        the snapshot (it goes on in it); True once stopped (the next call starts one and restores)."""
        from skyloop.store import codec, keys

        current = record.get("interpreter_session")
        if not current:
            return True
        self.snapshot(session_id)
        client = self._client("dynamodb")
        try:
            client.update_item(
                TableName=self.table,
                Key=codec.to_item(keys.environment_key(session_id)),
                UpdateExpression="REMOVE interpreter_session, ready_in, #dk, #da",
                ConditionExpression=(
                    "interpreter_session = :s AND (attribute_not_exists(changes) OR changes = snapshotted)"
                ),
                ExpressionAttributeNames=self._idle_names(),
                ExpressionAttributeValues={":s": codec.attr(str(current))},
            )
        except client.exceptions.ConditionalCheckFailedException:
            return False
        self.stop(str(record.get("network") or "none"), str(current))
        return True

    def stop_idle(self, now: int | None = None) -> list[str]:
        """Stop the interpreter sessions idle for ``SKYLOOP_HOSTED_IDLE_S`` (their workspace snapshotted
        first) whose skyloop session runs no turn; the skyloop sessions whose one was stopped."""
        return [session_id for session_id, _ in self.stop_idle_sessions(now)]

    def stop_idle_sessions(self, now: int | None = None) -> list[tuple[str, str]]:
        """:meth:`stop_idle`, with the interpreter session each stop ended (what the stop's
        ``suspended`` event is deduplicated on: one per stopped interpreter session)."""
        from skyloop.store import codec, keys

        now = int(time.time()) if now is None else now
        bound = keys.due_at_value(now, "g")  # "g" sorts after every hex id: the whole second counts
        client = self._client("dynamodb")
        stopped: list[tuple[str, str]] = []
        for shard in keys.RUNNING_SHARDS:
            pages = client.get_paginator("query").paginate(
                TableName=self.table,
                IndexName=keys.INDEX_DUE,
                KeyConditionExpression="#dk = :v AND #da <= :bound",
                ExpressionAttributeNames=self._idle_names(),
                ExpressionAttributeValues={":v": codec.attr(f"idle#{shard}"), ":bound": codec.attr(bound)},
            )
            for page in pages:
                for raw in page.get("Items", []):
                    session_id = str(codec.from_item(raw)[keys.PK]).removeprefix("SESSION#")
                    try:
                        ended = self._stop_if_idle(session_id, now, bound)
                        if ended is not None:
                            stopped.append((session_id, ended))
                    except Exception:  # one session's failure stops no other's
                        from skyloop.observability import logger

                        logger.exception("an idle interpreter session could not be stopped")
        return stopped

    def _stop_if_idle(self, session_id: str, now: int, bound: str) -> str | None:
        """The interpreter session stopped (idle, no turn running, nothing changed since its snapshot)."""
        from skyloop.store import codec, keys

        record = self.record(session_id)  # the index is eventually consistent: the row decides
        current = record.get("interpreter_session")
        if not current or str(record.get(keys.DUE_AT_KEY) or "") > bound:
            return None
        session = self._client("dynamodb").get_item(
            TableName=self.table,
            Key=codec.to_item(keys.session_key(session_id)),
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
            ConsistentRead=True,
        )
        if codec.from_item(session.get("Item", {})).get("status") == "running":  # a long command, a turn
            client = self._client("dynamodb")
            with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
                client.update_item(
                    TableName=self.table,
                    Key=codec.to_item(keys.environment_key(session_id)),
                    UpdateExpression="SET #da = :da",
                    ConditionExpression="interpreter_session = :s",
                    ExpressionAttributeNames={"#da": keys.DUE_AT_KEY},
                    ExpressionAttributeValues={
                        ":da": self._idle_values(session_id, now)[":da"],
                        ":s": codec.attr(str(current)),
                    },
                )
            return None
        return str(current) if self.retire(session_id, record) else None

    # ---------------------------------------------------------------------------------- snapshots
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
                self._snapshotted(session_id, changes)
                return 0
            raise
        before = self._manifest(session_id)
        changed = [
            p
            for p, meta in now.items()
            if "sha256" in meta and before.get(p, {}).get("sha256") != meta["sha256"]
        ]
        prefix = keys.workspace_blob_prefix(session_id)
        s3 = self._client("s3")
        for start in range(0, len(changed), SNAPSHOT_BATCH):
            for path in changed[start : start + SNAPSHOT_BATCH]:
                data = sandbox.read(path)
                digest = hashlib.sha256(data).hexdigest()
                s3.put_object(Bucket=self.bucket, Key=f"{prefix}blobs/{digest}", Body=data)
        if now != before:
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
        paths = sorted(p for p, meta in manifest.items() if "sha256" in meta)

        def invoke(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return self.invoke(network, interpreter_session, name, arguments)

        for start in range(0, len(paths), WRITE_BATCH):
            files = {
                p: s3.get_object(Bucket=self.bucket, Key=f"{prefix}blobs/{manifest[p]['sha256']}")[
                    "Body"
                ].read()
                for p in paths[start : start + WRITE_BATCH]
            }
            self.write_files(files, invoke=invoke)
        # writeFiles keeps no mode and makes no link or empty directory: one command puts them back
        script = (
            "import json,os,sys\n"
            f"r={ROOT!r}\n"
            "for p,m in sorted(json.loads(sys.argv[1]).items()):\n"
            " q=os.path.join(r,p)\n"
            " if 'link' in m:\n"
            "  os.makedirs(os.path.dirname(q),exist_ok=True)\n"
            "  if os.path.lexists(q): os.remove(q)\n"
            "  os.symlink(m['link'],q); continue\n"
            " if m.get('dir'): os.makedirs(q,exist_ok=True)\n"
            " if 'mode' in m: os.chmod(q,m['mode'])\n"
        )
        shape = {p: {k: v for k, v in m.items() if k in ("link", "dir", "mode")} for p, m in manifest.items()}
        result = invoke(
            "executeCommand",
            {"command": f"python3 -c {shlex.quote(script)} {shlex.quote(json.dumps(shape))}"},
        )
        code = (result.get("structuredContent") or {}).get("exitCode")
        if result.get("isError") or code not in (0, None):
            raise SandboxError(
                f"the workspace's modes and links could not be restored: {_text(result)[:500]}"
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
        if self.is_seeded(source_id):  # the fork's files came with the snapshot; its setup runs on first use
            self._seed(target_id)

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
            if "sha256" in meta  # files; links and empty directories are kept, not listed
        ]

    def read(self, session_id: str, path: str) -> bytes:
        from skyloop.store import keys

        meta = self._manifest(session_id).get(path)
        if meta is None or "sha256" not in meta or not self.bucket:
            raise FileNotFoundError(path)
        key = f"{keys.workspace_blob_prefix(session_id)}blobs/{meta['sha256']}"
        return bytes(self._client("s3").get_object(Bucket=self.bucket, Key=key)["Body"].read())


class InterpreterError(SandboxError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(code: str, message: str) -> InterpreterError:
    return InterpreterError(code, f"the code interpreter answered {code or 'an error'}: {message}")
